// The training loop: checkpoints, resume, and --keep-best (loop.h).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "common/buffer_pool.h"
#include "common/file_util.h"
#include "common/job_env.h"
#include "common/memory.h"
#include "daemons/trainer_host/loop.h"
#include "daemons/trainer_host/progress.h"

namespace dgld::trainer {

namespace {

// 3: positions (epoch, step) and checksums (common/checkpoint_store.h);
// 4: the task (link prediction's scorer), heterogeneous graphs (relations,
// bases) and the trained parameters outside the model (the scorer's, the
// node types' input projections) in the payload;
// 5: the per-epoch history in the store's journal (a mark in the JSON),
// the last evaluation's figures in "results" (4 carried every epoch in
// "metrics", a checkpoint growing with the job).
constexpr int kCheckpointFormat = 5;

// The payload's archive of the parameters trained beside the model, by position.
constexpr const char* kOuterParams = "outer_params";

}  // namespace

nlohmann::json Loop::checkpoint_meta() const {
  return {{"format", kCheckpointFormat},
          {"task", c_.task},
          {"scorer", link_ ? c_.scorer : ""},
          {"num_rels", mc_.num_rels},
          {"num_bases", mc_.num_bases},
          {"outer_params", outer_params().size()},
          {"graph_name", b_.graph_name()},
          {"num_nodes", b_.num_nodes()},
          {"num_trainers", b_.world_size()},
          {"model", c_.model_file.empty() ? c_.model : model_->checkpoint_name()},
          {"in_dim", mc_.in_dim},
          {"num_hidden", mc_.num_hidden},
          {"num_classes", mc_.num_classes},
          {"num_layers", mc_.num_layers},
          {"num_heads", mc_.num_heads},
          {"feature", c_.feature},
          {"learnable_features", learnable_features_name(c_.learnable_features)},
          {"embed_dim", embedding_ ? c_.embed_dim : 0},
          {"sparse_optimizer", embedding_ ? c_.sparse_optimizer : ""},
          {"batch_size", c_.batch_size},
          {"seed", c_.seed},
          {"results", nlohmann::json::parse(last_results_json(r_))}};
}

Status Loop::save_checkpoint(CheckpointPosition p) {
  const auto t0 = Clock::now();
  torch::serialize::OutputArchive archive;
  {
    torch::serialize::OutputArchive model_ar, optim_ar;
    model_->impl().save_state(model_ar);
    optimizer_->save(optim_ar);
    archive.write("model", model_ar);
    archive.write("optimizer", optim_ar);
    torch::serialize::OutputArchive outer_ar;
    const auto outer = outer_params();
    for (size_t i = 0; i < outer.size(); ++i) outer_ar.write(std::to_string(i), outer[i].detach());
    archive.write(kOuterParams, outer_ar);
  }
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("rng", gen.get_state());
  }
  if (embedding_) DGLD_RETURN_IF_ERROR(embedding_->save(archive));
  const auto tmp = ckpt_->temp_payload_path(p);
  try {
    archive.save_to(tmp.string());
  } catch (const c10::Error& e) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return io_error(fmt::format("writing checkpoint {}: {}", tmp.string(), first_line(e.what_without_backtrace())));
  }
  DGLD_ASSIGN_OR_RETURN(history_mark_,
                        ckpt_->append_history(history_mark_, history_records(r_, history_epochs_, history_evals_)));
  history_epochs_ = r_.epochs.size();
  history_evals_ = r_.evals.size();
  nlohmann::json meta = checkpoint_meta();
  meta["history"] = history_mark_.to_json();
  if (p.step > 0) {  // the epoch in progress: its figures so far
    meta["partial_epoch"] = {{"loss_sum", partial_.loss_sum},   {"correct_sum", partial_.correct_sum},
                             {"seeds_sum", partial_.seeds_sum}, {"time_s", partial_.time_s},
                             {"step_losses", partial_.step_losses}};
  }
  DGLD_RETURN_IF_ERROR(ckpt_->seal(p, tmp, std::move(meta)));
  if (b_.world_size() > 1) {  // committed only once every trainer holds it
    auto one = torch::ones({1}, torch::kInt64);
    DGLD_RETURN_IF_ERROR(b_.allreduce(one, Reduce::sum, fmt::format("checkpoint of {}: barrier", p.str())));
  }
  ckpt_->prune(p);
  log_->info("checkpoint of {} written to {} ({:.2f} s)", p.str(), ckpt_->dir().string(), seconds_since(t0));
  DGLD_RETURN_IF_ERROR(replicate(p));
  ++r_.checkpoints;
  r_.checkpoint_s += seconds_since(t0);
  if (b_.rank() == 0) announce_progress("checkpoint", p);
  return Status::ok();
}

Result<CheckpointPosition> Loop::resume() {
  std::vector<RefusedCheckpoint> refused;
  const auto held = held_checkpoints(refused);
  const std::vector<CheckpointPosition>& mine = held[b_.rank()];
  for (const auto& r : refused) log_->warn("refused checkpoint {}: {}", r.path.string(), r.reason);
  // Every trainer's newest intact positions of every rank (its own and the
  // replicas it holds), to find the newest whose files all ranks can have.
  const int world = b_.world_size();
  auto table = torch::zeros({world, world * kCheckpointExchange}, torch::kInt64);
  const std::vector<int64_t> offer = checkpoint_offer(held);
  std::copy(offer.begin(), offer.end(), table[b_.rank()].data_ptr<int64_t>());
  DGLD_RETURN_IF_ERROR(b_.allreduce(table, Reduce::sum, "agreeing on the checkpoint to resume from"));
  DGLD_ASSIGN_OR_RETURN(const CheckpointPlan plan,
                        agreed_from_offers({table.data_ptr<int64_t>(), static_cast<size_t>(table.numel())}, world,
                                           c_.checkpoint_dir, "--checkpoint-dir"));
  const std::optional<CheckpointPosition>& agreed = plan.position;
  if (!agreed) {
    log_->warn("--resume: no checkpoint in {} yet; starting from epoch 0", c_.checkpoint_dir);
    return CheckpointPosition{};
  }
  if (!mine.empty() && mine.front() > *agreed) {
    log_->warn("resuming from {}: the newer {} in {} is not held intact by every trainer", agreed->str(),
               mine.front().str(), ckpt_->dir().string());
  }
  DGLD_RETURN_IF_ERROR(fetch_missing(plan));
  auto meta = ckpt_->verify(*agreed);
  if (!meta.is_ok()) return meta.status();
  DGLD_RETURN_IF_ERROR(load_checkpoint(*agreed, *meta));
  if (embedding_ && world > 1) {
    // Each trainer wrote its own shard of the embedding back; no trainer may
    // read another's rows before that shard is in (a lookup in the first
    // step raced the owner's load: resumed losses differed by 1e-3).
    auto one = torch::ones({1}, torch::kInt64);
    DGLD_RETURN_IF_ERROR(b_.allreduce(one, Reduce::sum, "resume: every trainer's embedding shard loaded"));
  }
  // What this machine's replicas hold of the other ranks' journals: the mark
  // of the newest intact replica position up to the agreed one (the agreed
  // position itself is missing here when the job failed while it was being
  // copied: the 60-minute soak's trainers then sent their whole journals).
  // The first copies of this run send only what follows; a sender checks
  // that the mark is a prefix of its journal (CheckpointStore::read).
  replica_marks_.assign(static_cast<size_t>(world), HistoryMark{});
  for (int r = 0; r < world; ++r) {
    if (r == b_.rank()) continue;
    const auto& positions = held[static_cast<size_t>(r)];  // intact, newest first
    const auto at = std::find_if(positions.begin(), positions.end(), [&](CheckpointPosition q) { return q <= *agreed; });
    if (at == positions.end()) continue;
    const auto store = CheckpointStore::replica(c_.checkpoint_dir, r);
    auto replica_meta = store.verify(*at);
    if (!replica_meta.is_ok()) continue;
    auto mark = CheckpointStore::history_mark(*replica_meta, store.meta_path(*at));
    if (mark.is_ok() && *mark) replica_marks_[static_cast<size_t>(r)] = **mark;
  }
  trim_heap();  // the files fetched, the history read: none of it stays
  r_.resumed_from_epoch = static_cast<int>(agreed->epoch) - 1;
  r_.resumed_at_epoch = static_cast<int>(agreed->epoch);
  r_.resumed_at_step = agreed->step;
  log_->info("resumed from the checkpoint of {} in {}", agreed->str(), ckpt_->dir().string());
  if (b_.rank() == 0) announce_progress("resumed", *agreed);
  return *agreed;
}

Status Loop::load_checkpoint(CheckpointPosition p, const nlohmann::json& meta) {
  const auto meta_path = ckpt_->meta_path(p);
  const nlohmann::json want = checkpoint_meta();
  if (meta.value("format", 0) != kCheckpointFormat) {
    return invalid_argument(fmt::format("{}: checkpoint format {}, but this trainer-host reads format {} (written by "
                                        "another version of trainer-host; resume it with that version, or start "
                                        "afresh with another --checkpoint-dir)",
                                        meta_path.string(), meta.contains("format") ? meta["format"].dump() : "none",
                                        kCheckpointFormat));
  }
  for (const char* key : {"task", "scorer", "num_rels", "num_bases", "outer_params", "graph_name", "num_nodes",
                          "num_trainers", "model", "feature", "learnable_features", "embed_dim", "sparse_optimizer",
                          "in_dim", "num_hidden", "num_classes", "num_layers", "num_heads", "batch_size", "seed"}) {
    if (!meta.contains(key) || meta[key] != want[key]) {
      return invalid_argument(fmt::format("{}: the checkpoint has {} = {}, but this run has {} (a checkpoint of "
                                          "another graph, model or job; use another --checkpoint-dir)",
                                          meta_path.string(), key, meta.contains(key) ? meta[key].dump() : "nothing",
                                          want[key].dump()));
    }
  }
  const auto state = ckpt_->payload_path(p);
  try {
    torch::serialize::InputArchive archive, model_ar, optim_ar;
    archive.load_from(state.string());
    archive.read("model", model_ar);
    archive.read("optimizer", optim_ar);
    model_->impl().load_state(model_ar);
    DGLD_RETURN_IF_ERROR(load_outer_params(archive).with_context(state.string()));
    optimizer_->load(optim_ar);
    torch::Tensor rng;
    archive.read("rng", rng);
    auto gen = at::detail::getDefaultCPUGenerator();
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(rng);
    }
    if (embedding_) DGLD_RETURN_IF_ERROR(embedding_->load(archive).with_context(state.string()));
  } catch (const c10::Error& e) {
    return corruption(fmt::format("{}: {}", state.string(), first_line(e.what_without_backtrace())));
  }
  DGLD_ASSIGN_OR_RETURN(const std::optional<HistoryMark> mark, CheckpointStore::history_mark(meta, meta_path));
  if (!mark || !meta.contains("results")) {
    return corruption(fmt::format("{}: no \"history\" mark or \"results\" (format {} has both)", meta_path.string(),
                                  kCheckpointFormat));
  }
  r_.epochs.clear();
  r_.evals.clear();
  DGLD_RETURN_IF_ERROR(ckpt_->read_history(*mark, [this](std::string_view line) {
    return add_history_record(line, r_);
  }).with_context(ckpt_->history_path().string()));
  history_mark_ = *mark;
  history_epochs_ = r_.epochs.size();
  history_evals_ = r_.evals.size();
  DGLD_RETURN_IF_ERROR(
      last_results_from_json(meta["results"].dump(), r_, previous_time_s_).with_context(meta_path.string()));
  partial_ = PartialEpoch{};
  if (p.step > 0) {
    const auto& pe = meta.value("partial_epoch", nlohmann::json::object());
    partial_.loss_sum = pe.value("loss_sum", 0.0);
    partial_.correct_sum = pe.value("correct_sum", 0.0);
    partial_.seeds_sum = pe.value("seeds_sum", 0.0);
    partial_.time_s = pe.value("time_s", 0.0);
    partial_.step_losses = pe.value("step_losses", std::vector<double>{});
  }
  return Status::ok();
}

std::vector<torch::Tensor> Loop::outer_params() const {
  return {params_.begin() + static_cast<std::ptrdiff_t>(std::min(model_params_, params_.size())), params_.end()};
}

Status Loop::load_outer_params(torch::serialize::InputArchive& archive) {
  torch::serialize::InputArchive outer_ar;
  archive.read(kOuterParams, outer_ar);
  torch::NoGradGuard no_grad;
  const auto outer = outer_params();
  for (size_t i = 0; i < outer.size(); ++i) {
    torch::Tensor saved;
    outer_ar.read(std::to_string(i), saved);
    if (saved.sizes() != outer[i].sizes()) {
      return corruption(fmt::format("parameter {} outside the model (scorer or input projection) is {} in the "
                                    "checkpoint, but {} in this run",
                                    i, fmt::join(saved.sizes(), "x"), fmt::join(outer[i].sizes(), "x")));
    }
    outer[i].copy_(saved);
  }
  return Status::ok();
}

void Loop::announce_progress(const std::string& event, CheckpointPosition p) const {
  if (std::getenv(job_env::kJobId) == nullptr) return;  // not started by dgl-launch
  std::fprintf(stderr, "%s\n", progress_line(event, p).c_str());
  std::fflush(stderr);
}

void Loop::remember_if_best(const EvalMetrics& e) {
  // Every trainer sees the same (allreduced) metrics, so all keep the same epoch.
  const double metric = c_.keep_best == "acc" ? e.val_acc : c_.keep_best == "mrr" ? e.val_link.mrr : e.val_link.auc;
  if (best_ && !(metric > best_->metric)) return;  // ties keep the earlier epoch
  if (!best_) best_.emplace();
  best_->metric = metric;
  best_->eval = e;
  torch::NoGradGuard no_grad;
  torch::serialize::OutputArchive archive;
  model_->impl().save_state(archive);
  std::ostringstream out;
  archive.save_to(out);
  best_->model_state = std::move(out).str();
  best_->params.clear();
  for (const auto& p : params_) best_->params.push_back(p.detach().clone());
}

void Loop::restore_best() {
  const EvalMetrics& e = best_->eval;
  if (r_.evals.empty() || r_.evals.back().epoch != e.epoch) {
    torch::NoGradGuard no_grad;
    torch::serialize::InputArchive archive;
    std::istringstream in(best_->model_state);
    archive.load_from(in);
    model_->impl().load_state(archive);
    for (size_t i = 0; i < params_.size(); ++i) params_[i].copy_(best_->params[i]);
  }
  r_.best_epoch = e.epoch;
  r_.val_acc = e.val_acc;
  r_.test_acc = e.test_acc;
  r_.val_link = e.val_link;
  r_.test_link = e.test_link;
  log_->info("kept the weights of epoch {} (best validation {} {:.4f}); its test {}", e.epoch, c_.keep_best,
             best_->metric,
             link_ ? fmt::format("MRR {:.4f} AUC {:.4f}", e.test_link.mrr, e.test_link.auc)
                   : fmt::format("acc {:.4f}", e.test_acc));
  best_.reset();
}

}  // namespace dgld::trainer
