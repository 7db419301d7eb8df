#include "common/net/io_threads.h"

#include "common/logging.h"

namespace dgld::net {

IoThreads::IoThreads(int num_threads) : work_(boost::asio::make_work_guard(io_)) {
  for (int i = 0; i < std::max(1, num_threads); ++i) {
    threads_.emplace_back([this] {
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          // Handlers must not throw; if one does, log it and keep serving.
          logger("net")->error("unhandled exception in an I/O handler: {}", e.what());
        }
      }
    });
  }
}

IoThreads::~IoThreads() { stop(); }

void IoThreads::stop() {
  work_.reset();
  io_.stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace dgld::net
