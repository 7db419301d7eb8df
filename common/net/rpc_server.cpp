#include "common/net/rpc_server.h"

#include "common/logging.h"
#include "schemas/rpc_generated.h"

namespace dgld::net {

void RequestContext::reply(OutMessage reply) const {
  if (one_way()) return;
  reply.request_id = header_.request_id;
  reply.flags |= kFlagResponse;
  if (conn_) {
    conn_->send(std::move(reply));
  } else if (caller_ && caller_->on_reply) {
    caller_->on_reply(std::move(reply));
  }
}

const std::string& RequestContext::peer() const {
  static const std::string unknown = "in-process caller";
  if (conn_) return conn_->peer();
  return caller_ ? caller_->peer : unknown;
}

void RequestContext::reply_error(const Status& st) const {
  if (one_way()) {
    logger("net")->warn("{}: one-way request kind {} failed: {}", peer(), header_.kind, st.to_string());
    return;
  }
  reply(make_error_reply(st));
}

void Dispatcher::dispatch(const RequestContext& ctx, Message&& m) const {
  auto it = entries_.find(m.kind());
  if (it == entries_.end()) {
    logger("net")->warn("{}: request {} has unknown message kind {}", ctx.peer(), m.request_id(), m.kind());
    return ctx.reply_error(invalid_argument("unknown message kind " + std::to_string(m.kind())));
  }
  const Entry& e = it->second;
  if (Status st = e.verify(m, e.type_name); !st.is_ok()) {
    logger("net")->warn("{}: request {}: {}", ctx.peer(), m.request_id(), st.message());
    return ctx.reply_error(st);
  }
  try {
    e.handler(ctx, std::move(m));
  } catch (const std::exception& ex) {
    logger("net")->error("{}: handler for {} threw: {}", ctx.peer(), e.type_name, ex.what());
    ctx.reply_error(internal_error(std::string("handler for ") + e.type_name + " failed: " + ex.what()));
  }
}

RpcServer::RpcServer(asio::io_context& io, const Dispatcher& dispatcher, ServerOptions opts)
    : io_(io), dispatcher_(dispatcher), opts_(std::move(opts)), acceptor_(io),
      pool_(static_cast<size_t>(std::max(1, opts_.handler_threads))) {}

RpcServer::~RpcServer() { stop(); }

Status RpcServer::listen(const std::string& host, uint16_t port) {
  const std::string where = host + ":" + std::to_string(port);
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty()) return invalid_argument(opts_.name + ": cannot resolve listen address " + where + ": " + ec.message());
  tcp::endpoint ep = results.begin()->endpoint();
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (ec) {
    acceptor_.close();
    std::string hint = ec == asio::error::address_in_use ? " (is another server still running on it?)" : "";
    return io_error(opts_.name + ": cannot listen on " + where + ": " + ec.message() + hint);
  }
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return io_error(opts_.name + ": cannot listen on " + where + ": " + ec.message());
  port_ = acceptor_.local_endpoint().port();
  asio::post(acceptor_.get_executor(), [this] { accept_next(); });
  return Status::ok();
}

// The handshake state of a connection that has not authenticated yet.
struct RpcServer::AuthSession {
  explicit AuthSession(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
  bool challenged = false;
  bool refused = false;
  AuthNonce client_nonce{}, server_nonce{};
};

void RpcServer::accept_next() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || stopped_) return;
      logger("net")->warn("{}: accept failed: {}", opts_.name, ec.message());
      return accept_next();
    }
    std::string peer = "client " + endpoint_string(socket);
    FrameLimits limits = opts_.limits;
    if (opts_.secret) {
      limits.max_frame_bytes = kPreAuthFrameBytes;
      limits.max_payload_bytes = kPreAuthFrameBytes;
      limits.max_blobs = 0;
    }
    auto conn = std::make_shared<Connection>(std::move(socket), peer, limits);
    if (opts_.traffic) conn->set_traffic(opts_.traffic->peer(kUnknownMachine));
    {
      std::lock_guard lock(mu_);
      if (stopped_) {
        conn->close();
        return;
      }
      if (conns_.size() >= opts_.max_connections) {
        logger("net")->warn("{}: refusing {}: {} connections already open (cap)", opts_.name, peer,
                            conns_.size());
        conn->close();
        return accept_next();
      }
      conns_.insert(conn);
      conn->set_read_gate(
          [this, c = conn.get()] {
            return c->queued_bytes() < opts_.max_queued_bytes_per_connection &&
                   c->pending_requests() < opts_.max_pending_per_connection &&
                   queued_->load() < opts_.max_queued_bytes_total;
          },
          queued_);
      if (opts_.secret) {
        auto session = std::make_shared<AuthSession>(io_);
        sessions_[conn.get()] = session;
        // Nothing but the handshake until it completes, and it must be quick.
        session->timer.expires_after(opts_.auth_timeout);
        std::weak_ptr<Connection> weak = conn;
        session->timer.async_wait([this, weak](const boost::system::error_code& ec) {
          if (ec) return;
          auto c = weak.lock();
          if (!c) return;
          {
            std::lock_guard lock(mu_);
            if (!sessions_.count(c.get())) return;
          }
          ++auth_failures_;
          c->close(closed_error(opts_.name + ": " + c->peer() + " did not authenticate within " +
                                std::to_string(opts_.auth_timeout.count()) + " ms"));
        });
      }
    }
    conn->start([this](const std::shared_ptr<Connection>& c, Message&& m) { on_message(c, std::move(m)); },
                [this](const std::shared_ptr<Connection>& c, const Status& st) {
                  if (on_close_) on_close_(c, st);
                  std::lock_guard lock(mu_);
                  pauses_of_closed_ += c->read_pauses();
                  bytes_in_closed_ += c->bytes_in();
                  bytes_out_closed_ += c->bytes_out();
                  if (auto it = sessions_.find(c.get()); it != sessions_.end()) {
                    // Challenged, then gone without an answer: the peer could not
                    // verify this server's proof (it holds another secret).
                    if (it->second->challenged && !it->second->refused) {
                      ++auth_failures_;
                      logger("net")->warn("{}: refused {}: it left the handshake after the challenge (a process "
                                          "of another job, holding another secret?)", opts_.name, c->peer());
                    }
                    it->second->timer.cancel();
                    sessions_.erase(it);
                  }
                  conns_.erase(c);
                  all_closed_.notify_all();
                });
    accept_next();
  });
}

void RpcServer::on_message(const std::shared_ptr<Connection>& c, Message&& m) {
  if (m.header.flags & kFlagResponse) {
    logger("net")->debug("{}: ignoring unexpected response frame", c->peer());
    return;
  }
  std::shared_ptr<AuthSession> session;
  if (opts_.secret) {
    std::lock_guard lock(mu_);
    if (auto it = sessions_.find(c.get()); it != sessions_.end()) session = it->second;
  }
  if (session) return authenticate(c, *session, std::move(m));
  if (m.kind() == static_cast<uint16_t>(fbs::MessageKind::AuthHello) ||
      m.kind() == static_cast<uint16_t>(fbs::MessageKind::AuthResponse)) {
    RequestContext ctx(c, m.header);
    return ctx.reply_error(invalid_argument(
        opts_.secret ? "already authenticated"
                     : opts_.name + " was started without a secret and does not authenticate connections"));
  }
  ++requests_;
  c->begin_request();
  // One-way messages (a push without acknowledgement) are handled before the
  // next frame of their connection is read, so a request sent after one sees
  // its effect; in the pool a later pull could overtake it.
  if (opts_.inline_kinds.count(m.kind()) || (m.header.flags & kFlagOneWay) != 0) {
    RequestContext ctx(c, m.header);
    dispatcher_.dispatch(ctx, std::move(m));
    return c->end_request();
  }
  auto shared = std::make_shared<Message>(std::move(m));
  asio::post(pool_, [this, c, shared] {
    RequestContext ctx(c, shared->header);
    dispatcher_.dispatch(ctx, std::move(*shared));
    c->end_request();
  });
}

void RpcServer::refuse(const std::shared_ptr<Connection>& c, const Status& why) {
  ++auth_failures_;
  logger("net")->warn("{}: refused {}: {}", opts_.name, c->peer(), why.message());
  c->close_after_writes(why.with_context(opts_.name + " refused " + c->peer()));
}

void RpcServer::authenticate(const std::shared_ptr<Connection>& c, AuthSession& s, Message&& m) {
  if (s.refused) return;  // closing; read nothing more
  RequestContext ctx(c, m.header);
  auto fail = [&](Status st) {
    s.refused = true;
    ctx.reply_error(st);
    refuse(c, st);
  };
  const Secret& secret = *opts_.secret;
  if (!s.challenged && m.kind() == static_cast<uint16_t>(fbs::MessageKind::AuthHello)) {
    if (Status st = verify_payload<fbs::AuthHello>(m, "AuthHello"); !st.is_ok()) return fail(st);
    const auto* nonce = m.as<fbs::AuthHello>()->client_nonce();
    if (!nonce || nonce->size() != kAuthNonceBytes) {
      return fail(protocol_error("AuthHello without a " + std::to_string(kAuthNonceBytes) + "-byte nonce"));
    }
    std::copy(nonce->begin(), nonce->end(), s.client_nonce.begin());
    s.server_nonce = random_nonce();
    const AuthMac proof = auth_mac(secret, kServerProofLabel, s.client_nonce, s.server_nonce);
    s.challenged = true;
    flatbuffers::FlatBufferBuilder fbb;
    auto sn = fbb.CreateVector(s.server_nonce.data(), s.server_nonce.size());
    auto mac = fbb.CreateVector(proof.data(), proof.size());
    fbb.Finish(fbs::CreateAuthChallenge(fbb, sn, mac));
    return ctx.reply(OutMessage(fbs::MessageKind::AuthChallenge, fbb));
  }
  if (s.challenged && m.kind() == static_cast<uint16_t>(fbs::MessageKind::AuthResponse)) {
    if (Status st = verify_payload<fbs::AuthResponse>(m, "AuthResponse"); !st.is_ok()) return fail(st);
    const auto* mac = m.as<fbs::AuthResponse>()->client_mac();
    const AuthMac expected = auth_mac(secret, kClientProofLabel, s.server_nonce, s.client_nonce);
    if (!mac || !mac_matches(std::span<const uint8_t>(mac->data(), mac->size()), expected)) {
      return fail(invalid_argument("authentication failed: wrong proof (another job's secret, or a replayed "
                                   "handshake)"));
    }
    {
      std::lock_guard lock(mu_);
      if (auto it = sessions_.find(c.get()); it != sessions_.end()) {
        it->second->timer.cancel();
        sessions_.erase(it);
      }
    }
    c->set_limits(opts_.limits);
    logger("net")->debug("{}: {} authenticated", opts_.name, c->peer());
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fbs::CreateAuthOk(fbb));
    return ctx.reply(OutMessage(fbs::MessageKind::AuthOk, fbb));
  }
  fail(invalid_argument("authentication required: message kind " + std::to_string(m.kind()) +
                        " before the handshake (this job uses a shared secret: give the process "
                        "--secret-file or DGLD_SECRET_FILE)"));
}

void RpcServer::stop() {
  if (stopped_.exchange(true)) return;
  auto closed = std::make_shared<std::promise<void>>();
  auto fut = closed->get_future();
  asio::post(acceptor_.get_executor(), [this, closed] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    closed->set_value();
  });
  if (fut.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);  // the io_context is not running
  }
  // Close every connection and wait until each has run its close callback, so
  // no callback touches this object after stop() returns.
  std::unique_lock lock(mu_);
  std::vector<std::shared_ptr<Connection>> conns(conns_.begin(), conns_.end());
  lock.unlock();
  for (auto& c : conns) c->close();
  lock.lock();
  if (!all_closed_.wait_for(lock, std::chrono::seconds(5), [this] { return conns_.empty(); })) {
    logger("net")->warn("{}: {} connections did not close within 5 s", opts_.name, conns_.size());
  }
  lock.unlock();
  pool_.join();
}

namespace {
// A counter over the server's life: what closed connections had, plus what
// the open ones have now.
template <typename Get>
uint64_t total(const std::atomic<uint64_t>& closed, const std::set<std::shared_ptr<Connection>>& open, Get get) {
  uint64_t n = closed.load();
  for (const auto& c : open) n += ((*c).*get)();
  return n;
}
}  // namespace

uint64_t RpcServer::read_pauses() const {
  std::lock_guard lock(mu_);
  return total(pauses_of_closed_, conns_, &Connection::read_pauses);
}

uint64_t RpcServer::bytes_in() const {
  std::lock_guard lock(mu_);
  return total(bytes_in_closed_, conns_, &Connection::bytes_in);
}

uint64_t RpcServer::bytes_out() const {
  std::lock_guard lock(mu_);
  return total(bytes_out_closed_, conns_, &Connection::bytes_out);
}

void RpcServer::identify_peer(const RequestContext& ctx, int machine) {
  if (opts_.traffic && ctx.connection()) ctx.connection()->set_traffic(opts_.traffic->peer(machine));
}

size_t RpcServer::num_connections() const {
  std::lock_guard lock(mu_);
  return conns_.size();
}

}  // namespace dgld::net
