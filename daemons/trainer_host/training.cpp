#include "daemons/trainer_host/training.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "daemons/trainer_host/model.h"

namespace dgld::trainer {

Result<LearnableFeatures> parse_learnable_features(const std::string& text) {
  if (text == "off" || text == "none") return LearnableFeatures::off;
  if (text == "replace" || text == "on") return LearnableFeatures::replace;
  if (text == "concat") return LearnableFeatures::concat;
  return invalid_argument("--learnable-features '" + text + "': expected off, replace or concat");
}

const char* learnable_features_name(LearnableFeatures v) {
  switch (v) {
    case LearnableFeatures::off: return "off";
    case LearnableFeatures::replace: return "replace";
    case LearnableFeatures::concat: return "concat";
  }
  return "?";
}

Result<std::vector<int64_t>> parse_fan_out(const std::string& text) { return parse_fanouts(text, "--fan-out"); }

Result<SamplingSpec> sampling_spec(const TrainConfig& c, int num_etypes) {
  SamplingSpec spec;
  DGLD_ASSIGN_OR_RETURN(spec.fanouts, parse_fan_out(c.fan_out));
  if (static_cast<int>(spec.fanouts.size()) != c.num_layers) {
    return invalid_argument(fmt::format("--fan-out '{}' gives {} fanouts but --num-layers is {}: give one fanout "
                                        "per layer",
                                        c.fan_out, spec.fanouts.size(), c.num_layers));
  }
  spec.replace = c.replace;
  spec.prob = c.sample_prob;
  if (c.task == "link") {
    DGLD_ASSIGN_OR_RETURN(spec.exclude, parse_exclude(c.exclude, "--exclude"));
  }
  for (int64_t f : spec.fanouts) {
    if (num_etypes > 0) spec.etype_fanouts.emplace_back(static_cast<size_t>(num_etypes), f);
  }
  DGLD_RETURN_IF_ERROR(spec.validate());
  return spec;
}

Status validate_train_config(const TrainConfig& c) {
  if (c.num_epochs < 1) return invalid_argument(fmt::format("--num-epochs must be >= 1, got {}", c.num_epochs));
  if (c.num_hidden < 1) return invalid_argument(fmt::format("--num-hidden must be >= 1, got {}", c.num_hidden));
  if (c.num_layers < 1) return invalid_argument(fmt::format("--num-layers must be >= 1, got {}", c.num_layers));
  DGLD_RETURN_IF_ERROR(sampling_spec(c).status());
  if (c.batch_size < 1) return invalid_argument(fmt::format("--batch-size must be >= 1, got {}", c.batch_size));
  if (c.eval_fan_out < -1) {
    return invalid_argument(fmt::format("--eval-fan-out must be -1 (all) or >= 0, got {}", c.eval_fan_out));
  }
  if (c.batch_size_eval < 1) {
    return invalid_argument(fmt::format("--batch-size-eval must be >= 1, got {}", c.batch_size_eval));
  }
  if (c.eval_memory_mb < 1 || c.eval_memory_mb > (int64_t{1} << 30)) {
    return invalid_argument(fmt::format("--eval-memory-mb must be between 1 and 2^30 MiB, got {}", c.eval_memory_mb));
  }
  if (!(c.lr > 0 && std::isfinite(c.lr))) return invalid_argument(fmt::format("--lr must be > 0, got {}", c.lr));
  if (!(c.dropout >= 0 && c.dropout < 1)) {
    return invalid_argument(fmt::format("--dropout must be in [0, 1), got {}", c.dropout));
  }
  if (c.eval_every < -1) {
    return invalid_argument(fmt::format("--eval-every must be >= -1 (-1: never), got {}", c.eval_every));
  }
  if (c.log_every < 0) return invalid_argument(fmt::format("--log-every must be >= 0, got {}", c.log_every));
  if (c.model_file.empty()) {
    DGLD_RETURN_IF_ERROR(builtin_model_file(c.model, c.num_layers).status().with_context("--model"));
  }
  DGLD_RETURN_IF_ERROR(parse_kernels(c.kernels).status());
  if (c.num_threads < 0) return invalid_argument(fmt::format("--num-threads must be >= 0, got {}", c.num_threads));
  if (c.num_heads < 1) return invalid_argument(fmt::format("--num-heads must be >= 1, got {}", c.num_heads));
  if (!(c.weight_decay >= 0 && std::isfinite(c.weight_decay))) {
    return invalid_argument(fmt::format("--weight-decay must be >= 0, got {}", c.weight_decay));
  }
  if (c.label.empty()) return invalid_argument("--label must name a node tensor");
  if (c.feature.empty() && c.learnable_features != LearnableFeatures::replace) {
    return invalid_argument("--feature is empty: name a node tensor, or train an embedding instead "
                            "(--learnable-features replace)");
  }
  if (c.learnable_features != LearnableFeatures::off) {
    if (c.embed_dim < 1) return invalid_argument(fmt::format("--embed-dim must be >= 1, got {}", c.embed_dim));
    if (c.sparse_optimizer != "adagrad" && c.sparse_optimizer != "adam") {
      return invalid_argument("--sparse-optimizer '" + c.sparse_optimizer + "': expected adagrad or adam");
    }
    if (!(c.sparse_lr > 0 && std::isfinite(c.sparse_lr))) {
      return invalid_argument(fmt::format("--sparse-lr must be > 0, got {}", c.sparse_lr));
    }
  }
  if (c.num_bases < 0) return invalid_argument(fmt::format("--num-bases must be >= 0, got {}", c.num_bases));
  if (c.profile_steps < 0) {
    return invalid_argument(fmt::format("--profile-steps must be >= 0, got {}", c.profile_steps));
  }
  if (c.model_file.empty()) {
    DGLD_ASSIGN_OR_RETURN(const ModelKindInfo info, builtin_model_info(c.model));
    if (info.uses_edge_types) {
      // What training over a heterogeneous graph does not do yet, said up front.
      const std::pair<bool, const char*> unsupported[] = {
          {c.task != "node", "--task link"},
          {!c.save_model.empty(), "--save-model (the node types' input projections are not in the model file)"},
          {c.infer || !c.output_dir.empty(), "offline inference (--infer, --output-dir)"},
          {c.keep_best != "off", "--keep-best (the embeddings of featureless node types are not rolled back)"},
          {c.learnable_features != LearnableFeatures::off,
           "--learnable-features (node types without features always get a learnable embedding)"},
      };
      for (const auto& [bad, what] : unsupported) {
        if (bad) return invalid_argument(fmt::format("--model {}: {} is not supported on heterogeneous graphs yet",
                                                     c.model, what));
      }
      if (c.embed_dim < 1) return invalid_argument(fmt::format("--embed-dim must be >= 1, got {}", c.embed_dim));
    }
  }
  if (c.resume && c.checkpoint_dir.empty()) return invalid_argument("--resume needs --checkpoint-dir");
  if (c.checkpoint_every < 1) return invalid_argument("--checkpoint-every must be >= 1");
  if (c.checkpoint_every_steps < 0) return invalid_argument("--checkpoint-every-steps must be >= 0");
  if (c.checkpoint_replicas < 0) return invalid_argument("--checkpoint-replicas must be >= 0");
  if (c.infer) {
    if (c.model_file.empty()) {
      return invalid_argument("--infer needs --model-file (a model written by --save-model or torch.jit.save)");
    }
    if (c.output_dir.empty()) return invalid_argument("--infer needs --output-dir (where the outputs go)");
    if (c.learnable_features != LearnableFeatures::off) {
      return invalid_argument("--infer with --learnable-features: the trained embedding is not part of the model "
                              "file; write the outputs at the end of training instead (--output-dir without --infer)");
    }
    if (c.resume) return invalid_argument("--infer does not train: drop --resume");
  }
  if (c.task != "node" && c.task != "link") {
    return invalid_argument("--task '" + c.task + "': expected node (node classification) or link (link prediction)");
  }
  if (c.task == "link") {
    if (c.scorer != "dot" && c.scorer != "mlp") return invalid_argument("--scorer '" + c.scorer + "': expected dot or mlp");
    if (c.num_negatives < 1) return invalid_argument(fmt::format("--num-negatives must be >= 1, got {}", c.num_negatives));
    if (c.neg_sampler != "uniform" && c.neg_sampler != "local-uniform") {
      return invalid_argument("--neg-sampler '" + c.neg_sampler + "': expected uniform or local-uniform");
    }
    if (c.infer) return invalid_argument("--infer with --task link: write the embeddings after training (--output-dir)");
  }
  if (c.keep_best != "off") {
    const bool node_metric = c.keep_best == "acc", link_metric = c.keep_best == "mrr" || c.keep_best == "auc";
    if (!node_metric && !link_metric) {
      return invalid_argument("--keep-best '" + c.keep_best + "': expected off, acc (--task node), mrr or auc "
                              "(--task link)");
    }
    if (node_metric != (c.task == "node")) {
      return invalid_argument(fmt::format("--keep-best {} is a metric of --task {}, but this run is --task {}",
                                          c.keep_best, node_metric ? "node" : "link", c.task));
    }
    if (c.eval_every < 0) return invalid_argument("--keep-best needs evaluations: --eval-every -1 never evaluates");
    if (c.infer) return invalid_argument("--keep-best with --infer: --infer does not train");
    if (c.learnable_features != LearnableFeatures::off) {
      return invalid_argument("--keep-best with --learnable-features: the embedding lives on the graph-servers and "
                              "is not rolled back with the weights");
    }
    if (!c.checkpoint_dir.empty()) {
      return invalid_argument("--keep-best with --checkpoint-dir: checkpoints do not hold the best weights yet");
    }
  }
  if (c.embeddings_layer >= 0 && c.output_dir.empty()) {
    return invalid_argument("--embeddings-layer needs --output-dir");
  }
  if (c.embeddings_layer < -1 || c.embeddings_layer >= c.num_layers) {
    return invalid_argument(fmt::format("--embeddings-layer must be in [0, {}) (a layer of the model), got {}",
                                        c.num_layers, c.embeddings_layer));
  }
  return Status::ok();
}

int resolve_num_threads(int num_threads) {
  if (num_threads > 0) return num_threads;
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int v = std::atoi(env);
    if (v > 0) return v;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

nlohmann::json config_json(const TrainConfig& c) {
  return {{"num_epochs", c.num_epochs},
          {"num_hidden", c.num_hidden},
          {"num_layers", c.num_layers},
          {"fan_out", c.fan_out},
          {"batch_size", c.batch_size},
          {"batch_size_eval", c.batch_size_eval},
          {"eval_memory_mb", c.eval_memory_mb},
          {"lr", c.lr},
          {"dropout", c.dropout},
          {"eval_every", c.eval_every},
          {"log_every", c.log_every},
          {"model", c.model},
          {"seed", c.seed},
          {"num_threads", resolve_num_threads(c.num_threads)},
          {"num_heads", c.num_heads},
          {"kernels", c.kernels},
          {"weight_decay", c.weight_decay},
          {"row_normalize", c.row_normalize},
          {"replace", c.replace},
          {"sample_prob", c.sample_prob},
          {"feature", c.feature},
          {"label", c.label},
          {"learnable_features", learnable_features_name(c.learnable_features)},
          {"embed_dim", c.embed_dim},
          {"sparse_optimizer", c.sparse_optimizer},
          {"sparse_lr", c.sparse_lr},
          {"model_file", c.model_file},
          {"save_model", c.save_model},
          {"infer", c.infer},
          {"output_dir", c.output_dir},
          {"embeddings_layer", c.embeddings_layer},
          {"task", c.task},
          {"scorer", c.scorer},
          {"num_negatives", c.num_negatives},
          {"neg_sampler", c.neg_sampler},
          {"neg_exclude_positives", c.neg_exclude_positives},
          {"exclude", c.exclude},
          {"keep_best", c.keep_best},
          {"profile_steps", c.profile_steps},
          {"measure_peak", c.measure_peak}};
}

nlohmann::json link_metrics_json(const LinkMetrics& m) {
  return {{"num_edges", m.num_edges}, {"mrr", m.mrr},       {"hits@1", m.hits1},
          {"hits@10", m.hits10},      {"hits@50", m.hits50}, {"roc_auc", m.auc}};
}

// link_metrics_json read back (a resumed --task link run's history).
LinkMetrics link_metrics_from_json(const nlohmann::json& j) {
  LinkMetrics m;
  m.num_edges = j.at("num_edges").get<int64_t>();
  m.mrr = j.at("mrr").get<double>();
  m.hits1 = j.at("hits@1").get<double>();
  m.hits10 = j.at("hits@10").get<double>();
  m.hits50 = j.at("hits@50").get<double>();
  m.auc = j.at("roc_auc").get<double>();
  return m;
}

}  // namespace

namespace {

// The "cpu" object of an epoch: CPU seconds by stage.
nlohmann::json stage_cpu_json(double sample, double fetch, double compute, double allreduce, double process) {
  return {{"sample_s", sample}, {"fetch_s", fetch}, {"compute_s", compute}, {"allreduce_s", allreduce},
          {"process_s", process}};
}

void read_stage_cpu(const nlohmann::json& j, double& sample, double& fetch, double& compute, double& allreduce,
                    double& process) {
  sample = j.value("sample_s", 0.0);
  fetch = j.value("fetch_s", 0.0);
  compute = j.value("compute_s", 0.0);
  allreduce = j.value("allreduce_s", 0.0);
  process = j.value("process_s", 0.0);
}

// EpochCluster as metrics.json's "cluster" object, with the derived figures
// (docs/performance.md, "Traffic").
nlohmann::json cluster_json(const EpochCluster& c) {
  const auto per = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  return {{"num_machines", c.num_machines},
          {"seeds", c.seeds},
          {"batches", c.batches},
          {"round_trips", c.round_trips},
          {"input_rows", c.input_rows},
          {"remote_rows", c.remote_rows},
          {"cached_rows", c.cached_rows},
          {"sampled_edges", c.sampled_edges},
          {"model_flops", c.model_flops},
          {"batch_bytes", c.batch_bytes},
          {"other_bytes", c.other_bytes},
          {"allreduce_bytes", c.allreduce_bytes},
          {"network_bytes", c.network_bytes()},
          {"bytes_per_seed", per(static_cast<double>(c.network_bytes()), static_cast<double>(c.seeds))},
          {"remote_row_share", per(static_cast<double>(c.remote_rows), static_cast<double>(c.input_rows))},
          {"round_trips_per_batch", per(static_cast<double>(c.round_trips), static_cast<double>(c.batches))},
          {"link_bytes", c.link_bytes},
          {"cpu", stage_cpu_json(c.sample_cpu_s, c.fetch_cpu_s, c.compute_cpu_s, c.allreduce_cpu_s, c.process_cpu_s)}};
}

EpochCluster cluster_from_json(const nlohmann::json& j) {
  EpochCluster c;
  c.num_machines = j.value("num_machines", 0);
  c.seeds = j.value("seeds", int64_t{0});
  c.batches = j.value("batches", int64_t{0});
  c.round_trips = j.value("round_trips", int64_t{0});
  c.input_rows = j.value("input_rows", int64_t{0});
  c.remote_rows = j.value("remote_rows", int64_t{0});
  c.cached_rows = j.value("cached_rows", int64_t{0});
  c.sampled_edges = j.value("sampled_edges", int64_t{0});
  c.model_flops = j.value("model_flops", 0.0);
  c.batch_bytes = j.value("batch_bytes", int64_t{0});
  c.other_bytes = j.value("other_bytes", int64_t{0});
  c.allreduce_bytes = j.value("allreduce_bytes", int64_t{0});
  c.link_bytes = j.value("link_bytes", std::vector<int64_t>{});
  if (j.contains("cpu")) {
    read_stage_cpu(j.at("cpu"), c.sample_cpu_s, c.fetch_cpu_s, c.compute_cpu_s, c.allreduce_cpu_s, c.process_cpu_s);
  }
  return c;
}

// --profile-steps: the model step by operator category and operator, seconds per step.
nlohmann::json step_profile_json(const StepProfile& p) {
  const double steps = std::max(1, p.steps);
  nlohmann::json j = {{"steps", p.steps}, {"step_s", p.wall_s / steps}};
  j["categories"] = nlohmann::json::object();
  for (const auto& [name, s] : p.categories) j["categories"][name] = s / steps;
  j["ops"] = nlohmann::json::array();
  for (const OpTime& t : p.ops) {
    j["ops"].push_back({{"name", t.name}, {"category", t.category}, {"calls_per_step", t.calls / steps},
                        {"self_s", t.self_s / steps}, {"total_s", t.total_s / steps}});
  }
  return j;
}

nlohmann::json epoch_json(const EpochMetrics& e) {
  return {{"epoch", e.epoch},
          {"loss", e.loss},
          {"train_acc", e.train_acc},
          {"time_s", e.time_s},
          {"sample_s", e.sample_s},
          {"fetch_s", e.fetch_s},
          {"compute_s", e.compute_s},
          {"allreduce_s", e.allreduce_s},
          {"wait_s", e.wait_s},
          {"seeds_per_s", e.seeds_per_s},
          {"cpu", stage_cpu_json(e.sample_cpu_s, e.fetch_cpu_s, e.compute_cpu_s, e.allreduce_cpu_s, e.process_cpu_s)},
          {"peak_rss_bytes", e.peak_rss_bytes},
          {"model", {{"flops", e.model_flops},
                     {"gflops_per_s", e.model_gflops()},
                     {"gemm_peak_gflops", e.gemm_peak_gflops},
                     {"peak_fraction", e.peak_fraction()}}},
          {"feature_bytes", e.feature_bytes},
          {"gather_gb_per_s", e.gather_gb_per_s()},
          {"end_unix_s", e.end_unix_s},
          {"cluster", cluster_json(e.cluster)},
          {"step_losses", e.step_losses}};
}

EpochMetrics epoch_from_json(const nlohmann::json& e) {
  EpochMetrics m;
  m.epoch = e.at("epoch").get<int>();
  m.loss = e.at("loss").get<double>();
  m.train_acc = e.at("train_acc").get<double>();
  m.time_s = e.at("time_s").get<double>();
  m.sample_s = e.at("sample_s").get<double>();
  m.fetch_s = e.at("fetch_s").get<double>();
  m.compute_s = e.at("compute_s").get<double>();
  m.allreduce_s = e.value("allreduce_s", 0.0);
  m.wait_s = e.value("wait_s", 0.0);
  m.seeds_per_s = e.at("seeds_per_s").get<double>();
  m.step_losses = e.value("step_losses", std::vector<double>{});
  if (e.contains("cpu")) {
    read_stage_cpu(e.at("cpu"), m.sample_cpu_s, m.fetch_cpu_s, m.compute_cpu_s, m.allreduce_cpu_s, m.process_cpu_s);
  }
  m.end_unix_s = e.value("end_unix_s", 0.0);
  m.peak_rss_bytes = e.value("peak_rss_bytes", int64_t{-1});
  if (e.contains("model")) {
    m.model_flops = e.at("model").value("flops", 0.0);
    m.gemm_peak_gflops = e.at("model").value("gemm_peak_gflops", 0.0);
  }
  m.feature_bytes = e.value("feature_bytes", int64_t{0});
  if (e.contains("cluster")) m.cluster = cluster_from_json(e.at("cluster"));
  return m;
}

nlohmann::json eval_json(const EvalMetrics& e, bool link) {
  nlohmann::json j = {{"epoch", e.epoch}, {"val_acc", e.val_acc}, {"test_acc", e.test_acc}, {"time_s", e.time_s}};
  if (link) {
    j["val"] = link_metrics_json(e.val_link);
    j["test"] = link_metrics_json(e.test_link);
  }
  return j;
}

EvalMetrics eval_from_json(const nlohmann::json& e) {
  EvalMetrics m;
  m.epoch = e.at("epoch").get<int>();
  m.val_acc = e.at("val_acc").get<double>();
  m.test_acc = e.at("test_acc").get<double>();
  m.time_s = e.at("time_s").get<double>();
  if (e.contains("val")) m.val_link = link_metrics_from_json(e.at("val"));
  if (e.contains("test")) m.test_link = link_metrics_from_json(e.at("test"));
  return m;
}

}  // namespace

std::string metrics_json(const TrainResult& r) {
  using nlohmann::json;
  json j;
  j["graph_name"] = r.graph_name;
  j["model"] = r.config.model;
  j["num_trainers"] = r.num_trainers;
  j["rank"] = r.rank;
  j["config"] = config_json(r.config);
  j["num_classes"] = r.num_classes;
  j["num_parameters"] = r.num_parameters;
  if (r.resumed_at_epoch >= 0) {
    j["resumed_from_epoch"] = r.resumed_from_epoch;
    j["resumed_at"] = {{"epoch", r.resumed_at_epoch}, {"step", r.resumed_at_step}};
  }
  if (r.checkpoints > 0) {
    j["checkpoints"] = {{"count", r.checkpoints},
                        {"time_s", r.checkpoint_s},
                        {"replicas", r.config.checkpoint_replicas},
                        {"replica_time_s", r.replica_s},
                        {"replica_bytes_sent", r.replica_bytes_sent}};
  }
  j["epochs"] = json::array();
  for (const auto& e : r.epochs) j["epochs"].push_back(epoch_json(e));
  const bool link = r.config.task == "link";
  j["task"] = r.config.task;
  j["evals"] = json::array();
  for (const auto& e : r.evals) j["evals"].push_back(eval_json(e, link));
  {
    const MemoryReport& m = r.memory;
    json mem = to_json(m.process);
    mem["partition_bytes"] = m.partition_bytes;
    mem["feature_cache_bytes"] = m.feature_cache_bytes;
    mem["largest_batch_bytes"] = m.largest_batch_bytes;
    mem["idle_buffer_bytes"] = m.idle_buffer_bytes;
    mem["prefetch_limit_bytes"] = m.prefetch_limit_bytes;
    mem["model_bytes"] = m.model_bytes;
    mem["peak_stage"] = m.stage_peaks.empty() ? "" : m.stage_peaks.back().first;
    mem["stage_peaks"] = json::array();
    for (const auto& [stage, bytes] : m.stage_peaks) mem["stage_peaks"].push_back({{"stage", stage}, {"peak_rss_bytes", bytes}});
    j["memory"] = std::move(mem);
  }
  j["val_acc"] = r.val_acc;
  j["test_acc"] = r.test_acc;
  if (link) {
    j["val"] = link_metrics_json(r.val_link);
    j["test"] = link_metrics_json(r.test_link);
  }
  if (r.config.keep_best != "off") j["best_epoch"] = r.best_epoch;
  if (r.profile.steps > 0) j["profile"] = step_profile_json(r.profile);
  j["gemm_peak_gflops"] = r.gemm_peak_gflops;
  j["total_time_s"] = r.total_time_s;
  if (!r.output_files.empty()) {
    j["output_files"] = r.output_files;
    j["inference_time_s"] = r.inference_time_s;
  }
  return j.dump(2) + "\n";
}

std::string history_records(const TrainResult& r, size_t first_epoch, size_t first_eval) {
  std::string out;
  const bool link = r.config.task == "link";
  for (size_t i = first_epoch; i < r.epochs.size(); ++i) out += nlohmann::json{{"epoch", epoch_json(r.epochs[i])}}.dump() + "\n";
  for (size_t i = first_eval; i < r.evals.size(); ++i) out += nlohmann::json{{"eval", eval_json(r.evals[i], link)}}.dump() + "\n";
  return out;
}

Status add_history_record(std::string_view line, TrainResult& into) {
  try {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("epoch")) {
      into.epochs.push_back(epoch_from_json(j.at("epoch")));
    } else if (j.contains("eval")) {
      into.evals.push_back(eval_from_json(j.at("eval")));
    } else {
      return corruption("a history record with neither \"epoch\" nor \"eval\"");
    }
  } catch (const std::exception& e) {
    return corruption(fmt::format("history record after epoch {}: {}", into.epochs.size(), e.what()));
  }
  return Status::ok();
}

std::string last_results_json(const TrainResult& r) {
  nlohmann::json j = {{"val_acc", r.val_acc}, {"test_acc", r.test_acc}, {"total_time_s", r.total_time_s}};
  if (r.config.task == "link") {
    j["val"] = link_metrics_json(r.val_link);
    j["test"] = link_metrics_json(r.test_link);
  }
  return j.dump();
}

Status last_results_from_json(const std::string& text, TrainResult& into, double& total_time_s) {
  try {
    const auto j = nlohmann::json::parse(text);
    into.val_acc = j.at("val_acc").get<double>();
    into.test_acc = j.at("test_acc").get<double>();
    total_time_s = j.at("total_time_s").get<double>();
    if (j.contains("val")) into.val_link = link_metrics_from_json(j.at("val"));
    if (j.contains("test")) into.test_link = link_metrics_from_json(j.at("test"));
  } catch (const std::exception& e) {
    return corruption(std::string("last results: ") + e.what());
  }
  return Status::ok();
}

}  // namespace dgld::trainer
