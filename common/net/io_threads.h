#pragma once
// An io_context with its own threads, kept running until stop() or
// destruction. Every client and server in a process shares one.

#include <thread>
#include <vector>

#include "common/net/asio.h"

namespace dgld::net {

class IoThreads {
 public:
  explicit IoThreads(int num_threads = 1);
  ~IoThreads();
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  boost::asio::io_context& context() { return io_; }
  void stop();

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

}  // namespace dgld::net
