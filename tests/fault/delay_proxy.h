#pragma once
// A slow network link for fault tests: a TCP proxy that accepts on
// 127.0.0.1:listen_port, connects each connection to 127.0.0.1:target_port
// and forwards both directions, holding every chunk it reads for `delay`
// before writing it on (a latency, not a pause: later chunks are read
// meanwhile) and, with bytes_per_s > 0, writing no faster than that per
// direction. Plain sockets; a reader and a writer thread per direction of
// each connection. The destructor closes every socket and joins every thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dgld::testing {

class DelayProxy {
 public:
  struct Options {
    uint16_t listen_port = 0;  // 0: any free port (port() says which)
    uint16_t target_port = 0;
    std::chrono::microseconds delay{0};
    double bytes_per_s = 0;  // 0: no cap
  };
  // Listens right away; throws std::runtime_error naming the port when it cannot.
  explicit DelayProxy(Options options);
  ~DelayProxy();
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  uint16_t port() const { return port_; }
  uint64_t connections() const { return connections_; }
  uint64_t bytes_forwarded() const { return bytes_; }

 private:
  struct Link;
  void accept_loop();

  Options o_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> connections_{0}, bytes_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Link>> links_;
};

}  // namespace dgld::testing
