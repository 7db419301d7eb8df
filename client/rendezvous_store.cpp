// The trainers' rendezvous store (rendezvous_store.h).
#include "client/rendezvous_store.h"

#include <algorithm>
#include <list>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/logging.h"
#include "common/net/io_threads.h"
#include "common/net/rpc_client.h"
#include "common/net/rpc_server.h"
#include "schemas/rpc_generated.h"
#include "schemas/store_generated.h"

namespace dgld::client {

using net::Message;
using net::OutBlob;
using net::OutMessage;
using net::RequestContext;

namespace {

OutMessage make_reply(int64_t value, const Bytes* blob) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateStoreReply(fbb, value));
  OutMessage out(fbs::MessageKind::StoreReply, fbb);
  if (blob) out.blobs.push_back(OutBlob::copy_of(blob->data(), blob->size()));
  return out;
}

Bytes bytes_of(const net::ByteBuffer& b) { return Bytes(b.data(), b.data() + b.size()); }

const char* op_name(fbs::StoreOp op) {
  const char* name = fbs::EnumNameStoreOp(op);
  return *name ? name : "unknown";
}

}  // namespace

struct RendezvousServer::Impl {
  // A get or wait whose keys are not all set yet.
  struct Waiter {
    fbs::StoreOp op;
    std::vector<std::string> keys;
    RequestContext ctx;
    std::shared_ptr<boost::asio::steady_timer> timer;
  };

  net::IoThreads io{1};
  net::Dispatcher dispatcher;
  std::unique_ptr<net::RpcServer> server;
  std::mutex mu;
  std::map<std::string, Bytes> data;
  std::list<std::shared_ptr<Waiter>> waiters;

  bool all_set(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return data.count(k) != 0; });
  }
  OutMessage answer(const Waiter& w) const {
    return w.op == fbs::StoreOp::Get ? make_reply(0, &data.at(w.keys[0])) : make_reply(1, nullptr);
  }
  // Under mu: the waiters a change satisfied, answered once mu is released.
  std::vector<std::pair<RequestContext, OutMessage>> satisfied() {
    std::vector<std::pair<RequestContext, OutMessage>> out;
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (!all_set((*it)->keys)) {
        ++it;
        continue;
      }
      (*it)->timer->cancel();
      out.emplace_back((*it)->ctx, answer(**it));
      it = waiters.erase(it);
    }
    return out;
  }

  void handle(const RequestContext& ctx, Message&& m) {
    const auto* req = m.as<fbs::StoreRequest>();
    const fbs::StoreOp op = req->op();
    std::vector<std::string> keys;
    if (req->keys()) {
      for (const auto* k : *req->keys()) keys.push_back(k->str());
    }
    const bool one_key = op != fbs::StoreOp::Check && op != fbs::StoreOp::Wait && op != fbs::StoreOp::NumKeys;
    const size_t blobs = op == fbs::StoreOp::Set ? 1 : op == fbs::StoreOp::CompareSet ? 2 : 0;
    if ((one_key && keys.size() != 1) || (op == fbs::StoreOp::Check && keys.empty()) ||
        (op == fbs::StoreOp::Wait && keys.empty()) || m.blobs.size() != blobs) {
      ctx.reply_error(invalid_argument(fmt::format("StoreRequest {}: {} keys and {} blobs, expected {} key(s) and {} "
                                                   "blob(s)", op_name(op), keys.size(), m.blobs.size(),
                                                   one_key ? "1" : op == fbs::StoreOp::NumKeys ? "any" : "at least 1",
                                                   blobs)));
      return;
    }
    std::vector<std::pair<RequestContext, OutMessage>> answers;
    {
      std::lock_guard lock(mu);
      switch (op) {
        case fbs::StoreOp::Set:
          data[keys[0]] = bytes_of(m.blobs[0]);
          answers.emplace_back(ctx, make_reply(0, nullptr));
          break;
        case fbs::StoreOp::Add: {
          int64_t sum = req->delta();
          if (auto it = data.find(keys[0]); it != data.end()) {
            const std::string old(it->second.begin(), it->second.end());
            char* end = nullptr;
            const long long v = std::strtoll(old.c_str(), &end, 10);
            if (old.empty() || *end != '\0') {
              ctx.reply_error(invalid_argument(fmt::format("StoreRequest Add: key '{}' holds '{}', not a decimal "
                                                           "integer", keys[0], old)));
              return;
            }
            sum += v;
          }
          const std::string s = std::to_string(sum);
          data[keys[0]] = Bytes(s.begin(), s.end());
          answers.emplace_back(ctx, make_reply(sum, nullptr));
          break;
        }
        case fbs::StoreOp::CompareSet: {
          Bytes expected = bytes_of(m.blobs[0]), desired = bytes_of(m.blobs[1]);
          auto it = data.find(keys[0]);
          const bool swap = it == data.end() ? expected.empty() : it->second == expected;
          if (swap) data[keys[0]] = std::move(desired);
          answers.emplace_back(ctx, make_reply(0, it == data.end() && !swap ? &expected : &data.at(keys[0])));
          break;
        }
        case fbs::StoreOp::Check:
          answers.emplace_back(ctx, make_reply(all_set(keys) ? 1 : 0, nullptr));
          break;
        case fbs::StoreOp::Delete:
          answers.emplace_back(ctx, make_reply(data.erase(keys[0]) ? 1 : 0, nullptr));
          break;
        case fbs::StoreOp::NumKeys:
          answers.emplace_back(ctx, make_reply(static_cast<int64_t>(data.size()), nullptr));
          break;
        case fbs::StoreOp::Get:
        case fbs::StoreOp::Wait: {
          auto w = std::make_shared<Waiter>(Waiter{op, keys, ctx, nullptr});
          if (all_set(keys)) {
            answers.emplace_back(ctx, answer(*w));
            break;
          }
          const auto wait_ms = std::max<int64_t>(req->wait_ms(), 0);
          w->timer = std::make_shared<boost::asio::steady_timer>(io.context(), std::chrono::milliseconds(wait_ms));
          waiters.push_back(w);
          w->timer->async_wait([this, w, wait_ms](const boost::system::error_code& ec) {
            if (ec) return;  // cancelled: answered
            std::unique_lock lock(mu);
            auto it = std::find(waiters.begin(), waiters.end(), w);
            if (it == waiters.end()) return;
            waiters.erase(it);
            lock.unlock();
            w->ctx.reply_error(timeout_error(fmt::format("the rendezvous store: keys [{}] were not all set within {} "
                                                         "ms (a trainer did not arrive)",
                                                         fmt::join(w->keys, ", "), wait_ms)));
          });
          break;
        }
        default:
          ctx.reply_error(invalid_argument(fmt::format("StoreRequest: unknown op {}", static_cast<int>(op))));
          return;
      }
      if (op == fbs::StoreOp::Set || op == fbs::StoreOp::Add || op == fbs::StoreOp::CompareSet) {
        auto more = satisfied();
        for (auto& a : more) answers.push_back(std::move(a));
      }
    }
    for (auto& [c, reply] : answers) c.reply(std::move(reply));
  }
};

RendezvousServer::RendezvousServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RendezvousServer::~RendezvousServer() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& w : impl_->waiters) w->timer->cancel();
    impl_->waiters.clear();
  }
  impl_->server->stop();
  impl_->io.stop();
}

Result<std::unique_ptr<RendezvousServer>> RendezvousServer::start(const std::string& host, uint16_t port,
                                                                  net::SecretPtr secret) {
  auto impl = std::make_unique<Impl>();
  Impl* self = impl.get();
  impl->dispatcher.add<fbs::StoreRequest>(fbs::MessageKind::StoreRequest, "StoreRequest",
                                          [self](const RequestContext& ctx, Message&& m) {
                                            self->handle(ctx, std::move(m));
                                          });
  net::ServerOptions so;
  so.name = "rendezvous-store";
  so.handler_threads = 1;
  so.secret = std::move(secret);
  so.inline_kinds = {static_cast<uint16_t>(fbs::MessageKind::StoreRequest)};  // short; waits are parked
  impl->server = std::make_unique<net::RpcServer>(impl->io.context(), impl->dispatcher, so);
  if (Status st = impl->server->listen(host, port); !st.is_ok()) {
    impl->io.stop();
    return st.with_context("the trainers' rendezvous store");
  }
  logger("trainer")->debug("rendezvous store listening on {}:{}", host, impl->server->port());
  return std::unique_ptr<RendezvousServer>(new RendezvousServer(std::move(impl)));
}

uint16_t RendezvousServer::port() const { return impl_->server->port(); }
uint64_t RendezvousServer::refused() const { return impl_->server->auth_failures(); }

struct RendezvousClient::Reply {
  int64_t value = 0;
  Bytes blob;
};

RendezvousClient::~RendezvousClient() {
  if (rpc_) rpc_->close();
  if (io_) io_->stop();
}

Result<std::unique_ptr<RendezvousClient>> RendezvousClient::connect(const std::string& host, uint16_t port,
                                                                    net::SecretPtr secret,
                                                                    std::chrono::milliseconds timeout) {
  auto c = std::unique_ptr<RendezvousClient>(new RendezvousClient);
  c->io_ = std::make_unique<net::IoThreads>(1);
  c->timeout_ = timeout;
  c->peer_ = "the trainers' rendezvous store of rank 0";  // RpcClient's messages add the address
  net::ConnectOptions co;
  co.timeout = timeout;
  co.secret = std::move(secret);
  auto rpc = net::RpcClient::connect(c->io_->context(), host, port, c->peer_, co);
  if (!rpc.is_ok()) return rpc.status();
  c->rpc_ = std::move(*rpc);
  return c;
}

Result<RendezvousClient::Reply> RendezvousClient::call(int op, const std::vector<std::string>& keys, int64_t delta,
                                                       std::vector<const Bytes*> values,
                                                       std::chrono::milliseconds wait) {
  flatbuffers::FlatBufferBuilder fbb;
  auto k = fbb.CreateVectorOfStrings(keys);
  fbb.Finish(fbs::CreateStoreRequest(fbb, static_cast<fbs::StoreOp>(op), k, delta, wait.count()));
  OutMessage msg(fbs::MessageKind::StoreRequest, fbb);
  for (const Bytes* v : values) msg.blobs.push_back(OutBlob::copy_of(v->data(), v->size()));
  // The server answers a wait's expiry itself; the call's own deadline is for a store that is gone.
  auto reply = rpc_->call(std::move(msg), wait + timeout_ / 4 + std::chrono::milliseconds(2000));
  if (!reply.is_ok()) return reply.status();
  if (Status st = net::verify_payload<fbs::StoreReply>(*reply, "StoreReply"); !st.is_ok()) {
    return st.with_context(peer_);
  }
  Reply r;
  r.value = reply->as<fbs::StoreReply>()->value();
  if (!reply->blobs.empty()) r.blob = bytes_of(reply->blobs[0]);
  return r;
}

Status RendezvousClient::set(const std::string& key, const Bytes& value) {
  return call(static_cast<int>(fbs::StoreOp::Set), {key}, 0, {&value}, std::chrono::milliseconds(0)).status();
}

Result<Bytes> RendezvousClient::get(const std::string& key) {
  DGLD_ASSIGN_OR_RETURN(Reply r, call(static_cast<int>(fbs::StoreOp::Get), {key}, 0, {}, timeout_));
  return std::move(r.blob);
}

Result<int64_t> RendezvousClient::add(const std::string& key, int64_t delta) {
  DGLD_ASSIGN_OR_RETURN(Reply r, call(static_cast<int>(fbs::StoreOp::Add), {key}, delta, {},
                                      std::chrono::milliseconds(0)));
  return r.value;
}

Result<Bytes> RendezvousClient::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  DGLD_ASSIGN_OR_RETURN(Reply r, call(static_cast<int>(fbs::StoreOp::CompareSet), {key}, 0, {&expected, &desired},
                                      std::chrono::milliseconds(0)));
  return std::move(r.blob);
}

Result<bool> RendezvousClient::check(const std::vector<std::string>& keys) {
  DGLD_ASSIGN_OR_RETURN(Reply r, call(static_cast<int>(fbs::StoreOp::Check), keys, 0, {},
                                      std::chrono::milliseconds(0)));
  return r.value != 0;
}

Result<bool> RendezvousClient::remove(const std::string& key) {
  DGLD_ASSIGN_OR_RETURN(Reply r, call(static_cast<int>(fbs::StoreOp::Delete), {key}, 0, {},
                                      std::chrono::milliseconds(0)));
  return r.value != 0;
}

Result<int64_t> RendezvousClient::num_keys() {
  DGLD_ASSIGN_OR_RETURN(Reply r, call(static_cast<int>(fbs::StoreOp::NumKeys), {}, 0, {},
                                      std::chrono::milliseconds(0)));
  return r.value;
}

Status RendezvousClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  return call(static_cast<int>(fbs::StoreOp::Wait), keys, 0, {}, timeout).status();
}

}  // namespace dgld::client
