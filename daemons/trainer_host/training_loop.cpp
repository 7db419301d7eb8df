#include "daemons/trainer_host/training_loop.h"

#include "common/cpu_time.h"
#include "common/partition/partition.h"

#include "daemons/trainer_host/loop.h"

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/buffer_pool.h"
#include "common/file_util.h"
#include "common/job_env.h"
#include "common/logging.h"
#include "daemons/trainer_host/epoch_accounting.h"
#include "daemons/trainer_host/live_metrics.h"
#include "daemons/trainer_host/model_cost.h"
#include "daemons/trainer_host/progress.h"

namespace dgld::trainer {

namespace {

// Flattens every parameter's gradient into one bucket with `extra` values
// appended, and copies an averaged bucket back into the gradients.
torch::Tensor gradient_bucket(const std::vector<torch::Tensor>& params, std::initializer_list<double> extra) {
  std::vector<torch::Tensor> flat;
  flat.reserve(params.size() + 1);
  for (const auto& p : params) {
    flat.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
  }
  flat.push_back(torch::tensor(std::vector<float>(extra.begin(), extra.end()), torch::kFloat32));
  return torch::cat(flat);
}

void unflatten_gradients(std::vector<torch::Tensor>& params, const torch::Tensor& bucket) {
  torch::NoGradGuard no_grad;
  int64_t off = 0;
  for (auto& p : params) {
    auto g = bucket.narrow(0, off, p.numel()).view_as(p);
    if (p.grad().defined()) {
      p.mutable_grad().copy_(g);
    } else {
      p.mutable_grad() = g.clone();
    }
    off += p.numel();
  }
}

}  // namespace


Result<torch::Tensor> Loop::typed_layer0(std::span<const int64_t> ids, const std::vector<client::TypedRows>& typed,
                                         bool train) {
  const auto n = static_cast<int64_t>(ids.size());
  torch::Tensor x = torch::zeros({n, c_.embed_dim}, torch::kFloat32);
  std::vector<uint8_t> covered(static_cast<size_t>(n), 0);
  for (const client::TypedRows& r : typed) {
    const size_t t = static_cast<size_t>(r.ntype);
    if (r.ntype < 0 || t >= type_proj_.size() || type_proj_[t].is_empty() ||
        r.dim != type_proj_[t]->options.in_features()) {
      return internal_error(fmt::format("input rows of node type {} ({} wide) do not fit the model's projections",
                                        r.ntype, r.dim));
    }
    const auto k = static_cast<int64_t>(r.index.size());
    auto rows = rows_tensor(r.rows, k, r.dim);
    x = x.index_copy(0, ids_tensor(r.index), type_proj_[t]->forward(rows));
    for (int64_t i : r.index) covered[static_cast<size_t>(i)] = 1;
  }
  std::vector<int64_t> rest_at, rest_ids;
  for (int64_t i = 0; i < n; ++i) {
    if (!covered[static_cast<size_t>(i)]) {
      rest_at.push_back(i);
      rest_ids.push_back(ids[static_cast<size_t>(i)]);
    }
  }
  if (!rest_ids.empty()) {
    if (!embedding_) return internal_error("input nodes without features, but no learnable embedding");
    DGLD_ASSIGN_OR_RETURN(auto e, embedding_->lookup(rest_ids, train));
    x = x.index_copy(0, ids_tensor(rest_at), e);
  }
  return x;
}

Result<torch::Tensor> Loop::layer0(std::span<const int64_t> ids, const torch::Tensor& features,
                                   const std::vector<client::TypedRows>& typed, bool train) {
  if (types_) return typed_layer0(ids, typed, train);
  torch::Tensor x = features;
  if (c_.row_normalize && x.size(1) > 0) {  // each row divided by its sum (rows summing to 0 kept)
    auto sum = x.sum(1, /*keepdim=*/true);
    x = x / torch::where(sum == 0, torch::ones_like(sum), sum);
  }
  if (!embedding_) return x;
  DGLD_ASSIGN_OR_RETURN(auto e, embedding_->lookup(ids, train));
  if (c_.learnable_features == LearnableFeatures::replace) return e;
  return torch::cat({x, e}, 1);
}

// The learnable embedding (embed_dim wide, every node's row) with its sparse
// optimiser; collective (every trainer, in the same order).
Status Loop::create_embedding() {
  DGLD_ASSIGN_OR_RETURN(auto kind, parse_sparse_optimizer(c_.sparse_optimizer));
  DGLD_ASSIGN_OR_RETURN(auto store, b_.create_embedding_store(embedding_table_dims(kind, c_.embed_dim), c_.seed));
  SparseOptimizerOptions so;
  so.kind = kind;
  so.lr = c_.sparse_lr;
  so.eps = kind == SparseOptimizerKind::adagrad ? 1e-10 : 1e-8;
  embedding_ = std::make_unique<SparseEmbedding>(std::move(store), so);
  return Status::ok();
}

// The input layer of a heterogeneous graph: a projection per node type with
// features (model parameters, averaged like the others), and one learnable
// embedding for the nodes of the types without (rows by homogeneous id).
Status Loop::setup_hetero() {
  DGLD_ASSIGN_OR_RETURN(const ModelKindInfo info, model_info(c_.model, c_.model_file));
  if (!info.uses_edge_types) {
    return invalid_argument(fmt::format("graph '{}' is heterogeneous ({} node types, {} edge types): train it with "
                                        "a model over edge types (--model rgcn)",
                                        b_.graph_name(), types_->num_ntypes(), types_->num_etypes()));
  }
  mc_.in_dim = c_.embed_dim;
  mc_.num_rels = types_->num_etypes();
  mc_.num_bases = c_.num_bases;
  const std::vector<int64_t> dims = b_.type_feature_dims();
  bool featureless = false;
  type_proj_.assign(static_cast<size_t>(types_->num_ntypes()), torch::nn::Linear(nullptr));
  for (int t = 0; t < types_->num_ntypes(); ++t) {
    const int64_t d = t < static_cast<int>(dims.size()) ? dims[static_cast<size_t>(t)] : 0;
    if (d > 0) {
      type_proj_[static_cast<size_t>(t)] = torch::nn::Linear(torch::nn::LinearOptions(d, c_.embed_dim).bias(false));
    } else {
      featureless = featureless || types_->ntype_count[static_cast<size_t>(t)] > 0;
    }
  }
  if (featureless) DGLD_RETURN_IF_ERROR(create_embedding());
  return Status::ok();
}

Status Loop::setup() {
  mc_.kind = c_.model;
  types_ = b_.graph_types();
  if (!types_) {
    DGLD_ASSIGN_OR_RETURN(const ModelKindInfo info, model_info(c_.model, c_.model_file));
    if (info.uses_edge_types) {
      return invalid_argument(fmt::format("--model {} reads the edge types of a heterogeneous graph; '{}' is "
                                          "homogeneous", c_.model, b_.graph_name()));
    }
  }
  mc_.in_dim = b_.feat_dim() + (c_.learnable_features != LearnableFeatures::off ? c_.embed_dim : 0);
  mc_.num_hidden = c_.num_hidden;
  link_ = c_.task == "link";
  // A link encoder's last layer gives num_hidden-wide embeddings.
  mc_.num_classes = link_ ? c_.num_hidden : b_.num_classes();
  mc_.num_layers = c_.num_layers;
  mc_.dropout = c_.dropout;
  mc_.num_heads = c_.num_heads;
  DGLD_ASSIGN_OR_RETURN(mc_.kernels, parse_kernels(c_.kernels));
  mc_.model_file = c_.model_file;
  torch::manual_seed(c_.seed);
  if (types_) DGLD_RETURN_IF_ERROR(setup_hetero());
  DGLD_ASSIGN_OR_RETURN(model_, Model::create(mc_));
  params_ = model_->impl().parameters();
  model_params_ = params_.size();
  for (auto& proj : type_proj_) {
    if (!proj.is_empty()) params_.push_back(proj->weight);
  }
  if (link_ && c_.scorer == "mlp") {
    const int64_t d = mc_.num_classes;
    scorer_mlp_ = torch::nn::Sequential(torch::nn::Linear(d, d), torch::nn::ReLU(), torch::nn::Linear(d, 1));
    for (const auto& p : scorer_mlp_->parameters()) params_.push_back(p);
  }
  auto& params = params_;
  if (b_.world_size() > 1) {  // every trainer starts from rank 0's weights
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> flat;
    for (auto& p : params) flat.push_back(p.detach().reshape({-1}));
    auto bucket = torch::cat(flat);
    DGLD_RETURN_IF_ERROR(b_.broadcast(bucket, "broadcasting rank 0's initial weights"));
    int64_t off = 0;
    for (auto& p : params) {
      p.copy_(bucket.narrow(0, off, p.numel()).view_as(p));
      off += p.numel();
    }
  }
  torch::manual_seed(c_.seed + 1 + static_cast<uint64_t>(b_.rank()));  // dropout differs per trainer
  optimizer_ = std::make_unique<torch::optim::Adam>(params,
                                                    torch::optim::AdamOptions(c_.lr).weight_decay(c_.weight_decay));
  if (c_.learnable_features != LearnableFeatures::off && !types_) DGLD_RETURN_IF_ERROR(create_embedding());
  if (!c_.checkpoint_dir.empty()) {
    ckpt_ = std::make_unique<CheckpointStore>(c_.checkpoint_dir, b_.rank());
    DGLD_RETURN_IF_ERROR(ckpt_->prepare());
  }
  r_.graph_name = b_.graph_name();
  r_.config = c_;
  r_.num_trainers = b_.world_size();
  r_.rank = b_.rank();
  r_.num_classes = mc_.num_classes;
  r_.num_parameters = model_->num_parameters();
  LiveMetrics::get().started(r_, b_.machine_id(), b_.steps_per_epoch());
  log_->info("training {}{} on '{}' ({} nodes) with {} trainer(s): {} steps per epoch, fanouts {}, batch {}",
             model_->describe(),
             embedding_ ? fmt::format(" with a learnable {}-dim embedding ({}, {})", c_.embed_dim,
                                      learnable_features_name(c_.learnable_features), c_.sparse_optimizer)
                        : "",
             b_.graph_name(), b_.num_nodes(), b_.world_size(), b_.steps_per_epoch(), c_.fan_out, c_.batch_size);
  return Status::ok();
}

Status Loop::train_epoch(int epoch, int64_t first_step, EpochMetrics& m) {
  const auto t_epoch = Clock::now();
  const double process_cpu0 = process_cpu_seconds();
  auto& model = model_->impl();
  model.set_training(true);
  auto& params = params_;
  const int64_t steps = b_.steps_per_epoch();
  const int world = b_.world_size();
  b_.start_epoch(epoch, first_step);
  ProgressBar bar(c_.progress, epoch, steps, /*plain_lines=*/b_.rank() == 0);
  if (first_step == 0) partial_ = PartialEpoch{};  // else: the steps before first_step, from the checkpoint
  double& loss_sum = partial_.loss_sum;  // over every trainer
  double& correct_sum = partial_.correct_sum;
  double& seeds_sum = partial_.seeds_sum;
  m.step_losses = partial_.step_losses;
  const double time_before = partial_.time_s;
  EpochAccounting acc(b_);
  acc.start();
  for (int64_t step = first_step; step < steps; ++step) {
    const std::string where = fmt::format("epoch {} step {}", epoch, step);
    client::LinkBatch link_batch;
    if (link_) {
      auto next = b_.next_link_batch();
      if (!next.is_ok()) return next.status().with_context(where);
      link_batch = std::move(next).value();
    } else {
      auto next = b_.next_batch();
      if (!next.is_ok()) return next.status().with_context(where);
      link_batch.batch = std::move(next).value();
    }
    client::Batch& batch = link_batch.batch;
    m.sample_s += batch.timings.sample_s;
    m.wait_s += batch.timings.wait_s;
    m.sample_cpu_s += batch.timings.sample_cpu_s;

    StageTimer stage;
    const int64_t n_in = static_cast<int64_t>(batch.mini_batch.input_nodes.size());
    if (batch.feature_rows().size() != static_cast<size_t>(n_in * b_.feat_dim())) {
      return internal_error(fmt::format("{}: the batch has {} feature values for {} input nodes of dimension {}",
                                        where, batch.feature_rows().size(), n_in, b_.feat_dim()));
    }
    auto features = batch.slot_features ? adopt_shared_rows(batch.slot_features, n_in, b_.feat_dim())
                                        : adopt_rows(std::move(batch.features), batch.features_pool, n_in, b_.feat_dim());
    auto x = layer0(batch.mini_batch.input_nodes, features, batch.typed_features, /*train=*/true);
    if (!x.is_ok()) return x.status().with_context(where + ": embedding lookup");
    auto input = make_model_input(batch.mini_batch, *x);
    if (!input.is_ok()) return input.status().with_context(where);
    const StepWork work = model_step_work(batch.mini_batch.blocks, layer_dims(x->size(1)), model_->dense_maps(),
                                          x->requires_grad());
    acc.add_batch(batch, work.flops(), n_in * b_.feat_dim() * static_cast<int64_t>(sizeof(float)));
    const auto labels = ids_tensor(batch.labels);
    m.fetch_s += batch.timings.fetch_s;
    m.fetch_cpu_s += batch.timings.fetch_cpu_s;
    stage.lap(&m.fetch_s, &m.fetch_cpu_s);
    if (c_.measure_peak && r_.gemm_peak_gflops == 0) {
      // Once, on the first batch's shapes, while the other trainers do the
      // same; in no stage's time (the epoch's only).
      r_.gemm_peak_gflops = measure_gemm_gflops(work.products);
      log_->info("the products of a model step ({:.2f} GFLOP of {:.2f}) run at {:.1f} GFLOP/s through LibTorch's "
                 "BLAS with {} thread(s): the model step's limit", work.dense_flops / 1e9, work.flops() / 1e9,
                 r_.gemm_peak_gflops, at::get_num_threads());
      stage.restart();
    }

    const bool profile = profiled(epoch);
    if (profile) profiler_.start();
    const auto t_model = Clock::now();
    auto logits = forward_checked(*model_, *input);
    if (!logits.is_ok()) return logits.status().with_context(where);
    torch::Tensor loss;
    double batch_correct = 0, batch_seeds = 0;
    if (link_) {
      // Binary cross-entropy over the positive edges and their negatives;
      // "correct": pairs on the right side of 0, counted per positive.
      const int64_t k = link_batch.num_negatives;
      const auto hu = logits->index_select(0, ids_tensor(link_batch.pos_u));
      const auto pos = score(hu, logits->index_select(0, ids_tensor(link_batch.pos_v)));
      const auto neg = score(hu.repeat_interleave(k, 0), logits->index_select(0, ids_tensor(link_batch.neg_v)));
      loss = torch::nn::functional::binary_cross_entropy_with_logits(
          torch::cat({pos, neg}), torch::cat({torch::ones_like(pos), torch::zeros_like(neg)}));
      batch_correct = ((pos > 0).sum() + (neg <= 0).sum()).item<double>() / static_cast<double>(1 + k);
      batch_seeds = static_cast<double>(link_batch.pos_u.size());
    } else {
      loss = torch::nn::functional::cross_entropy(*logits, labels);
      batch_correct = logits->argmax(1).eq(labels).sum().item<double>();
      batch_seeds = static_cast<double>(batch.labels.size());
    }
    optimizer_->zero_grad();
    loss.backward();
    const double loss_value = loss.item<double>();
    stage.lap(&m.compute_s, &m.compute_cpu_s);

    // One bucket: every gradient, then this step's loss and counts.
    auto bucket = gradient_bucket(params, {loss_value, batch_correct, batch_seeds});
    if (world > 1) {
      DGLD_RETURN_IF_ERROR(b_.allreduce(bucket, Reduce::sum, where + ": gradient allreduce"));
      bucket.div_(static_cast<double>(world));
      acc.add_allreduce(bucket.numel() * static_cast<int64_t>(bucket.element_size()));
    }
    unflatten_gradients(params, bucket);
    const int64_t tail = bucket.size(0) - 3;
    const double step_loss = bucket[tail].item<double>();  // mean over the trainers
    stage.lap(&m.allreduce_s, &m.allreduce_cpu_s);
    if (!std::isfinite(step_loss)) {
      return internal_error(fmt::format("the loss became {} at {} (this trainer's loss: {}; lr {}): training "
                                        "stopped{}; try a lower --lr",
                                        step_loss, where, loss_value, c_.lr,
                                        ckpt_ ? ", the last checkpoint is kept" : ""));
    }

    stage.restart();
    optimizer_->step();
    if (embedding_) {
      if (Status st = embedding_->step(); !st.is_ok()) return st.with_context(where + ": sparse optimiser");
    }
    stage.lap(&m.compute_s, &m.compute_cpu_s);
    if (profile) {
      profiler_.pause();
      profiled_s_ += seconds_since(t_model);
      if (++profiled_steps_ == c_.profile_steps || step + 1 == steps) finish_profile();
    }

    loss_sum += step_loss;
    m.step_losses.push_back(step_loss);
    correct_sum += bucket[tail + 1].item<double>() * world;
    seeds_sum += bucket[tail + 2].item<double>() * world;
    const double elapsed = time_before + seconds_since(t_epoch);
    const double mean_loss = loss_sum / static_cast<double>(step + 1), rate = elapsed > 0 ? seeds_sum / elapsed : 0.0;
    bar.update(step + 1, mean_loss, rate);
    LiveMetrics::get().step(epoch, step + 1, mean_loss, rate);
    if (c_.log_every > 0 && (step + 1) % c_.log_every == 0) {
      bar.clear();
      log_->info("Part {} | Epoch {:05d} | Step {:05d} | Loss {:.4f} | Train Acc {:.4f} | Speed (samples/sec) {:.1f}",
                 b_.part_id(), epoch, step, loss_value, batch_seeds > 0 ? batch_correct / batch_seeds : 0.0,
                 elapsed > 0 ? seeds_sum / elapsed : 0.0);
    }
    const int64_t run_step = static_cast<int64_t>(epoch) * steps + step + 1;  // steps done since epoch 0
    if (ckpt_ && c_.checkpoint_every_steps > 0 && step + 1 < steps && run_step % c_.checkpoint_every_steps == 0) {
      bar.clear();
      partial_.step_losses = m.step_losses;
      partial_.time_s = elapsed;
      DGLD_RETURN_IF_ERROR(save_checkpoint({epoch, step + 1}).with_context(where));
    }
  }
  bar.clear();
  m.loss = steps > 0 ? loss_sum / static_cast<double>(steps) : 0.0;
  m.train_acc = seeds_sum > 0 ? correct_sum / seeds_sum : 0.0;
  m.time_s = time_before + seconds_since(t_epoch);
  m.process_cpu_s = process_cpu_seconds() - process_cpu0;
  m.peak_rss_bytes = peak_rss();
  m.seeds_per_s = m.time_s > 0 ? seeds_sum / m.time_s : 0.0;
  m.end_unix_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  m.gemm_peak_gflops = r_.gemm_peak_gflops;
  return acc.finish(m).with_context(fmt::format("epoch {}", epoch));
}

bool Loop::profiled(int epoch) const {
  const int epoch_profiled = std::min(1, c_.num_epochs - 1);
  return c_.profile_steps > 0 && epoch == epoch_profiled && profiled_steps_ < c_.profile_steps && r_.profile.steps == 0;
}

void Loop::finish_profile() {
  r_.profile = profiler_.result(profiled_steps_, profiled_s_);
  log_->info("{}", format_step_profile(r_.profile));
}

// The widths of the model's layers from input to output, for FLOP estimates:
// `in` wide input rows, then each layer's output (heads concatenated).
std::vector<int64_t> Loop::layer_dims(int64_t in) const {
  std::vector<int64_t> dims = {in};
  for (int l = 0; l < mc_.num_layers; ++l) dims.push_back(model_->impl().layer_out_dim(l));
  return dims;
}

Result<TrainResult> Loop::run() {
  const auto t_start = Clock::now();
  DGLD_RETURN_IF_ERROR(setup());
  if (c_.infer) {
    DGLD_RETURN_IF_ERROR(write_outputs());
    r_.total_time_s = seconds_since(t_start);
    return r_;
  }
  CheckpointPosition start;
  if (c_.resume) {
    DGLD_ASSIGN_OR_RETURN(start, resume());
  } else if (job_env::restart_count() > 0) {
    log_->warn("dgl-launch started the job again (restart {}) but there is no --checkpoint-dir: training starts "
               "over from epoch 0", job_env::restart_count());
  }
  end_stage("start-up");
  for (int epoch = static_cast<int>(start.epoch); epoch < c_.num_epochs; ++epoch) {
    EpochMetrics m;
    m.epoch = epoch;
    DGLD_RETURN_IF_ERROR(train_epoch(epoch, epoch == start.epoch ? start.step : 0, m));
    end_stage("training");
    for (const std::string& line : epoch_log_lines(m)) log_->info("{}", line);
    r_.epochs.push_back(m);
    LiveMetrics::get().epoch_done(m);
    const bool last = epoch == c_.num_epochs - 1;
    if (c_.eval_every >= 0 && (last || (c_.eval_every > 0 && (epoch + 1) % c_.eval_every == 0))) {
      DGLD_ASSIGN_OR_RETURN(EvalMetrics e, link_ ? evaluate_link(epoch) : evaluate(epoch));
      end_stage("evaluation");
      if (link_) {
        log_->info("Epoch {:05d} | Val MRR {:.4f} AUC {:.4f} | Test MRR {:.4f} Hits@1 {:.4f} Hits@10 {:.4f} "
                   "Hits@50 {:.4f} AUC {:.4f} | eval {:.3f} s",
                   epoch, e.val_link.mrr, e.val_link.auc, e.test_link.mrr, e.test_link.hits1, e.test_link.hits10,
                   e.test_link.hits50, e.test_link.auc, e.time_s);
      } else {
        log_->info("Epoch {:05d} | Val Acc {:.4f} | Test Acc {:.4f} | eval {:.3f} s", epoch, e.val_acc, e.test_acc,
                   e.time_s);
      }
      r_.val_acc = e.val_acc;
      r_.test_acc = e.test_acc;
      r_.val_link = e.val_link;
      r_.test_link = e.test_link;
      r_.evals.push_back(e);
      LiveMetrics::get().evaluated(e);
      if (c_.keep_best != "off") remember_if_best(e);
    }
    r_.total_time_s = previous_time_s_ + seconds_since(t_start);
    if (ckpt_ && (last || (epoch + 1) % c_.checkpoint_every == 0)) {
      DGLD_RETURN_IF_ERROR(save_checkpoint({epoch + 1, 0}));
    }
  }
  LiveMetrics::get().finished();
  if (best_) restore_best();
  if (!c_.save_model.empty() && b_.rank() == 0) {  // every trainer holds the same weights
    model_->impl().set_training(false);  // saved in eval mode, ready for inference
    Status st = model_->save_torchscript(c_.save_model);
    model_->impl().set_training(true);
    DGLD_RETURN_IF_ERROR(st.with_context("--save-model"));
    r_.output_files.push_back(c_.save_model);
    log_->info("wrote the trained model to {} (TorchScript)", c_.save_model);
  }
  if (!c_.output_dir.empty()) DGLD_RETURN_IF_ERROR(write_outputs());
  end_stage("outputs");
  r_.total_time_s = previous_time_s_ + seconds_since(t_start);
  report_memory();
  return r_;
}

int64_t Loop::peak_rss() {
  peak_rss_seen_ = std::max(peak_rss_seen_, read_process_memory().peak_rss);
  return peak_rss_seen_;
}

void Loop::end_stage(const char* stage) {
  const int64_t hwm = peak_rss();
  // The peak the stages so far reached is the last one recorded.
  if (hwm <= (stage_peaks_.empty() ? 0 : stage_peaks_.back().second)) return;
  if (!stage_peaks_.empty() && stage_peaks_.back().first == stage) {
    stage_peaks_.back().second = hwm;
  } else {
    stage_peaks_.emplace_back(stage, hwm);
  }
}

void Loop::report_memory() {
  MemoryReport& m = r_.memory;
  m = b_.memory();
  m.process = read_process_memory();
  m.process.peak_rss = peak_rss();
  m.stage_peaks = stage_peaks_;
  // Parameters, their gradients and Adam's two moments.
  int64_t params = 0;
  for (const auto& p : params_) params += p.numel() * p.element_size();
  m.model_bytes = params * 4;
  auto mib = [](int64_t b) { return b < 0 ? std::string("-") : fmt::format("{:.0f}", static_cast<double>(b) / (1 << 20)); };
  if (!m.stage_peaks.empty()) {
    std::string raised;
    for (const auto& [stage, bytes] : m.stage_peaks) raised += fmt::format("{}{} {}", raised.empty() ? "" : ", ", stage, mib(bytes));
    log_->info("memory: the peak RSS was reached in {} (the stages that raised it: {} MiB); the model and its "
               "optimiser state {:.1f} MiB", m.stage_peaks.back().first, raised,
               static_cast<double>(m.model_bytes) / (1 << 20));
  }
  log_->info("memory: {}; partition files {} MiB (mapped, shared with the graph-server), feature cache {} MiB, "
             "largest batch {} MiB, idle feature buffers {} MiB, prefetch bound {} MiB",
             describe(m.process), mib(m.partition_bytes), mib(m.feature_cache_bytes), mib(m.largest_batch_bytes),
             mib(m.idle_buffer_bytes), m.prefetch_limit_bytes == 0 ? std::string("none") : mib(m.prefetch_limit_bytes));
}


Result<torch::Tensor> allgather(TrainingBackend& b, const torch::Tensor& mine, const std::string& what) {
  const int world = b.world_size(), rank = b.rank();
  auto sizes = torch::zeros({world}, torch::kInt64);
  sizes[rank] = mine.numel();
  DGLD_RETURN_IF_ERROR(b.allreduce(sizes, Reduce::sum, what + ": sizes"));
  int64_t total = 0, offset = 0;
  for (int r = 0; r < world; ++r) {
    if (r == rank) offset = total;
    total += sizes[r].item<int64_t>();
  }
  auto all = torch::zeros({total}, mine.options());
  if (mine.numel() > 0) all.narrow(0, offset, mine.numel()).copy_(mine.reshape({-1}));
  DGLD_RETURN_IF_ERROR(b.allreduce(all, Reduce::sum, what));
  return all;
}

void set_torch_threads(int n) {
  at::set_num_threads(n);
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(n);
}

std::string first_line(const std::string& s) {
  const auto start = s.find_first_not_of('\n');
  if (start == std::string::npos) return s;
  return s.substr(start, s.find('\n', start) - start);
}

std::string node_tensor_names(const MappedPartition& part) {
  std::string names;
  for (const auto& t : part.node_tensors()) names += (names.empty() ? "" : ", ") + t.name;
  return names.empty() ? "none" : names;
}

torch::Tensor ids_tensor(std::span<const int64_t> ids) {
  auto t = torch::empty({static_cast<int64_t>(ids.size())}, torch::kInt64);
  if (!ids.empty()) std::memcpy(t.data_ptr<int64_t>(), ids.data(), ids.size() * sizeof(int64_t));
  return t;
}

torch::Tensor adopt_rows(std::vector<float>&& rows, std::shared_ptr<BufferPool> pool, int64_t n, int64_t d) {
  // LibTorch (1.13) keeps from_blob's deleter in a unique_ptr of the data
  // pointer: a vector that never allocated has data() == nullptr and the
  // deleter would never run, leaking `owned` (LeakSanitizer, every batch of a
  // run without input features). Such a vector holds nothing to hand back.
  if (rows.data() == nullptr) return torch::empty({n, d}, torch::kFloat32);
  auto* owned = new std::vector<float>(std::move(rows));
  return torch::from_blob(
      owned->data(), {n, d},
      [owned, pool = std::move(pool)](void*) {
        if (pool) pool->give(std::move(*owned));
        delete owned;
      },
      torch::kFloat32);
}

torch::Tensor adopt_shared_rows(std::shared_ptr<const float> rows, int64_t n, int64_t d) {
  if (n * d == 0) return torch::empty({n, d}, torch::kFloat32);
  float* data = const_cast<float*>(rows.get());  // read only: the model never writes its input in place
  return torch::from_blob(data, {n, d}, [holder = std::move(rows)](void*) mutable { holder.reset(); },
                          torch::kFloat32);
}

torch::Tensor rows_tensor(std::span<const float> rows, int64_t n, int64_t d) {
  auto t = torch::empty({n, d}, torch::kFloat32);
  const size_t count = static_cast<size_t>(n * d);
  if (count > 0) std::memcpy(t.data_ptr<float>(), rows.data(), count * sizeof(float));
  return t;
}

Result<TrainResult> run_training(TrainingBackend& backend, const TrainConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_train_config(config));
  try {
    Loop loop(backend, config);
    return loop.run();
  } catch (const c10::Error& e) {
    return internal_error(std::string("training failed in LibTorch: ") + first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return internal_error(std::string("training failed: ") + e.what());
  }
}

}  // namespace dgld::trainer
