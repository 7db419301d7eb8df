#include "common/sampling/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>

namespace dgld {

namespace {
// The pool whose loop this thread is running chunks of (a worker, or the
// caller of parallel_for): a call from inside a chunk runs inline without
// touching call_mu_, which the caller may already own.
thread_local const ThreadPool* serving = nullptr;

struct Serving {
  explicit Serving(const ThreadPool* pool) : previous(serving) { serving = pool; }
  ~Serving() { serving = previous; }
  const ThreadPool* previous;
};
}  // namespace

struct ThreadPool::Job {
  int64_t n = 0;
  int64_t grain = 1;
  const std::function<void(int64_t, int64_t)>* body = nullptr;
  std::atomic<int64_t> next{0};
  std::mutex error_mu;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunks(Job& job) {
  for (;;) {
    const int64_t begin = job.next.fetch_add(job.grain, std::memory_order_relaxed);
    if (begin >= job.n) return;
    try {
      (*job.body)(begin, std::min(job.n, begin + job.grain));
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.error_mu);
      if (!job.error) job.error = std::current_exception();
      job.next.store(job.n, std::memory_order_relaxed);  // stop handing out chunks
      return;
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
      if (stop_) return;
      seen = generation_;
      job = job_;
      ++busy_;
    }
    {
      Serving mark(this);
      run_chunks(*job);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --busy_;
    }
    done_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || n <= grain || serving == this) {
    body(0, n);
    return;
  }
  // Busy with another caller's loop: this loop runs on its own thread
  // instead of waiting for the workers.
  std::unique_lock<std::mutex> call_lock(call_mu_, std::try_to_lock);
  if (!call_lock.owns_lock()) {
    body(0, n);
    return;
  }
  Job job;
  job.n = n;
  job.grain = grain;
  job.body = &body;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    ++generation_;
  }
  wake_.notify_all();
  {
    Serving mark(this);
    run_chunks(job);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = nullptr;  // late wakers skip this job
    done_.wait(lock, [&] { return busy_ == 0; });
  }
  if (job.error) std::rethrow_exception(job.error);
}

void parallel_for(ThreadPool* pool, int64_t n, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& body) {
  if (pool != nullptr) {
    pool->parallel_for(n, grain, body);
  } else if (n > 0) {
    body(0, n);
  }
}

}  // namespace dgld
