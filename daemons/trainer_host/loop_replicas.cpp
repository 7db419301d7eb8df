// The training loop: checkpoint replicas on other machines (--checkpoint-
// replicas, common/checkpoint_store.h) and, on a resume, the files a rank
// lacks fetched from a machine that holds them (loop.h).

#include <cstring>

#include <fmt/format.h>

#include "daemons/trainer_host/loop.h"

namespace dgld::trainer {

namespace {

// The two files of a checkpoint as one byte tensor (payload, then JSON).
torch::Tensor pack(const CheckpointStore::Files& f) {
  auto t = torch::empty({static_cast<int64_t>(f.payload.size() + f.meta.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr<uint8_t>(), f.payload.data(), f.payload.size());
  std::memcpy(t.data_ptr<uint8_t>() + f.payload.size(), f.meta.data(), f.meta.size());
  return t;
}

CheckpointStore::Files unpack(const torch::Tensor& t, int64_t payload_bytes) {
  const auto* p = reinterpret_cast<const char*>(t.data_ptr<uint8_t>());
  return {std::string(p, static_cast<size_t>(payload_bytes)),
          std::string(p + payload_bytes, static_cast<size_t>(t.numel() - payload_bytes))};
}

std::string rank_list(const std::vector<int>& ranks, const std::vector<int>& machine_of_rank) {
  std::string out;
  for (int r : ranks) out += fmt::format("{}rank {} (machine {})", out.empty() ? "" : ", ", r, machine_of_rank[r]);
  return out.empty() ? "none" : out;
}

}  // namespace

std::vector<int> Loop::machine_of_ranks() const {
  std::vector<int> out;
  for (int r = 0; r < b_.world_size(); ++r) out.push_back(b_.machine_of_rank(r));
  return out;
}

std::vector<std::vector<CheckpointPosition>> Loop::held_checkpoints(std::vector<RefusedCheckpoint>& refused) const {
  std::vector<std::vector<CheckpointPosition>> held(static_cast<size_t>(b_.world_size()));
  held[b_.rank()] = ckpt_->valid(&refused);
  for (int r = 0; r < b_.world_size(); ++r) {  // every replica here, whatever --checkpoint-replicas says now
    const auto store = CheckpointStore::replica(c_.checkpoint_dir, r);
    std::error_code ec;
    if (r != b_.rank() && std::filesystem::is_directory(store.dir(), ec)) held[r] = store.valid(&refused);
  }
  return held;
}

Status Loop::replicate(CheckpointPosition p) {
  const auto mor = machine_of_ranks();
  const int me = b_.rank(), k = c_.checkpoint_replicas;
  // The same answer on every rank: with two machines with trainers, every rank has a holder.
  if (b_.world_size() == 1 || replica_holders(mor, 0, k).empty()) return Status::ok();
  const auto t0 = Clock::now();
  const std::vector<int> holders = replica_holders(mor, me, k), sources = replicas_held_by(mor, me, k);
  DGLD_ASSIGN_OR_RETURN(const CheckpointStore::Files mine, ckpt_->read(p));
  auto sizes = torch::zeros({b_.world_size(), 2}, torch::kInt64);
  sizes[me][0] = static_cast<int64_t>(mine.payload.size());
  sizes[me][1] = static_cast<int64_t>(mine.meta.size());
  const std::string what = fmt::format("replicating the checkpoint of {}", p.str());
  DGLD_RETURN_IF_ERROR(b_.allreduce(sizes, Reduce::sum, what + ": sizes"));
  std::vector<TrainingBackend::Transfer> sends, recvs;
  const torch::Tensor packed = pack(mine);
  for (int h : holders) sends.push_back({h, packed});
  for (int s : sources) recvs.push_back({s, torch::empty({sizes[s][0].item<int64_t>() + sizes[s][1].item<int64_t>()},
                                                         torch::kUInt8)});
  DGLD_RETURN_IF_ERROR(b_.exchange(sends, recvs, what));
  int64_t received = 0;
  for (const auto& r : recvs) {
    const auto store = CheckpointStore::replica(c_.checkpoint_dir, r.peer);
    const std::string from = fmt::format("rank {} (machine {})", r.peer, mor[r.peer]);
    Status st = store.adopt(p, unpack(r.bytes, sizes[r.peer][0].item<int64_t>()), from);
    if (!st.is_ok()) {  // the job goes on; this copy does not count
      log_->warn("{}; rank {}'s checkpoint has no replica on this machine", st.message(), r.peer);
      continue;
    }
    store.prune(p);
    received += r.bytes.numel();
  }
  const int64_t sent = packed.numel() * static_cast<int64_t>(holders.size());
  r_.replica_bytes_sent += sent;
  r_.replica_s += seconds_since(t0);
  log_->info("checkpoint of {} replicated in {:.3f} s: {} bytes to {}; {} bytes of {} held in {}", p.str(),
             seconds_since(t0), sent, rank_list(holders, mor), received, rank_list(sources, mor),
             (std::filesystem::path(c_.checkpoint_dir) / "replica").string());
  return Status::ok();
}

Status Loop::fetch_missing(const CheckpointPlan& plan) {
  const auto transfers = plan.transfers();  // the same on every rank
  if (transfers.empty()) return Status::ok();
  const auto t0 = Clock::now();
  const CheckpointPosition p = *plan.position;
  const auto mor = machine_of_ranks();
  const int me = b_.rank();
  const std::string what = fmt::format("fetching the checkpoint of {} from the machines holding it", p.str());
  auto sizes = torch::zeros({b_.world_size(), 2}, torch::kInt64);
  std::vector<TrainingBackend::Transfer> sends, recvs;
  for (const auto& [to, from] : transfers) {
    if (from != me) continue;
    auto files = CheckpointStore::replica(c_.checkpoint_dir, to).read(p);
    if (!files.is_ok()) {
      log_->error("{}: {}", what, files.status().message());
      sizes[to][0] = -1;
      continue;
    }
    sizes[to][0] = static_cast<int64_t>(files->payload.size());
    sizes[to][1] = static_cast<int64_t>(files->meta.size());
    sends.push_back({to, pack(*files)});
  }
  DGLD_RETURN_IF_ERROR(b_.allreduce(sizes, Reduce::sum, what + ": sizes"));
  for (const auto& [to, from] : transfers) {
    if (sizes[to][0].item<int64_t>() < 0) {
      return corruption(fmt::format("{}: rank {} (machine {}) could not read its replica of rank {} (its log says "
                                    "why)",
                                    what, from, mor[from], to));
    }
    if (to == me) {
      recvs.push_back({from, torch::empty({sizes[to][0].item<int64_t>() + sizes[to][1].item<int64_t>()},
                                          torch::kUInt8)});
    }
  }
  DGLD_RETURN_IF_ERROR(b_.exchange(sends, recvs, what));
  for (const auto& r : recvs) {
    const std::string from = fmt::format("rank {}'s replica (machine {})", r.peer, mor[r.peer]);
    DGLD_RETURN_IF_ERROR(ckpt_->adopt(p, unpack(r.bytes, sizes[me][0].item<int64_t>()), from));
    log_->info("no intact checkpoint of {} in {}: fetched from {} ({} bytes, {:.3f} s) and verified", p.str(),
               ckpt_->dir().string(), from, r.bytes.numel(), seconds_since(t0));
  }
  return Status::ok();
}

}  // namespace dgld::trainer
