#include "tests/fault/delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>

namespace dgld::testing {

using Clock = std::chrono::steady_clock;

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

// One proxied connection: client <-> proxy <-> target, two directions.
struct DelayProxy::Link {
  struct Chunk {
    Clock::time_point due;
    std::string bytes;
  };
  // Bytes read from `from` are written to `to` `delay` later.
  struct Direction {
    int from = -1, to = -1;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Chunk> queue;
    bool eof = false;
    std::thread reader, writer;
  };

  Link(int client, int target, const Options& o, const std::atomic<bool>& stop, std::atomic<uint64_t>& bytes)
      : client_fd(client), target_fd(target), o_(o), stop_(stop), bytes_(bytes) {
    up.from = client, up.to = target;
    down.from = target, down.to = client;
    for (Direction* d : {&up, &down}) {
      d->reader = std::thread([this, d] { read_loop(*d); });
      d->writer = std::thread([this, d] { write_loop(*d); });
    }
  }
  ~Link() {
    ::shutdown(client_fd, SHUT_RDWR);
    ::shutdown(target_fd, SHUT_RDWR);
    for (Direction* d : {&up, &down}) {
      {
        std::lock_guard lock(d->mu);
        d->eof = true;
      }
      d->cv.notify_all();
      d->reader.join();
      d->writer.join();
    }
    ::close(client_fd);
    ::close(target_fd);
  }

  void read_loop(Direction& d) {
    std::string buf(64 << 10, '\0');
    for (;;) {
      const ssize_t n = ::recv(d.from, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      std::lock_guard lock(d.mu);
      if (n <= 0) {
        d.eof = true;
        d.cv.notify_all();
        return;
      }
      d.queue.push_back({Clock::now() + o_.delay, buf.substr(0, static_cast<size_t>(n))});
      d.cv.notify_all();
    }
  }

  void write_loop(Direction& d) {
    Clock::time_point next_allowed = Clock::now();
    std::unique_lock lock(d.mu);
    for (;;) {
      d.cv.wait(lock, [&] { return !d.queue.empty() || d.eof; });
      if (d.queue.empty() || stop_) {
        ::shutdown(d.to, SHUT_WR);  // the sender closed (or the proxy stops): pass it on
        return;
      }
      // Held until due (a sender that closed meanwhile still gets its bytes delivered); only the
      // proxy's stop cuts the wait short.
      const auto due = d.queue.front().due;
      if (d.cv.wait_until(lock, due, [&] { return stop_.load(); })) continue;
      Chunk c = std::move(d.queue.front());
      d.queue.pop_front();
      lock.unlock();
      bool ok = true;
      if (o_.bytes_per_s > 0) {
        // Pieces of at most 1/100 s of the cap, each after the previous one's time.
        const size_t piece = std::max<size_t>(1024, static_cast<size_t>(o_.bytes_per_s / 100));
        for (size_t off = 0; ok && off < c.bytes.size(); off += piece) {
          const size_t n = std::min(piece, c.bytes.size() - off);
          std::this_thread::sleep_until(next_allowed);
          ok = write_all(d.to, c.bytes.data() + off, n);
          next_allowed = std::max(next_allowed, Clock::now()) +
                         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(n / o_.bytes_per_s));
        }
      } else {
        ok = write_all(d.to, c.bytes.data(), c.bytes.size());
      }
      if (ok) bytes_ += c.bytes.size();
      lock.lock();
      if (!ok) {
        // The receiver is gone: end both directions, as a broken link would.
        d.queue.clear();
        ::shutdown(d.from, SHUT_RDWR);
        ::shutdown(d.to, SHUT_RDWR);
        return;
      }
    }
  }

  int client_fd, target_fd;
  const Options& o_;
  const std::atomic<bool>& stop_;
  std::atomic<uint64_t>& bytes_;
  Direction up, down;
};

DelayProxy::DelayProxy(Options options) : o_(options) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = loopback(o_.listen_port);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 64) != 0) {
    const std::string err = std::strerror(errno);
    ::close(listen_fd_);
    throw std::runtime_error("delay proxy: cannot listen on 127.0.0.1:" + std::to_string(o_.listen_port) + ": " + err);
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

DelayProxy::~DelayProxy() {
  stop_ = true;
  acceptor_.join();
  ::close(listen_fd_);
  std::lock_guard lock(mu_);
  links_.clear();
}

void DelayProxy::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    const int t = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback(o_.target_port);
    if (::connect(t, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      // Nothing to forward to: the client sees its connection closed, as with a dead server.
      ::close(t);
      ::close(c);
      continue;
    }
    no_delay(c);
    no_delay(t);
    ++connections_;
    std::lock_guard lock(mu_);
    links_.push_back(std::make_unique<Link>(c, t, o_, stop_, bytes_));
  }
}

}  // namespace dgld::testing
