#pragma once
// Recycles large float buffers, such as a mini-batch's input feature rows
// (about 100 MB per batch on a million-node graph), so that each batch does
// not allocate, page-fault and zero-fill its buffer afresh: a buffer handed
// back keeps its size and capacity, and the next take() of up to that size
// reuses it without touching its contents (std::vector zero-fills only what
// a resize adds). Thread-safe; share it with
// std::shared_ptr between the producers of batches and whoever frees them.

#include <cstddef>
#include <mutex>
#include <vector>

namespace dgld {

class BufferPool {
 public:
  // Keeps at most `max_buffers` idle buffers; more are freed.
  explicit BufferPool(size_t max_buffers = 8) : max_buffers_(max_buffers) {}

  // A buffer of exactly n floats; its contents are unspecified.
  std::vector<float> take(size_t n);
  // Hands a buffer back for reuse (its contents are not kept meaningful).
  void give(std::vector<float>&& buffer);
  size_t idle() const;
  size_t idle_bytes() const;  // capacity of the idle buffers
  // Frees the idle buffers (a phase that makes no batches for a while, such
  // as evaluation); returns their bytes. Later take()s allocate again.
  size_t release_idle();

 private:
  mutable std::mutex mu_;
  std::vector<std::vector<float>> idle_;
  size_t max_buffers_;
};

}  // namespace dgld
