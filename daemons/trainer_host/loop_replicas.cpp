// The training loop: checkpoint replicas on other machines (--checkpoint-
// replicas, common/checkpoint_store.h) and, on a resume, the files a rank
// lacks fetched from a machine that holds them (loop.h).

#include <cstring>

#include <fmt/format.h>

#include "common/memory.h"
#include "daemons/trainer_host/loop.h"

namespace dgld::trainer {

namespace {

constexpr int64_t kTrimAfterReplicaBytes = int64_t{8} << 20;

// The files of a checkpoint as one byte tensor (payload, JSON, then the journal's piece).
torch::Tensor pack(const CheckpointStore::Files& f) {
  auto t = torch::empty({static_cast<int64_t>(f.payload.size() + f.meta.size() + f.history.size())}, torch::kUInt8);
  auto* out = t.data_ptr<uint8_t>();
  for (const std::string* part : {&f.payload, &f.meta, &f.history}) {
    std::memcpy(out, part->data(), part->size());
    out += part->size();
  }
  return t;
}

CheckpointStore::Files unpack(const torch::Tensor& t, int64_t payload_bytes, int64_t meta_bytes,
                              HistoryMark history_from) {
  const auto* p = reinterpret_cast<const char*>(t.data_ptr<uint8_t>());
  const auto n = [](int64_t v) { return static_cast<size_t>(v); };
  return {std::string(p, n(payload_bytes)), std::string(p + payload_bytes, n(meta_bytes)),
          std::string(p + payload_bytes + meta_bytes, n(t.numel() - payload_bytes - meta_bytes)), history_from};
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
  const int world = b_.world_size();
  replica_marks_.resize(static_cast<size_t>(world));
  const std::string what = fmt::format("replicating the checkpoint of {}", p.str());
  // marks[h][s]: how much of rank s's journal rank h's replica holds; a
  // sender sends only the rest.
  auto marks = torch::zeros({world, world, 2}, torch::kInt64);
  for (int s : sources) {
    marks[me][s][0] = static_cast<int64_t>(replica_marks_[s].bytes);
    marks[me][s][1] = static_cast<int64_t>(replica_marks_[s].crc32);
  }
  DGLD_RETURN_IF_ERROR(b_.allreduce(marks, Reduce::sum, what + ": the history each replica holds"));
  // sizes[s]: payload and JSON bytes, then for each holder h the journal
  // bytes s sends it and whether they continue h's mark (1) or start over (0).
  auto sizes = torch::zeros({world, 2 + 2 * world}, torch::kInt64);
  std::vector<TrainingBackend::Transfer> sends, recvs;
  int64_t sent = 0;
  std::string history_sent;  // for the log line: what of the journal went to each holder
  for (int h : holders) {
    const HistoryMark held{static_cast<uint64_t>(marks[h][me][0].item<int64_t>()),
                           static_cast<uint32_t>(marks[h][me][1].item<int64_t>())};
    DGLD_ASSIGN_OR_RETURN(const CheckpointStore::Files mine, ckpt_->read(p, held));
    sizes[me][0] = static_cast<int64_t>(mine.payload.size());
    sizes[me][1] = static_cast<int64_t>(mine.meta.size());
    sizes[me][2 + 2 * h] = static_cast<int64_t>(mine.history.size());
    sizes[me][3 + 2 * h] = mine.history_from.bytes > 0 ? 1 : 0;
    sends.push_back({h, pack(mine)});
    sent += sends.back().bytes.numel();
    history_sent += fmt::format("{}{} history bytes from byte {} to rank {}", history_sent.empty() ? "" : ", ",
                                mine.history.size(), mine.history_from.bytes, h);
  }
  DGLD_RETURN_IF_ERROR(b_.allreduce(sizes, Reduce::sum, what + ": sizes"));
  const auto size = [&](int s, int col) { return sizes[s][col].item<int64_t>(); };
  for (int s : sources) recvs.push_back({s, torch::empty({size(s, 0) + size(s, 1) + size(s, 2 + 2 * me)}, torch::kUInt8)});
  DGLD_RETURN_IF_ERROR(b_.exchange(sends, recvs, what));
  int64_t received = 0;
  for (const auto& r : recvs) {
    const int s = r.peer;
    const auto store = CheckpointStore::replica(c_.checkpoint_dir, s);
    const std::string from = fmt::format("rank {} (machine {})", s, mor[s]);
    const HistoryMark history_from = size(s, 3 + 2 * me) ? replica_marks_[s] : HistoryMark{};
    Status st = store.adopt(p, unpack(r.bytes, size(s, 0), size(s, 1), history_from), from, &replica_marks_[s]);
    if (!st.is_ok()) {  // the job goes on; this copy does not count, and the next one sends the journal whole
      replica_marks_[s] = {};
      log_->warn("{}; rank {}'s checkpoint has no replica on this machine", st.message(), s);
      continue;
    }
    store.prune(p);
    received += r.bytes.numel();
  }
  // A journal sent or received whole (the first copy after a replica's
  // failed one, a receiver's mark that did not match) leaves large buffers
  // in the heap (common/memory.h keeps freed memory): hand them back, once
  // they are freed (the 60-minute soak's trainers kept two copies of a 14 MB
  // journal when the trim ran before the transfers' buffers went).
  sends.clear();
  recvs.clear();
  if (sent + received > kTrimAfterReplicaBytes) trim_heap();
  r_.replica_bytes_sent += sent;
  r_.replica_s += seconds_since(t0);
  log_->info("checkpoint of {} replicated in {:.3f} s: {} bytes to {} ({}); {} bytes of {} held in {}", p.str(),
             seconds_since(t0), sent, rank_list(holders, mor), history_sent, received, rank_list(sources, mor),
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
  auto sizes = torch::zeros({b_.world_size(), 3}, torch::kInt64);  // payload, JSON, whole journal
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
    sizes[to][2] = static_cast<int64_t>(files->history.size());
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
      recvs.push_back({from, torch::empty({sizes[to][0].item<int64_t>() + sizes[to][1].item<int64_t>() +
                                           sizes[to][2].item<int64_t>()},
                                          torch::kUInt8)});
    }
  }
  DGLD_RETURN_IF_ERROR(b_.exchange(sends, recvs, what));
  for (const auto& r : recvs) {
    const std::string from = fmt::format("rank {}'s replica (machine {})", r.peer, mor[r.peer]);
    DGLD_RETURN_IF_ERROR(ckpt_->adopt(
        p, unpack(r.bytes, sizes[me][0].item<int64_t>(), sizes[me][1].item<int64_t>(), HistoryMark{}), from));
    log_->info("no intact checkpoint of {} in {}: fetched from {} ({} bytes, {:.3f} s) and verified", p.str(),
               ckpt_->dir().string(), from, r.bytes.numel(), seconds_since(t0));
  }
  return Status::ok();
}

}  // namespace dgld::trainer
