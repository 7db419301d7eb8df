#pragma once
// The serving side: accepts connections on one address, verifies every
// payload against the schema registered for its kind, and runs handlers on a
// thread pool. Unknown kinds and payloads that fail verification get an error
// reply; framing errors close only the offending connection.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/net/asio.h"

#include "common/net/auth.h"
#include "common/net/connection.h"

namespace dgld::net {

// A caller without a socket (fuzzers, in-process tests): its replies go to
// `on_reply`, on whichever thread sends them; `peer` names it in logs.
struct InProcessCaller {
  std::string peer;
  std::function<void(OutMessage)> on_reply;
};

// What a handler gets: the request header and a way to answer it, over the
// connection the request came on or to an in-process caller.
class RequestContext {
 public:
  RequestContext(std::shared_ptr<Connection> conn, FrameHeader header)
      : conn_(std::move(conn)), header_(header) {}
  RequestContext(std::shared_ptr<const InProcessCaller> caller, FrameHeader header)
      : caller_(std::move(caller)), header_(header) {}
  // Sends `reply` as the response (no-op for one-way requests).
  void reply(OutMessage reply) const;
  void reply_error(const Status& st) const;
  const FrameHeader& header() const { return header_; }
  bool one_way() const { return header_.flags & kFlagOneWay; }
  const std::string& peer() const;
  // Identifies the caller across its requests (its connection, or the
  // in-process caller): what per-client sessions are keyed by.
  const void* caller_id() const {
    return conn_ ? static_cast<const void*>(conn_.get()) : static_cast<const void*>(caller_.get());
  }
  // Null for an in-process caller.
  const std::shared_ptr<Connection>& connection() const { return conn_; }

 private:
  std::shared_ptr<Connection> conn_;
  std::shared_ptr<const InProcessCaller> caller_;
  FrameHeader header_;
};

using Handler = std::function<void(const RequestContext&, Message&&)>;

// Handlers registered by message kind, each with the verifier for its schema.
class Dispatcher {
 public:
  template <typename T, typename Kind>
  void add(Kind kind, const char* type_name, Handler h) {
    entries_[static_cast<uint16_t>(kind)] = Entry{type_name, &verify_payload<T>, std::move(h)};
  }
  // Verifies and runs the handler, or replies with an error.
  void dispatch(const RequestContext& ctx, Message&& m) const;
  bool has(uint16_t kind) const { return entries_.count(kind) != 0; }

 private:
  struct Entry {
    const char* type_name;
    Status (*verify)(const Message&, const char*);
    Handler handler;
  };
  std::map<uint16_t, Entry> entries_;
};

struct ServerOptions {
  std::string name = "server";  // for log lines
  int handler_threads = 2;
  FrameLimits limits;
  size_t max_connections = 4096;
  // Backpressure: a connection is not read from while its replies waiting
  // to be written exceed max_queued_bytes_per_connection, while it has
  // max_pending_per_connection requests read but not handled, or while the
  // replies of all connections exceed max_queued_bytes_total.
  size_t max_queued_bytes_per_connection = 256u << 20;
  int max_pending_per_connection = 64;
  int64_t max_queued_bytes_total = int64_t{2} << 30;
  // Kinds whose handlers are short and run right on the I/O thread that read
  // them, skipping two thread hand-offs (sub-millisecond requests: sampling a
  // batch, heartbeats), as are one-way messages (ordered before the next
  // request of their connection). Everything else goes to the handler pool.
  std::set<uint16_t> inline_kinds;
  // With a secret, a connection must complete the handshake of net/auth.h
  // before any request is served (until then frames are capped at
  // kPreAuthFrameBytes); a connection that sends anything else, a wrong proof,
  // or nothing within auth_timeout is logged and closed. Null: no
  // authentication (and an AuthHello gets an error reply saying so).
  SecretPtr secret;
  std::chrono::milliseconds auth_timeout{10000};
  // Every connection's frames are counted here (traffic.h), under
  // kUnknownMachine until a handler names the peer (identify_peer).
  std::shared_ptr<TrafficCounters> traffic;
};
inline constexpr uint32_t kPreAuthFrameBytes = 4096;

class RpcServer {
 public:
  RpcServer(asio::io_context& io, const Dispatcher& dispatcher, ServerOptions opts);
  ~RpcServer();

  // Binds and starts accepting. Port 0 picks a free port (see port()).
  // A port in use is an error naming the address.
  Status listen(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  // Stops accepting, closes every connection and waits for their close
  // callbacks and for running handlers. Needs the io_context to be running.
  void stop();

  // Called (on an I/O thread) when a connection closes.
  void set_close_callback(std::function<void(const std::shared_ptr<Connection>&, const Status&)> cb) {
    on_close_ = std::move(cb);
  }
  size_t num_connections() const;
  // Counts the connection of `ctx` under `machine` from now on (no-op
  // without ServerOptions::traffic or for an in-process caller).
  void identify_peer(const RequestContext& ctx, int machine);
  const std::shared_ptr<TrafficCounters>& traffic() const { return opts_.traffic; }
  uint64_t requests_served() const { return requests_.load(); }
  uint64_t auth_failures() const { return auth_failures_.load(); }
  // Reply bytes queued on all connections; times reading was held back.
  int64_t queued_bytes() const { return queued_->load(); }
  uint64_t read_pauses() const;
  // Bytes read and written over every connection, closed ones included.
  uint64_t bytes_in() const;
  uint64_t bytes_out() const;

 private:
  struct AuthSession;
  void accept_next();
  void on_message(const std::shared_ptr<Connection>& c, Message&& m);
  // The handshake's messages on a connection that has not authenticated.
  void authenticate(const std::shared_ptr<Connection>& c, AuthSession& s, Message&& m);
  void refuse(const std::shared_ptr<Connection>& c, const Status& why);

  asio::io_context& io_;
  const Dispatcher& dispatcher_;
  ServerOptions opts_;
  tcp::acceptor acceptor_;
  asio::thread_pool pool_;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::set<std::shared_ptr<Connection>> conns_;
  std::condition_variable all_closed_;
  std::function<void(const std::shared_ptr<Connection>&, const Status&)> on_close_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> auth_failures_{0};
  std::shared_ptr<std::atomic<int64_t>> queued_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<uint64_t> pauses_of_closed_{0};  // read_pauses of connections already gone
  std::atomic<uint64_t> bytes_in_closed_{0}, bytes_out_closed_{0};
  std::atomic<bool> stopped_{false};
  std::map<const Connection*, std::shared_ptr<AuthSession>> sessions_;  // connections still authenticating
};

}  // namespace dgld::net
