#pragma once
// OrderedPrefetcher: makes the items 0 .. n-1 of one epoch on a few threads,
// at most `depth` ahead of the consumer, and hands them out in order. An
// item's result (value or error) is whatever make(i) returned; the consumer
// waits for the next one with a deadline. Destroying it stops the threads
// after the items they are making (make() must return: its server calls have
// deadlines).

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace dgld::client {

template <typename T>
class OrderedPrefetcher {
 public:
  using Make = std::function<Result<T>(int64_t item)>;

  // Items first..num_items-1 in order. `nice` > 0 lowers the threads'
  // priority (Linux: per thread).
  OrderedPrefetcher(int64_t num_items, Make make, int threads, int depth, int nice = 0, int64_t first = 0)
      : n_(num_items), make_(std::move(make)), depth_(std::max(1, depth)), next_in_(first), next_out_(first) {
    for (int t = 0; t < std::max(1, threads); ++t) {
      threads_.emplace_back([this, nice] {
        if (nice > 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice);
        run();
      });
    }
  }
  ~OrderedPrefetcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  OrderedPrefetcher(const OrderedPrefetcher&) = delete;
  OrderedPrefetcher& operator=(const OrderedPrefetcher&) = delete;

  // Waits up to `max_wait` until next() would not block; false when the
  // time ran out first.
  bool wait_ready(std::chrono::milliseconds max_wait) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, max_wait, [&] { return next_out_ >= n_ || done_.count(next_out_) > 0; });
  }

  // The next item in order; nullopt after the last; timeout naming `what`
  // when it is not ready within `deadline`.
  Result<std::optional<T>> next(std::chrono::milliseconds deadline, const std::string& what) {
    std::unique_lock<std::mutex> lock(mu_);
    if (next_out_ >= n_) return std::optional<T>();
    const int64_t want = next_out_;
    if (!cv_.wait_for(lock, deadline, [&] { return done_.count(want) > 0; })) {
      return timeout_error(what + ": item " + std::to_string(want) + " not ready within " +
                           std::to_string(deadline.count()) + " ms");
    }
    Result<T> r = std::move(done_.at(want));
    done_.erase(want);
    ++next_out_;
    cv_.notify_all();
    if (!r.is_ok()) return r.status();
    return std::optional<T>(std::move(r).value());
  }

 private:
  void run() {
    for (;;) {
      int64_t item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || next_in_ >= n_ || next_in_ < next_out_ + depth_; });
        if (stop_ || next_in_ >= n_) return;
        item = next_in_++;
      }
      Result<T> r = make_(item);
      {
        std::lock_guard<std::mutex> lock(mu_);
        done_.emplace(item, std::move(r));
      }
      cv_.notify_all();
    }
  }

  const int64_t n_;
  Make make_;
  const int depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_in_ = 0, next_out_ = 0;
  bool stop_ = false;
  std::map<int64_t, Result<T>> done_;
  std::vector<std::thread> threads_;
};

}  // namespace dgld::client
