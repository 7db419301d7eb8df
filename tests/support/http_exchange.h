#pragma once
// Test support: send raw bytes to 127.0.0.1:port and read the answer until the
// peer closes (or `timeout` passes), with plain blocking sockets.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace dgld::testing {

struct HttpExchange {
  bool connected = false;
  bool closed_by_peer = false;  // read ended with EOF (not the timeout)
  std::string answer;
  int status() const {  // "HTTP/1.1 200 OK" -> 200; 0 if none
    if (answer.rfind("HTTP/1.", 0) != 0 || answer.size() < 12) return 0;
    return std::stoi(answer.substr(9, 3));
  }
  std::string body() const {
    const size_t p = answer.find("\r\n\r\n");
    return p == std::string::npos ? "" : answer.substr(p + 4);
  }
};

inline HttpExchange http_exchange(uint16_t port, const std::string& bytes,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                  const char* host = "127.0.0.1") {
  HttpExchange x;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return x;
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, host, &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return x;
  }
  x.connected = true;
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close before reading everything
    sent += static_cast<size_t>(n);
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) {
      x.closed_by_peer = true;
      break;
    }
    if (n < 0) {
      x.closed_by_peer = errno == ECONNRESET;
      break;
    }
    x.answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return x;
}

}  // namespace dgld::testing
