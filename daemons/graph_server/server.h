#pragma once
// GraphServer: one graph-server process. Loads (main server) or attaches to
// (backup server) its machine's partition, listens on base_port + j of its
// ip_config line, and answers membership (coordinator only), KVStore, graph
// query and sampling requests on a thread pool. Stops on a Shutdown request
// or stop() (the daemon's SIGINT/SIGTERM handler).

#include <memory>

#include "common/status.h"
#include "daemons/graph_server/options.h"

namespace dgld::net {
class RequestContext;
struct Message;
}  // namespace dgld::net

namespace dgld::graph_server {

class GraphServer {
 public:
  static Result<std::unique_ptr<GraphServer>> create(const GraphServerOptions& opts);
  ~GraphServer();

  // Blocks until stop() or a Shutdown request; returns why it stopped.
  Status wait();
  void stop(const std::string& reason);
  uint16_t port() const;
  // Statistics as JSON (also the reply to a Stats request).
  std::string stats_json() const;

  // In-process requests (fuzzers, tests; with options.listen false the only
  // way in): runs `m` through the same verification, dispatcher and handlers
  // as a request read from a socket, on the calling thread. Replies go where
  // `ctx` says (net::InProcessCaller).
  void handle(const net::RequestContext& ctx, net::Message&& m);
  // Ends the session of caller `caller_id` (RequestContext::caller_id) as a
  // closed connection does: the coordinator drops a client that did not leave.
  void end_session(const void* caller_id, const Status& why);

  struct Impl;

 private:
  explicit GraphServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgld::graph_server
