#include "common/stop_signals.h"

#include <pthread.h>

namespace dgld {

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished peer is an error on that connection only
}

void StopSignals::watch(std::function<void(const std::string&)> on_signal) {
  waiter_ = std::thread([this, on_signal = std::move(on_signal)] {
    int sig = 0;
    sigwait(&set_, &sig);
    if (!unwatching_) on_signal(sig == SIGINT ? "SIGINT" : "SIGTERM");
  });
}

void StopSignals::unwatch() {
  if (!waiter_.joinable()) return;
  unwatching_ = true;
  pthread_kill(waiter_.native_handle(), SIGTERM);  // blocked everywhere: its sigwait takes it
  waiter_.join();
}

StopSignals::~StopSignals() { unwatch(); }

}  // namespace dgld
