#include "common/net/rpc_server.h"

#include "common/logging.h"

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

void RpcServer::accept_next() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || stopped_) return;
      logger("net")->warn("{}: accept failed: {}", opts_.name, ec.message());
      return accept_next();
    }
    std::string peer = "client " + endpoint_string(socket);
    auto conn = std::make_shared<Connection>(std::move(socket), peer, opts_.limits);
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
    }
    conn->start(
        [this](const std::shared_ptr<Connection>& c, Message&& m) {
          if (m.header.flags & kFlagResponse) {
            logger("net")->debug("{}: ignoring unexpected response frame", c->peer());
            return;
          }
          ++requests_;
          if (opts_.inline_kinds.count(m.kind())) {
            RequestContext ctx(c, m.header);
            return dispatcher_.dispatch(ctx, std::move(m));
          }
          auto shared = std::make_shared<Message>(std::move(m));
          asio::post(pool_, [this, c, shared] {
            RequestContext ctx(c, shared->header);
            dispatcher_.dispatch(ctx, std::move(*shared));
          });
        },
        [this](const std::shared_ptr<Connection>& c, const Status& st) {
          if (on_close_) on_close_(c, st);
          std::lock_guard lock(mu_);
          conns_.erase(c);
          all_closed_.notify_all();
        });
    accept_next();
  });
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

size_t RpcServer::num_connections() const {
  std::lock_guard lock(mu_);
  return conns_.size();
}

}  // namespace dgld::net
