#pragma once
// SIGINT/SIGTERM handling shared by the daemons' main(): construct it first
// thing (before any thread starts) so the signals are blocked in every thread
// and SIGPIPE is ignored; then watch() starts one thread that waits for the
// signal and calls back with its name. unwatch() (or the destructor) wakes
// and joins that thread, so main() can tear down in order after the daemon
// stopped for any reason, with no callback racing the teardown.

#include <atomic>
#include <csignal>
#include <functional>
#include <string>
#include <thread>

namespace dgld {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // `on_signal` runs on the watcher thread with "SIGINT" or "SIGTERM".
  void watch(std::function<void(const std::string&)> on_signal);
  // Stops watching; returns once no callback can run. Idempotent.
  void unwatch();

 private:
  sigset_t set_;
  std::thread waiter_;
  std::atomic<bool> unwatching_{false};
};

}  // namespace dgld
