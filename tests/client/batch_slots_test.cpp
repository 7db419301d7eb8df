// Batch slots (client/batch_slots.h): the layout both sides compute,
// a slot held by a batch is not handed out again, a slot asked to grow is
// replaced by a larger segment under a new name, and the worker's side maps
// only batch-slot segments and follows a slot's generations.
#include "client/batch_slots.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "common/shm/shared_segment.h"

using namespace dgld;
using namespace dgld::client;

namespace {
std::string job() { return "slots-test-" + std::to_string(::getpid()); }
}  // namespace

TEST_CASE("batch slot layout: arrays in order, 64-byte aligned, sizes checked") {
  BatchShape s;
  s.blocks = {{10, 30, 55}, {4, 10, 12}};
  s.feature_dim = 3;
  s.has_labels = true;
  auto l = batch_slot_layout(s);
  REQUIRE(l.is_ok());
  REQUIRE(l->blocks.size() == 2);
  CHECK(l->blocks[0].dst_nodes == 0);
  CHECK(l->blocks[0].src_nodes == 128);         // 10 x 8 = 80 -> 128
  CHECK(l->blocks[0].indptr == 128 + 256);      // 30 x 8 = 240 -> 256
  CHECK(l->blocks[0].indices == 384 + 128);     // 11 x 8 = 88 -> 128
  CHECK(l->blocks[0].eids == 512 + 448);        // 55 x 8 = 440 -> 448
  CHECK(l->blocks[1].dst_nodes == 960 + 448);
  const size_t f = l->features;
  CHECK(f % 64 == 0);
  CHECK(l->labels == f + 384);                  // 30 rows x 3 floats = 360 -> 384
  CHECK(l->total == l->labels + 64);            // 4 labels
  s.blocks[0].num_dst = 9;                      // no longer chains into block 1
  CHECK_FALSE(batch_slot_layout(s).is_ok());
  s.blocks[0] = {10, 5, 1};                     // fewer src than dst
  CHECK_FALSE(batch_slot_layout(s).is_ok());
}

TEST_CASE("batch slots: a held slot stays busy, a released one comes back, growing renames it") {
  auto slots = BatchSlots::create(job(), 0, "t1", 2, 1000);
  REQUIRE(slots.is_ok());
  auto& s = **slots;
  auto a = s.acquire();
  auto b = s.acquire();
  REQUIRE(a);
  REQUIRE(b);
  CHECK_FALSE(s.acquire());  // both busy
  CHECK(a->size() >= 1000);
  const std::string a_name = a->name();
  std::shared_ptr<const std::byte> held = std::move(*a).hold(64);
  a.reset();           // the lease moved into `held`: still busy
  CHECK(s.busy() == 2);
  b->grow_to(size_t{3} << 20);
  const std::string b_name = b->name();
  b.reset();           // released, and replaced by a larger segment
  CHECK(s.busy() == 1);
  auto c = s.acquire();
  REQUIRE(c);
  CHECK(c->name() != b_name);
  CHECK(c->name() != a_name);
  CHECK(c->size() >= (size_t{3} << 20));
  CHECK(::access(("/dev/shm" + b_name).c_str(), F_OK) != 0);  // the old one is unlinked
  c.reset();
  held.reset();
  CHECK(s.busy() == 0);
}

TEST_CASE("slot mappings: the worker writes what the trainer reads, follows generations, refuses other segments") {
  auto slots = BatchSlots::create(job(), 1, "t2", 1, 4096);
  REQUIRE(slots.is_ok());
  SlotMappings worker;
  {
    auto lease = (*slots)->acquire();
    REQUIRE(lease);
    auto seg = worker.writable(lease->name());
    REQUIRE(seg.is_ok());
    std::memcpy((*seg)->mutable_data(), "batch one", 10);
    CHECK(std::memcmp(lease->data(), "batch one", 10) == 0);
    auto again = worker.writable(lease->name());
    REQUIRE(again.is_ok());
    CHECK(again->get() == seg->get());  // cached
    lease->grow_to(size_t{2} << 20);
  }
  auto lease = (*slots)->acquire();
  REQUIRE(lease);
  auto seg = worker.writable(lease->name());  // the next generation
  REQUIRE(seg.is_ok());
  CHECK((*seg)->size() >= (size_t{2} << 20));
  std::memcpy((*seg)->mutable_data(), "batch two", 10);
  CHECK(std::memcmp(lease->data(), "batch two", 10) == 0);

  auto other = shm::SharedSegment::create(shm::segment_name(job(), 1, "not-a-slot"), 4096);
  REQUIRE(other.is_ok());
  REQUIRE(other->mark_ready().is_ok());
  auto refused = worker.writable(other->name());
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().message().find("not a batch slot") != std::string::npos);
  CHECK_FALSE(worker.writable("/dgld.no-such-segment-" + job()).is_ok());
  CHECK_FALSE(worker.writable("no-slash").is_ok());
}
