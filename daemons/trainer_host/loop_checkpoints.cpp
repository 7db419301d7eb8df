// The training loop: checkpoints, resume, and --keep-best (loop.h).

#include <cmath>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "common/buffer_pool.h"
#include "common/file_util.h"
#include "daemons/trainer_host/loop.h"
#include "daemons/trainer_host/progress.h"

namespace dgld::trainer {

nlohmann::json Loop::checkpoint_meta(int epoch) const {
  return {{"format", 2},  // 2: built-in models are dgld.models modules (their parameter names changed)
          {"epoch", epoch},
          {"graph_name", b_.graph_name()},
          {"num_nodes", b_.num_nodes()},
          {"num_trainers", b_.world_size()},
          {"rank", b_.rank()},
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
          {"metrics", nlohmann::json::parse(metrics_json(r_))}};
}

Status Loop::save_checkpoint(int epoch) {
  const auto t0 = Clock::now();
  torch::serialize::OutputArchive archive;
  {
    torch::serialize::OutputArchive model_ar, optim_ar;
    model_->impl().save_state(model_ar);
    optimizer_->save(optim_ar);
    archive.write("model", model_ar);
    archive.write("optimizer", optim_ar);
  }
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("rng", gen.get_state());
  }
  if (embedding_) DGLD_RETURN_IF_ERROR(embedding_->save(archive));
  const auto state = ckpt_->state_path(epoch);
  const auto tmp = state.string() + ".tmp";
  try {
    archive.save_to(tmp);
  } catch (const c10::Error& e) {
    return io_error(fmt::format("writing checkpoint {}: {}", tmp, first_line(e.what_without_backtrace())));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, state, ec);
  if (ec) return io_error(fmt::format("renaming {} to {}: {}", tmp, state.string(), ec.message()));
  DGLD_RETURN_IF_ERROR(write_file_atomic(ckpt_->meta_path(epoch), checkpoint_meta(epoch).dump(2) + "\n"));
  if (b_.world_size() > 1) {  // phase two only once every trainer has its files
    auto one = torch::ones({1}, torch::kInt64);
    DGLD_RETURN_IF_ERROR(b_.allreduce(one, Reduce::sum, fmt::format("epoch {}: checkpoint barrier", epoch)));
  }
  DGLD_RETURN_IF_ERROR(ckpt_->commit(epoch));
  log_->info("checkpoint of epoch {} written to {} ({:.2f} s)", epoch, ckpt_->dir().string(), seconds_since(t0));
  return Status::ok();
}

Result<int> Loop::resume() {
  DGLD_ASSIGN_OR_RETURN(int mine, ckpt_->latest());
  auto t = torch::tensor({static_cast<int64_t>(mine)}, torch::kInt64);
  DGLD_RETURN_IF_ERROR(b_.allreduce(t, Reduce::max, "agreeing on the checkpoint to resume from"));
  const int epoch = static_cast<int>(t.item<int64_t>());
  if (epoch < 0) {
    log_->warn("--resume: no checkpoint in {} yet; starting from epoch 0", c_.checkpoint_dir);
    return 0;
  }
  const auto meta_path = ckpt_->meta_path(epoch);
  auto text = read_file(meta_path);
  if (!text.is_ok()) {
    return text.status().with_context(fmt::format("resuming from epoch {} (committed by another trainer; is {} "
                                                  "this trainer's checkpoint directory?)",
                                                  epoch, c_.checkpoint_dir));
  }
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(*text);
  } catch (const std::exception& e) {
    return corruption(fmt::format("{}: {}", meta_path.string(), e.what()));
  }
  const nlohmann::json want = checkpoint_meta(epoch);
  for (const char* key : {"format", "graph_name", "num_nodes", "num_trainers", "model", "feature",
                          "learnable_features", "embed_dim", "sparse_optimizer", "in_dim", "num_hidden",
                          "num_classes", "num_layers", "num_heads"}) {
    if (!meta.contains(key) || meta[key] != want[key]) {
      return invalid_argument(fmt::format("{}: the checkpoint has {} = {}, but this run has {} (a checkpoint of "
                                          "another graph, model or job; use another --checkpoint-dir)",
                                          meta_path.string(), key, meta.contains(key) ? meta[key].dump() : "nothing",
                                          want[key].dump()));
    }
  }
  const auto state = ckpt_->state_path(epoch);
  try {
    torch::serialize::InputArchive archive, model_ar, optim_ar;
    archive.load_from(state.string());
    archive.read("model", model_ar);
    archive.read("optimizer", optim_ar);
    model_->impl().load_state(model_ar);
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
  if (embedding_ && b_.world_size() > 1) {
    // Each trainer wrote its own shard of the embedding back; no trainer may
    // read another's rows before that shard is in (a lookup in the first
    // step raced the owner's load: resumed losses differed by 1e-3).
    auto one = torch::ones({1}, torch::kInt64);
    DGLD_RETURN_IF_ERROR(b_.allreduce(one, Reduce::sum, "resume: every trainer's embedding shard loaded"));
  }
  DGLD_RETURN_IF_ERROR(history_from_metrics_json(meta["metrics"].dump(), r_).with_context(meta_path.string()));
  previous_time_s_ = meta["metrics"].value("total_time_s", 0.0);
  r_.resumed_from_epoch = epoch;
  log_->info("resumed from the checkpoint of epoch {} in {}", epoch, ckpt_->dir().string());
  return epoch + 1;
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
