#include "common/buffer_pool.h"

#include <algorithm>

#include "common/memory.h"

namespace dgld {

std::vector<float> BufferPool::take(size_t n) {
  std::vector<float> v;
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      // The largest idle buffer: growing it zero-fills only the new tail.
      auto it = std::max_element(idle_.begin(), idle_.end(),
                                 [](const auto& a, const auto& b) { return a.size() < b.size(); });
      v = std::move(*it);
      idle_.erase(it);
    }
  }
  if (n > v.capacity()) {
    // Growing would copy the old contents into a new block while both are
    // held: start a fresh one instead, with room for batches a little larger.
    std::vector<float>().swap(v);
    v.reserve(n + n / 8);
  }
  // What the resize adds is zero-filled: map those pages in one call first
  // rather than a page fault per 4 KiB inside the fill.
  if (n > v.size()) populate_pages(v.data() + v.size(), (n - v.size()) * sizeof(float), true);
  // Shrinking keeps the capacity and initialises nothing.
  v.resize(n);
  return v;
}

void BufferPool::give(std::vector<float>&& buffer) {
  if (buffer.capacity() == 0) return;
  // Its size stays: a later take() of up to that size initialises nothing,
  // a larger one only the part beyond it.
  std::lock_guard lock(mu_);
  if (idle_.size() < max_buffers_) idle_.push_back(std::move(buffer));
}

size_t BufferPool::idle_bytes() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& b : idle_) n += b.capacity() * sizeof(float);
  return n;
}

size_t BufferPool::release_idle() {
  std::vector<std::vector<float>> gone;
  {
    std::lock_guard lock(mu_);
    gone.swap(idle_);
  }
  size_t n = 0;
  for (const auto& b : gone) n += b.capacity() * sizeof(float);
  return n;
}

size_t BufferPool::idle() const {
  std::lock_guard lock(mu_);
  return idle_.size();
}

}  // namespace dgld
