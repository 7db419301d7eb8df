#pragma once
// The calling side of one connection: requests get fresh request ids, replies
// are matched by id, and every wait has a deadline. A peer that dies fails all
// outstanding calls with an error naming it; a peer that goes silent fails
// each call when its deadline passes. Never a hang.

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/net/auth.h"
#include "common/net/connection.h"

namespace dgld::net {

using Clock = std::chrono::steady_clock;

struct ConnectOptions {
  std::chrono::milliseconds timeout{10000};          // give up after this long
  std::chrono::milliseconds initial_backoff{50};
  std::chrono::milliseconds max_backoff{1000};
  FrameLimits limits;
  // With a secret the handshake of net/auth.h runs before connect() returns;
  // a server that cannot prove it holds the same secret is an error.
  SecretPtr secret;
  // Where the connection's frames are counted (traffic.h), and the peer's
  // machine that CallScope costs are put under.
  TrafficTag traffic;
};

// A request in flight; wait on it with RpcClient::wait().
struct PendingCall {
  uint64_t request_id = 0;
  uint16_t kind = 0;
  std::future<Result<Message>> reply;
};

class RpcClient : public std::enable_shared_from_this<RpcClient> {
 public:
  using PushHandler = std::function<void(Message&&)>;

  // Resolves `host`, connects with exponential backoff until opts.timeout,
  // then fails with a message naming `peer`, the address and the last error.
  static Result<std::shared_ptr<RpcClient>> connect(asio::io_context& io, const std::string& host,
                                                    uint16_t port, const std::string& peer,
                                                    const ConnectOptions& opts = {});
  ~RpcClient();

  // Sends a request; the reply (or error) arrives through the returned call.
  // With `blob0`, a reply whose blob 0 has exactly blob0_size bytes is read
  // straight into it (no copy); the memory must stay valid until wait()
  // returns. A wait that times out while such a reply is arriving closes the
  // connection, so nothing writes into the buffer after wait() returns.
  PendingCall start(OutMessage msg, uint8_t* blob0 = nullptr, size_t blob0_size = 0);
  // Waits for a reply until `deadline`. Error replies become their Status;
  // expiry becomes a timeout naming the peer, the message kind and request id.
  Result<Message> wait(PendingCall& call, Clock::time_point deadline);
  // start() + wait() with a relative timeout.
  Result<Message> call(OutMessage msg, std::chrono::milliseconds timeout);
  // Fire-and-forget: no reply is expected or accepted.
  bool send_one_way(OutMessage msg);
  // Receives frames that are not replies (server-initiated notices).
  void set_push_handler(PushHandler h);

  void close();
  bool is_open() const;
  const std::string& peer() const { return peer_; }
  int peer_machine() const { return traffic_.peer_machine; }
  // Why the connection closed (ok while open).
  Status close_reason() const;

 private:
  RpcClient(std::string peer) : peer_(std::move(peer)) {}
  void attach(std::shared_ptr<Connection> conn);
  Status authenticate(const Secret& secret, Clock::time_point deadline);
  void on_message(Message&& m);
  void on_close(const Status& st);

  std::string peer_;
  TrafficTag traffic_;  // keeps the counters alive while the connection counts into them
  std::shared_ptr<Connection> conn_;
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  struct Pending {
    std::promise<Result<Message>> promise;
    uint8_t* blob0 = nullptr;
    size_t blob0_size = 0;
    bool claimed = false;  // a reply is being read into blob0
  };
  uint8_t* blob_target(const FrameHeader& h, size_t index, uint64_t length);
  std::unordered_map<uint64_t, Pending> pending_;
  Status close_reason_;
  PushHandler push_;
};

}  // namespace dgld::net
