// BufferPool: buffers come back for reuse without being reallocated.
#include "common/buffer_pool.h"

#include <catch2/catch.hpp>

#include <thread>

using namespace dgld;

TEST_CASE("a buffer handed back is reused, its memory untouched") {
  BufferPool pool(2);
  auto a = pool.take(1000);
  REQUIRE(a.size() == 1000);
  a[999] = 42.0f;
  const float* mem = a.data();
  pool.give(std::move(a));
  CHECK(pool.idle() == 1);
  auto b = pool.take(500);  // smaller: the same memory, nothing re-initialised
  CHECK(b.data() == mem);
  CHECK(b.size() == 500);
  pool.give(std::move(b));
  auto c = pool.take(1000);  // back to 1000: the same memory again
  CHECK(c.data() == mem);
  CHECK(pool.idle() == 0);
}

TEST_CASE("the pool keeps at most its limit and the largest buffer is taken first") {
  BufferPool pool(2);
  std::vector<float> small(10), mid(100), large(1000);
  const float* large_mem = large.data();
  pool.give(std::move(small));
  pool.give(std::move(large));
  pool.give(std::move(mid));  // over the limit: freed
  CHECK(pool.idle() == 2);
  CHECK(pool.take(5).data() == large_mem);
  pool.give(std::vector<float>{});  // nothing to keep
  CHECK(pool.idle() == 1);
}

TEST_CASE("a larger take starts a fresh buffer with headroom; idle_bytes counts the kept capacity") {
  BufferPool pool(2);
  auto a = pool.take(1000);
  const size_t kept = a.capacity();
  CHECK(kept >= 1000);
  pool.give(std::move(a));
  CHECK(pool.idle_bytes() == kept * sizeof(float));
  auto b = pool.take(kept + 1000);  // larger than any idle buffer: not grown by a copy, room for a bit more
  CHECK(b.size() == kept + 1000);
  CHECK(b.capacity() >= (kept + 1000) + (kept + 1000) / 8);
  CHECK(pool.idle() == 0);
  const float* mem = b.data();
  pool.give(std::move(b));
  CHECK(pool.take(kept + 1100).data() == mem);  // within the headroom: the same memory
}

TEST_CASE("take and give from several threads") {
  BufferPool pool(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        auto v = pool.take(100 + i % 7);
        v[0] = 1.0f;
        pool.give(std::move(v));
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(pool.idle() <= 4);
}
