// Forming the trainers' group (dist_collectives.h): the rendezvous store,
// Gloo's pairs through it, the pairs' proofs, and another try when a
// formation fails on any rank.
#include "daemons/trainer_host/dist_collectives.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "common/logging.h"
#include "daemons/trainer_host/dist_store.h"

namespace dgld::trainer::dist {

namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace

Result<std::unique_ptr<Collectives>> Collectives::create(const std::string& master_host, int port,
                                                         const std::string& own_host, int rank, int world,
                                                         std::chrono::milliseconds timeout, net::SecretPtr secret) {
  auto c = std::unique_ptr<Collectives>(new Collectives);
  c->rank_ = rank;
  c->world_ = world;
  c->timeout_ = timeout;
  c->peer_ = fmt::format("the trainers' process group (store {}:{}, rank {} of {})", master_host, port, rank, world);
  if (rank == 0) {
    auto server = client::RendezvousServer::start(master_host, static_cast<uint16_t>(port), secret);
    if (!server.is_ok()) return server.status().with_context("rank 0 serving " + c->peer_);
    c->server_ = std::move(*server);
  }
  auto store = client::RendezvousClient::connect(master_host, static_cast<uint16_t>(port), secret, timeout);
  if (!store.is_ok()) return store.status().with_context("joining " + c->peer_);
  c->store_ = c10::make_intrusive<DistStore>(std::move(*store));

  auto log = logger("trainer");
  Status own;
  for (int attempt = 1; attempt <= kFormations; ++attempt) {
    const std::string prefix = fmt::format("dgld/formation-{}", attempt);
    own = c->form(c10::make_intrusive<c10d::PrefixStore>(prefix, c->store_), own_host, secret.get());
    // Every rank says how its try went; all go on together or try again together.
    std::vector<std::string> failed;
    // A rank may spend Gloo's timeout waiting for a pair and the proofs' 10 s before it answers.
    c->store_->setTimeout(2 * timeout + std::chrono::milliseconds(30000));
    try {
      c->store_->set(fmt::format("{}/rank-{}", prefix, rank), bytes_of(own.is_ok() ? "ok" : own.message()));
      for (int r = 0; r < world; ++r) {
        const auto v = c->store_->get(fmt::format("{}/rank-{}", prefix, r));
        const std::string said(v.begin(), v.end());
        if (said != "ok") failed.push_back(fmt::format("rank {}: {}", r, said));
      }
    } catch (const std::exception& e) {
      return closed_error(fmt::format("forming {}: agreeing on try {} through the store failed: {}", c->peer_,
                                      attempt, first_line(e.what())));
    }
    c->store_->setTimeout(timeout);
    if (failed.empty()) {
      if (attempt > 1) log->warn("the trainers' group formed at try {} of {}", attempt, kFormations);
      return c;
    }
    c->pg_.reset();
    log->warn("forming the trainers' group failed (try {} of {}): {}{}", attempt, kFormations,
              fmt::join(failed, "; "), attempt < kFormations ? "; trying again" : "");
    if (own.is_ok()) own = closed_error(fmt::format("another trainer could not form the group: {}", failed.front()));
  }
  return own.with_context(fmt::format("forming {} ({} tries)", c->peer_, kFormations));
}

Collectives::~Collectives() {
  if (abandoned_ && pg_) (void)pg_.release();  // left to the process's end, with the work in flight
}

Status Collectives::await_healthy(const c10::intrusive_ptr<c10d::Work>& work,
                                  std::chrono::steady_clock::time_point deadline, const std::string& what) {
  if (!health_) return Status::ok();
  c10::intrusive_ptr<c10::ivalue::Future> future;
  try {
    future = work->getFuture();
  } catch (const std::exception&) {
    return Status::ok();  // no future (send, receive): the caller's wait alone
  }
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto d = std::make_shared<Done>();
  future->addCallback([d](c10::ivalue::Future&) {  // on Gloo's thread, or here when already complete
    std::lock_guard<std::mutex> lock(d->mu);
    d->done = true;
    d->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(d->mu);
  while (!d->done) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    if (d->cv.wait_until(lock, std::min(deadline, now + kHealthCheckEvery), [&] { return d->done; })) break;
    lock.unlock();
    Status h = health_();
    lock.lock();
    if (!h.is_ok()) {
      abandoned_ = true;
      return h.with_context(what + " (given up while waiting for it)");
    }
  }
  return Status::ok();
}

Status Collectives::exchange(std::vector<TrainingBackend::Transfer>& sends,
                             std::vector<TrainingBackend::Transfer>& recvs, const std::string& what,
                             std::chrono::milliseconds timeout) {
  if (health_) {
    if (Status h = health_(); !h.is_ok()) return h.with_context(what);
  }
  constexpr int kTag = 0x434b;  // "CK"
  std::vector<std::pair<std::string, c10::intrusive_ptr<c10d::Work>>> works;
  std::vector<std::vector<at::Tensor>> keep;  // Gloo holds references; keep the vectors alive too
  keep.reserve(sends.size() + recvs.size());
  // The health watch: started once every transfer is posted, ended before this returns.
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  Status unhealthy;
  std::thread watch;
  auto end_watch = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
    }
    cv.notify_all();
    if (watch.joinable()) watch.join();
  };
  try {
    for (auto& r : recvs) {
      keep.push_back({r.bytes});
      works.emplace_back(fmt::format("{} bytes from rank {}", r.bytes.numel(), r.peer), pg_->recv(keep.back(), r.peer, kTag));
    }
    for (auto& s : sends) {
      keep.push_back({s.bytes});
      works.emplace_back(fmt::format("{} bytes to rank {}", s.bytes.numel(), s.peer), pg_->send(keep.back(), s.peer, kTag));
    }
    if (health_) {
      watch = std::thread([&] {
        std::unique_lock<std::mutex> lock(mu);
        while (!cv.wait_for(lock, kHealthCheckEvery, [&] { return finished; })) {
          lock.unlock();
          Status h = health_();
          lock.lock();
          if (!h.is_ok()) {
            unhealthy = std::move(h);
            for (auto& w : works) w.second->abort();  // each wait below returns false
            return;
          }
        }
      });
    }
    for (auto& [desc, work] : works) {
      if (!work->wait(timeout)) {
        end_watch();
        if (!unhealthy.is_ok()) {
          abandoned_ = true;
          return unhealthy.with_context(what + " (given up while waiting for it)");
        }
        return timeout_error(fmt::format("{}: {} over {} did not complete within {} ms (a trainer died or hangs){}",
                                         what, desc, peer_, timeout.count(), diagnosis()));
      }
    }
  } catch (const std::exception& e) {
    end_watch();
    if (!unhealthy.is_ok()) {
      abandoned_ = true;
      return unhealthy.with_context(what + " (given up while waiting for it)");
    }
    std::string msg = e.what();
    if (auto nl = msg.find("\nException raised from"); nl != std::string::npos) msg.resize(nl);
    return closed_error(fmt::format("{}: {} failed (a trainer died?): {}{}", what, peer_, msg, diagnosis()));
  }
  end_watch();
  return Status::ok();
}

Status Collectives::form(const c10::intrusive_ptr<c10d::Store>& store, const std::string& own_host,
                         const net::Secret* secret) {
  try {
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout_);
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(own_host));
    pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank_, world_, opts);
  } catch (const std::exception& e) {
    return closed_error(fmt::format("joining {} failed: {}", peer_, first_line(e.what())));
  }
  return secret ? prove_pairs(*store, *secret) : Status::ok();
}

Status Collectives::prove_pairs(c10d::Store& store, const net::Secret& secret) {
  std::vector<uint8_t> session;
  try {
    if (rank_ == 0) {
      const net::AuthNonce n = net::random_nonce();
      store.set(net::kPairProofSessionKey, std::vector<uint8_t>(n.begin(), n.end()));
    }
    session = store.get(net::kPairProofSessionKey);
  } catch (const std::exception& e) {
    return closed_error(fmt::format("{}: reading the session nonce: {}", peer_, first_line(e.what())));
  }
  auto proof = [&](int from, int to) { return net::pair_proof(secret, session, from, to); };
  std::vector<TrainingBackend::Transfer> sends, recvs;
  for (int peer = 0; peer < world_; ++peer) {
    if (peer == rank_) continue;
    const net::AuthMac mac = proof(rank_, peer);
    auto out = torch::empty({static_cast<int64_t>(mac.size())}, torch::kUInt8);
    std::memcpy(out.data_ptr<uint8_t>(), mac.data(), mac.size());
    sends.push_back({peer, out});
    recvs.push_back({peer, torch::zeros({static_cast<int64_t>(net::kAuthMacBytes)}, torch::kUInt8)});
  }
  // The pairs are connected by now: a proof that takes long is not coming.
  const auto wait = std::min(timeout_, std::chrono::milliseconds(10000));
  DGLD_RETURN_IF_ERROR(exchange(sends, recvs, "proving the Gloo pairs hold the job's secret", wait));
  for (const auto& r : recvs) {
    const std::span<const uint8_t> got(r.bytes.data_ptr<uint8_t>(), static_cast<size_t>(r.bytes.numel()));
    if (!net::mac_matches(got, proof(r.peer, rank_))) {
      return protocol_error(fmt::format("{}: the Gloo connection from rank {} did not prove the job's secret (a "
                                        "stranger connected to this trainer's Gloo port while the group formed?)",
                                        peer_, r.peer));
    }
  }
  logger("trainer")->info("the Gloo group formed: the connections to {} other trainer(s) proved the job's secret",
                          world_ - 1);
  return Status::ok();
}

}  // namespace dgld::trainer::dist
