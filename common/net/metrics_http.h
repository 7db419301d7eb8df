#pragma once
// MetricsHttpServer: the --metrics-port endpoint of graph-server and
// trainer-host. Plain HTTP/1.x for Prometheus' scrapes only: `GET /metrics`
// answers 200 with the text a callback renders (common/prometheus.h), any
// other path 404, any other method 405, a request that is not HTTP 400, one
// over max_request_bytes 431; every answer closes the connection. Runs on an
// io_context the daemon already has (a strand per connection); every
// connection has one deadline for its request and answer, and at most
// max_connections are served at once (more are closed on accept), so a slow
// or hostile client costs a socket for at most `deadline`, never a thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/net/asio.h"
#include "common/status.h"

namespace dgld::net {

struct MetricsHttpOptions {
  std::string name = "metrics";                    // in log lines and errors
  std::chrono::milliseconds deadline{5000};        // request read and answer written within this
  size_t max_request_bytes = 8192;                 // request line and headers
  size_t max_connections = 16;                     // served at once
};

// What the endpoint did (for tests and logs).
struct MetricsHttpCounts {
  uint64_t served = 0;        // 200 answers
  uint64_t not_found = 0;     // 404
  uint64_t bad_method = 0;    // 405
  uint64_t bad_request = 0;   // 400 and 431
  uint64_t timed_out = 0;     // deadline passed before the answer was written
  uint64_t over_limit = 0;    // closed on accept: max_connections busy
};

class MetricsHttpServer {
 public:
  // Renders the body of GET /metrics; called on an io thread, so it must be quick.
  using Render = std::function<std::string()>;

  MetricsHttpServer(boost::asio::io_context& io, Render render, MetricsHttpOptions opts = {});
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds host:port (port 0: any free one) and starts accepting.
  Status listen(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  // Stops accepting and closes open connections; render is not called after it returns.
  void stop();
  MetricsHttpCounts counts() const;

  struct State;

 private:
  boost::asio::io_context& io_;
  std::shared_ptr<State> state_;
  uint16_t port_ = 0;
};

// The answer to one request's head (request line and headers), for tests:
// status code and the whole response bytes.
struct HttpAnswer {
  int status = 0;
  std::string bytes;
};
HttpAnswer answer_http_request(const std::string& head, const MetricsHttpServer::Render& render);

}  // namespace dgld::net
