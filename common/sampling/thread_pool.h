#pragma once
// ThreadPool: a few long-lived worker threads for data-parallel loops inside
// the sampler, so that a mini-batch does not pay for thread creation.
// parallel_for splits [0, n) into chunks of `grain` and runs them on the
// workers and the calling thread; it returns when every chunk is done.
// The workers serve one call at a time: a call made meanwhile from another
// thread (or from inside a chunk) runs its loop on the calling thread alone
// rather than wait. The pool owns its threads and joins them on destruction.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dgld {

class ThreadPool {
 public:
  // `num_threads` counts the caller: 1 means no workers (everything inline).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(int64_t n, int64_t grain,
                    const std::function<void(int64_t begin, int64_t end)>& body);

 private:
  struct Job;
  void worker_loop();
  static void run_chunks(Job& job);

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // held by the parallel_for the workers serve
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  Job* job_ = nullptr;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
};

// Runs body over [0, n) on `pool`, or inline when pool is null.
void parallel_for(ThreadPool* pool, int64_t n, int64_t grain,
                  const std::function<void(int64_t begin, int64_t end)>& body);

}  // namespace dgld
