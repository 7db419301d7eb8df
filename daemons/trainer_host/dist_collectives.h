#pragma once
// A distributed trainer's collectives (private to trainer-host): the Gloo
// process group of a job's trainers with deadlines on every call, which
// trainer owns each learnable-embedding row, and the embedding tables as
// DistTensors with their gradients routed to the owners.

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "client/dist_tensor.h"
#include "client/rendezvous_store.h"
#include "common/net/auth.h"
#include "common/partition/partition_book.h"
#include "daemons/trainer_host/training_loop.h"

namespace dgld::trainer::dist {

// The collectives of one job: dgld's rendezvous store (client/rendezvous_store.h,
// served by rank 0, authenticated with the job's secret) and a Gloo process
// group formed through it. Gloo's own connections have no handshake, and
// each trainer listens for them while the group forms; so once formed, every
// pair proves over itself that both ends hold the job's secret (a stranger
// who took a pair's connection in that window fails the job's start instead
// of joining its allreduce). Nothing listens after that but the store.
class Collectives {
 public:
  // Serves the store (rank 0), joins it and forms the group; a formation
  // that fails anywhere (a stranger took a pair, a pair's proof did not
  // verify) is agreed on through the store and tried again, up to
  // kFormations times (dist_collectives.cpp).
  static Result<std::unique_ptr<Collectives>> create(const std::string& master_host, int port,
                                                     const std::string& own_host, int rank, int world,
                                                     std::chrono::milliseconds timeout, net::SecretPtr secret);
  static constexpr int kFormations = 5;
  static constexpr std::chrono::milliseconds kHealthCheckEvery{200};
  // A group left with a collective in flight (abandoned on a failed health
  // check) is not destroyed: its destructor would wait for Gloo's worker,
  // blocked on the lost peer until the deadline. The process is ending.
  ~Collectives();

  int rank() const { return rank_; }
  int world() const { return world_; }
  // `health` is checked before every collective and, every
  // kHealthCheckEvery, while one waits: once it fails (the coordinator
  // dropped a trainer, or is gone) the job stops there instead of training on
  // or waiting out the deadline for a peer that is gone. `diagnose` runs after
  // a collective failed and says what else is wrong (a lost graph-server is
  // often why a peer died).
  void watch(std::function<Status()> health, std::function<Status()> diagnose) {
    health_ = std::move(health);
    diagnose_ = std::move(diagnose);
  }

  Status allreduce(torch::Tensor& t, Reduce op, const std::string& what) {
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = op == Reduce::sum ? c10d::ReduceOp::SUM : op == Reduce::min ? c10d::ReduceOp::MIN
                                                                             : c10d::ReduceOp::MAX;
    o.timeout = timeout_;
    return run(what, [&] { return pg_->allreduce(v, o); });
  }
  Status broadcast(torch::Tensor& t, const std::string& what) {
    std::vector<at::Tensor> v{t};
    c10d::BroadcastOptions o;
    o.rootRank = 0;
    o.timeout = timeout_;
    return run(what, [&] { return pg_->broadcast(v, o); });
  }
  // Rows of `in` go to the ranks in order, in_splits[r] of them to rank r;
  // `out` receives out_splits[r] rows from rank r.
  Status alltoall(torch::Tensor& out, torch::Tensor& in, std::vector<int64_t> out_splits,
                  std::vector<int64_t> in_splits, const std::string& what) {
    c10d::AllToAllOptions o;
    o.timeout = timeout_;
    return run(what, [&] { return pg_->alltoall_base(out, in, out_splits, in_splits, o); });
  }

  // Point-to-point: every send and receive posted (Gloo send/recv of byte
  // tensors, one tag), then each waited for with the deadline.
  Status exchange(std::vector<TrainingBackend::Transfer>& sends, std::vector<TrainingBackend::Transfer>& recvs,
                  const std::string& what) {
    return exchange(sends, recvs, what, timeout_);
  }
  // Gloo's send and receive have no future: while they wait, a thread of
  // this call checks `health` every kHealthCheckEvery and aborts them once
  // it fails, as await_healthy does for the collectives.
  Status exchange(std::vector<TrainingBackend::Transfer>& sends, std::vector<TrainingBackend::Transfer>& recvs,
                  const std::string& what, std::chrono::milliseconds timeout);

 private:
  Collectives() = default;
  template <typename F>
  Status run(const std::string& what, F&& start) {
    if (health_) {
      if (Status h = health_(); !h.is_ok()) return h.with_context(what);
    }
    try {
      auto work = start();
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      DGLD_RETURN_IF_ERROR(await_healthy(work, deadline, what));
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (!work->wait(std::max(left, std::chrono::milliseconds(1)))) {
        return timeout_error(fmt::format("{}: {} did not complete within {} ms (a trainer died or hangs){}", what,
                                         peer_, timeout_.count(), diagnosis()));
      }
    } catch (const std::exception& e) {
      std::string msg = e.what();
      if (auto nl = msg.find("\nException raised from"); nl != std::string::npos) msg.resize(nl);
      return closed_error(fmt::format("{}: {} failed (a trainer died?): {}{}", what, peer_, msg, diagnosis()));
    }
    return Status::ok();
  }
  // Waits until `work` completes or fails (its future's callback) or the
  // deadline passes, checking health_ every kHealthCheckEvery; a failed
  // check returns it at once and marks the group abandoned. OK otherwise:
  // the caller's wait reports the outcome. Works without a future (Gloo's
  // send and receive) are left to the caller's wait.
  Status await_healthy(const c10::intrusive_ptr<c10d::Work>& work, std::chrono::steady_clock::time_point deadline,
                       const std::string& what);
  // One try at forming the group through `store` (a prefix of the job's
  // store per try): Gloo's pairs, then their proofs (prove_pairs).
  Status form(const c10::intrusive_ptr<c10d::Store>& store, const std::string& own_host,
              const net::Secret* secret);
  // Each trainer sends every other one HMAC(secret, label, session, from, to)
  // over their Gloo pair and checks what arrives the same way. The session
  // is rank 0's fresh nonce, read from the authenticated store, so a proof
  // recorded in another job does not verify here.
  Status prove_pairs(c10d::Store& store, const net::Secret& secret);
  std::string diagnosis() const {
    if (!diagnose_) return "";
    Status d = diagnose_();
    return d.is_ok() ? "" : "; " + d.message();
  }

  std::unique_ptr<client::RendezvousServer> server_;  // rank 0; destroyed after the group and the store
  int rank_ = 0, world_ = 1;
  std::chrono::milliseconds timeout_{60000};
  std::string peer_;
  std::function<Status()> health_, diagnose_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  bool abandoned_ = false;
};

// Which trainer owns each embedding row: one of the trainers of the machine
// that owns the node (by id modulo their count); a machine without trainers
// leaves its rows to rank id % world.
class RowOwners {
 public:
  RowOwners(const RangePartitionBook& book, const std::vector<int>& machine_of_rank)
      : book_(book), by_machine_(static_cast<size_t>(book.num_partitions())),
        world_(static_cast<int>(machine_of_rank.size())) {
    for (int r = 0; r < world_; ++r) by_machine_[static_cast<size_t>(machine_of_rank[r])].push_back(r);
  }
  int owner(int64_t id) const {
    const auto& ranks = by_machine_[static_cast<size_t>(book_.node_partition(id))];
    if (ranks.empty()) return static_cast<int>(id % world_);
    return ranks[static_cast<size_t>(id % static_cast<int64_t>(ranks.size()))];
  }
  std::vector<int64_t> owned_by(int rank) const {
    std::vector<int64_t> ids;
    for (int64_t id = 0; id < book_.num_nodes(); ++id) {
      if (owner(id) == rank) ids.push_back(id);
    }
    return ids;
  }

 private:
  const RangePartitionBook& book_;
  std::vector<std::vector<int>> by_machine_;
  int world_;
};

// A learnable embedding's tables as DistTensors; gradients routed to the row
// owners with an all-to-all.
class DistEmbeddingStore final : public EmbeddingStore {
 public:
  DistEmbeddingStore(std::vector<client::DistTensor> tables, Collectives& coll, RowOwners owners)
      : tables_(std::move(tables)), coll_(coll), owners_(std::move(owners)) {}

  int64_t num_rows() const override { return tables_[0].num_rows(); }
  int num_tables() const override { return static_cast<int>(tables_.size()); }
  int64_t dim(int table) const override { return tables_[static_cast<size_t>(table)].shape()[1]; }
  Status read(int table, std::span<const int64_t> ids, float* out) const override {
    return tables_[static_cast<size_t>(table)].pull_into(ids, out);
  }
  Status write(int table, std::span<const int64_t> ids, const float* rows) override {
    return tables_[static_cast<size_t>(table)].push(ids, rows);
  }
  int world_size() const override { return coll_.world(); }
  std::vector<int64_t> owned_ids() const override { return owners_.owned_by(coll_.rank()); }
  Status sync() override {
    auto one = torch::ones({1}, torch::kInt64);
    return coll_.allreduce(one, Reduce::sum, "embedding update barrier");
  }

  Status route(const std::vector<int64_t>& ids, const torch::Tensor& grads, std::vector<int64_t>& owned_ids,
               torch::Tensor& owned_grads) override {
    const int world = coll_.world();
    const int64_t d = grads.size(1);
    // Order the rows by owner.
    std::vector<int> owner(ids.size());
    std::vector<int64_t> send_counts(static_cast<size_t>(world), 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      owner[i] = owners_.owner(ids[i]);
      ++send_counts[static_cast<size_t>(owner[i])];
    }
    std::vector<int64_t> order(ids.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return owner[a] < owner[b]; });
    auto send_ids = torch::empty({static_cast<int64_t>(ids.size())}, torch::kInt64);
    for (size_t i = 0; i < order.size(); ++i) send_ids.data_ptr<int64_t>()[i] = ids[static_cast<size_t>(order[i])];
    auto send_grads = grads.index_select(0, ids_tensor(order)).contiguous();

    auto counts_in = torch::tensor(send_counts, torch::kInt64);
    auto counts_out = torch::empty({world}, torch::kInt64);
    const std::vector<int64_t> ones(static_cast<size_t>(world), 1);
    DGLD_RETURN_IF_ERROR(coll_.alltoall(counts_out, counts_in, ones, ones, "embedding gradients: counts"));
    std::vector<int64_t> recv_counts(counts_out.data_ptr<int64_t>(), counts_out.data_ptr<int64_t>() + world);
    const int64_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
    auto recv_ids = torch::empty({total}, torch::kInt64);
    owned_grads = torch::empty({total, d}, torch::kFloat32);
    DGLD_RETURN_IF_ERROR(coll_.alltoall(recv_ids, send_ids, recv_counts, send_counts, "embedding gradients: ids"));
    DGLD_RETURN_IF_ERROR(
        coll_.alltoall(owned_grads, send_grads, recv_counts, send_counts, "embedding gradients: rows"));
    owned_ids.assign(recv_ids.data_ptr<int64_t>(), recv_ids.data_ptr<int64_t>() + total);
    return Status::ok();
  }

 private:
  std::vector<client::DistTensor> tables_;
  Collectives& coll_;
  RowOwners owners_;
};

}  // namespace dgld::trainer::dist
