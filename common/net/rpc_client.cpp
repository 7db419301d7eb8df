#include "common/net/rpc_client.h"

#include <thread>

#include "common/logging.h"
#include "schemas/rpc_generated.h"

namespace dgld::net {

namespace {
std::string fmt_ms(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s" : std::to_string(d.count()) + " ms";
}
}  // namespace

Result<std::shared_ptr<RpcClient>> RpcClient::connect(asio::io_context& io, const std::string& host,
                                                      uint16_t port, const std::string& peer,
                                                      const ConnectOptions& opts) {
  const std::string where = peer + " at " + host + ":" + std::to_string(port);
  const auto deadline = Clock::now() + opts.timeout;
  auto backoff = opts.initial_backoff;
  std::string last_error = "no attempt made";
  int attempts = 0;
  for (;;) {
    ++attempts;
    auto socket = std::make_shared<tcp::socket>(io);
    std::promise<boost::system::error_code> done;
    auto fut = done.get_future();
    auto resolver = std::make_shared<tcp::resolver>(io);
    boost::system::error_code rec;
    auto endpoints = resolver->resolve(host, std::to_string(port), rec);
    if (rec) {
      last_error = "cannot resolve '" + host + "': " + rec.message();
    } else {
      asio::async_connect(*socket, endpoints,
                          [&done](const boost::system::error_code& ec, const tcp::endpoint&) { done.set_value(ec); });
      auto remaining = deadline - Clock::now();
      if (fut.wait_for(std::max(remaining, Clock::duration(std::chrono::milliseconds(1)))) !=
          std::future_status::ready) {
        asio::post(socket->get_executor(), [socket] {
          boost::system::error_code ignored;
          socket->close(ignored);
        });
        fut.wait();  // the handler runs with operation_aborted
        last_error = "connect attempt timed out";
      } else if (auto ec = fut.get(); ec) {
        last_error = ec.message();
      } else {
        auto client = std::shared_ptr<RpcClient>(new RpcClient(peer));
        client->traffic_ = opts.traffic;
        auto conn = std::make_shared<Connection>(std::move(*socket), peer, opts.limits);
        if (opts.traffic.counters) conn->set_traffic(opts.traffic.counters->peer(opts.traffic.peer_machine));
        client->attach(std::move(conn));
        if (opts.secret) {
          // Authentication gets the connect deadline, and at least a few seconds.
          const auto auth_deadline = std::max(deadline, Clock::now() + std::chrono::seconds(5));
          if (Status st = client->authenticate(*opts.secret, auth_deadline); !st.is_ok()) {
            client->close();
            return st.with_context("authenticating with " + where);
          }
        }
        if (attempts > 1) logger("net")->info("connected to {} after {} attempts", where, attempts);
        return client;
      }
    }
    auto now = Clock::now();
    if (now + backoff >= deadline) break;
    logger("net")->debug("connect to {} failed ({}); retrying in {} ms", where, last_error, backoff.count());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, opts.max_backoff);
  }
  return timeout_error("cannot connect to " + where + " after " + std::to_string(attempts) + " attempts over " +
                       fmt_ms(opts.timeout) + ": " + last_error);
}

Status RpcClient::authenticate(const Secret& secret, Clock::time_point deadline) {
  const AuthNonce client_nonce = random_nonce();
  flatbuffers::FlatBufferBuilder hello;
  hello.Finish(fbs::CreateAuthHello(hello, hello.CreateVector(client_nonce.data(), client_nonce.size())));
  auto call1 = start(OutMessage(fbs::MessageKind::AuthHello, hello));
  DGLD_ASSIGN_OR_RETURN(Message challenge, wait(call1, deadline));
  if (challenge.kind() != static_cast<uint16_t>(fbs::MessageKind::AuthChallenge)) {
    return protocol_error("expected AuthChallenge, got message kind " + std::to_string(challenge.kind()));
  }
  DGLD_RETURN_IF_ERROR(verify_payload<fbs::AuthChallenge>(challenge, "AuthChallenge"));
  const auto* c = challenge.as<fbs::AuthChallenge>();
  if (!c->server_nonce() || c->server_nonce()->size() != kAuthNonceBytes || !c->server_mac()) {
    return protocol_error("AuthChallenge without a " + std::to_string(kAuthNonceBytes) + "-byte nonce and a proof");
  }
  const std::span<const uint8_t> server_nonce(c->server_nonce()->data(), kAuthNonceBytes);
  if (!mac_matches(std::span<const uint8_t>(c->server_mac()->data(), c->server_mac()->size()),
                   auth_mac(secret, kServerProofLabel, client_nonce, server_nonce))) {
    return invalid_argument("the server's proof is wrong: it holds another secret (another job's server?)");
  }
  const AuthMac proof = auth_mac(secret, kClientProofLabel, server_nonce, client_nonce);
  flatbuffers::FlatBufferBuilder response;
  response.Finish(fbs::CreateAuthResponse(response, response.CreateVector(proof.data(), proof.size())));
  auto call2 = start(OutMessage(fbs::MessageKind::AuthResponse, response));
  DGLD_ASSIGN_OR_RETURN(Message ok, wait(call2, deadline));
  if (ok.kind() != static_cast<uint16_t>(fbs::MessageKind::AuthOk)) {
    return protocol_error("expected AuthOk, got message kind " + std::to_string(ok.kind()));
  }
  return Status::ok();
}

RpcClient::~RpcClient() {
  if (conn_) conn_->close();
}

void RpcClient::attach(std::shared_ptr<Connection> conn) {
  conn_ = std::move(conn);
  std::weak_ptr<RpcClient> weak = shared_from_this();
  conn_->start(
      [weak](const std::shared_ptr<Connection>&, Message&& m) {
        if (auto self = weak.lock()) self->on_message(std::move(m));
      },
      [weak](const std::shared_ptr<Connection>&, const Status& st) {
        if (auto self = weak.lock()) self->on_close(st);
      },
      [weak](const FrameHeader& h, size_t index, uint64_t length) -> uint8_t* {
        auto self = weak.lock();
        return self ? self->blob_target(h, index, length) : nullptr;
      });
}

uint8_t* RpcClient::blob_target(const FrameHeader& h, size_t index, uint64_t length) {
  if (index != 0 || !(h.flags & kFlagResponse) || (h.flags & kFlagError)) return nullptr;
  std::lock_guard lock(mu_);
  auto it = pending_.find(h.request_id);
  if (it == pending_.end() || !it->second.blob0 || it->second.blob0_size != length) return nullptr;
  it->second.claimed = true;
  return it->second.blob0;
}

PendingCall RpcClient::start(OutMessage msg, uint8_t* blob0, size_t blob0_size) {
  PendingCall call;
  call.kind = msg.kind;
  Pending p;
  p.blob0 = blob0;
  p.blob0_size = blob0_size;
  call.reply = p.promise.get_future();
  {
    std::lock_guard lock(mu_);
    if (!close_reason_.is_ok()) {
      p.promise.set_value(close_reason_);
      return call;
    }
    call.request_id = next_id_++;
    pending_.emplace(call.request_id, std::move(p));
  }
  msg.request_id = call.request_id;
  msg.flags &= ~(kFlagResponse | kFlagOneWay);
  if (CallCost* cost = CallScope::current()) {
    uint64_t blob_bytes = 0;
    for (const auto& b : msg.blobs) blob_bytes += b.size;
    cost->add(traffic_.peer_machine, 1, static_cast<int64_t>(frame_bytes(msg.payload.size(), msg.blobs.size(), blob_bytes)),
              0);
  }
  if (!conn_->send(std::move(msg))) {
    std::lock_guard lock(mu_);
    auto it = pending_.find(call.request_id);
    if (it != pending_.end()) {
      it->second.promise.set_value(closed_error("connection to " + peer_ + " is closed"));
      pending_.erase(it);
    }
  }
  return call;
}

Result<Message> RpcClient::wait(PendingCall& call, Clock::time_point deadline) {
  if (!call.reply.valid()) return internal_error("waited twice on one call to " + peer_);
  if (call.reply.wait_until(deadline) != std::future_status::ready) {
    Status expired = timeout_error(peer_ + " did not answer request " + std::to_string(call.request_id) +
                                   " (kind " + std::to_string(call.kind) + ") before its deadline");
    bool erased = false, claimed = false;
    {
      std::lock_guard lock(mu_);
      auto it = pending_.find(call.request_id);
      if (it != pending_.end()) {
        claimed = it->second.claimed;
        if (!claimed) {
          pending_.erase(it);
          erased = true;
        }
      }
    }
    if (claimed) {
      // The reply is being read into the caller's buffer: stop the connection and
      // wait for its close (local, quick) so nothing writes there afterwards.
      conn_->close(expired.with_context("reply cut off"));
      Result<Message> late = call.reply.get();
      if (!late.is_ok()) return expired;
      if (late->is_error()) return status_from_error_reply(*late, peer_);
      return late;  // it completed just before the close
    }
    // When nothing was erased, a reply (or the close) raced in just before: use it.
    if (erased) {
      call.reply = {};
      return expired;
    }
  }
  Result<Message> r = call.reply.get();
  if (!r.is_ok()) return r;
  if (CallCost* cost = CallScope::current()) {
    uint64_t blob_bytes = 0;
    for (const auto& b : r->blobs) blob_bytes += b.size();
    cost->add(traffic_.peer_machine, 0, 0, static_cast<int64_t>(frame_bytes(r->payload.size(), r->blobs.size(), blob_bytes)));
  }
  if (r->is_error()) return status_from_error_reply(*r, peer_);
  return r;
}

Result<Message> RpcClient::call(OutMessage msg, std::chrono::milliseconds timeout) {
  PendingCall c = start(std::move(msg));
  return wait(c, Clock::now() + timeout);
}

bool RpcClient::send_one_way(OutMessage msg) {
  msg.flags = (msg.flags & ~kFlagResponse) | kFlagOneWay;
  msg.request_id = 0;
  return conn_->send(std::move(msg));
}

void RpcClient::set_push_handler(PushHandler h) {
  std::lock_guard lock(mu_);
  push_ = std::move(h);
}

void RpcClient::on_message(Message&& m) {
  if (!(m.header.flags & kFlagResponse)) {
    PushHandler h;
    {
      std::lock_guard lock(mu_);
      h = push_;
    }
    if (h) h(std::move(m));
    else logger("net")->debug("{}: ignoring unsolicited message kind {}", peer_, m.kind());
    return;
  }
  std::promise<Result<Message>> p;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(m.request_id());
    if (it == pending_.end()) {
      logger("net")->debug("{}: late or unknown reply to request {} dropped", peer_, m.request_id());
      return;
    }
    p = std::move(it->second.promise);
    pending_.erase(it);
  }
  p.set_value(std::move(m));
}

void RpcClient::on_close(const Status& st) {
  std::unordered_map<uint64_t, Pending> failed;
  Status reason;
  {
    std::lock_guard lock(mu_);
    close_reason_ = st.is_ok() ? closed_error("connection to " + peer_ + " closed") : st;
    reason = close_reason_;
    failed.swap(pending_);
  }
  for (auto& [id, p] : failed) p.promise.set_value(reason);
}

void RpcClient::close() {
  if (conn_) conn_->close();
}

bool RpcClient::is_open() const { return conn_ && conn_->is_open(); }

Status RpcClient::close_reason() const {
  std::lock_guard lock(mu_);
  return close_reason_;
}

}  // namespace dgld::net
