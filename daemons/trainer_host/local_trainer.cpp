#include "daemons/trainer_host/local_trainer.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "common/sampling/multi_layer_sampler.h"
#include "daemons/trainer_host/model_impl.h"

namespace dgld::trainer {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t mix(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

// Fisher-Yates with a fixed generator, so the order is the same on every platform.
void shuffle_ids(std::vector<int64_t>& ids, uint64_t seed) {
  uint64_t state = seed;
  for (size_t i = ids.size(); i > 1; --i) {
    state = splitmix64(state);
    const size_t j = static_cast<size_t>(state % i);
    std::swap(ids[i - 1], ids[j]);
  }
}

// at::set_num_threads sizes LibTorch's OpenMP pool; OpenBLAS (Debian's BLAS
// under torch) keeps its own pool, set here too when it is the loaded BLAS.
void set_threads(int n) {
  at::set_num_threads(n);
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(n);
}

template <typename T>
Result<std::span<const T>> node_column(const MappedPartition& part, const std::string& name, bool required,
                                       const char* dtype_name) {
  const TensorView* t = part.node_tensor(name);
  if (!t) {
    if (!required) return std::span<const T>{};
    return not_found("the partition has no node tensor '" + name + "' (needed for training)");
  }
  auto data = t->as<T>();
  if (data.data() == nullptr && t->num_bytes > 0) {
    return invalid_argument(fmt::format("node tensor '{}' must be {}", name, dtype_name));
  }
  if (t->num_rows() != part.num_inner_nodes() || t->row_size() != 1) {
    return invalid_argument(fmt::format("node tensor '{}' must have one value per node ({}), got shape [{}]", name,
                                        part.num_inner_nodes(), fmt::join(t->shape, ", ")));
  }
  return data;
}

Result<std::vector<int64_t>> ids_from_mask(const MappedPartition& part, const std::string& name, bool required) {
  DGLD_ASSIGN_OR_RETURN(auto mask, node_column<uint8_t>(part, name, required, "uint8"));
  std::vector<int64_t> ids;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) ids.push_back(part.node_global_ids()[i]);
  }
  return ids;
}

torch::Tensor ids_tensor(std::span<const int64_t> ids) {
  auto t = torch::empty({static_cast<int64_t>(ids.size())}, torch::kInt64);
  if (!ids.empty()) std::memcpy(t.data_ptr<int64_t>(), ids.data(), ids.size() * sizeof(int64_t));
  return t;
}

double accuracy(const torch::Tensor& logits_all, const torch::Tensor& labels_all, std::span<const int64_t> ids) {
  if (ids.empty()) return 0.0;
  const auto idx = ids_tensor(ids);
  const auto pred = logits_all.index_select(0, idx).argmax(1);
  return pred.eq(labels_all.index_select(0, idx)).sum().item<double>() / static_cast<double>(ids.size());
}

// Everything one training run holds.
class Run {
 public:
  Run(const LocalGraph& g, const TrainConfig& c, std::vector<int64_t> fanouts, int64_t num_classes)
      : g_(g), c_(c), fanouts_(std::move(fanouts)), num_classes_(num_classes), source_(g.in_edges),
        sampler_(fanouts_, c.replace), log_(logger("trainer")) {}

  Result<TrainResult> run();

 private:
  Status train_epoch(int epoch, EpochMetrics& m);
  Result<EvalMetrics> evaluate(int epoch);
  void gather_rows(std::span<const int64_t> nodes, std::vector<float>& out) const;

  const LocalGraph& g_;
  const TrainConfig& c_;
  std::vector<int64_t> fanouts_;
  int64_t num_classes_;
  LocalGraphSource source_;
  MultiLayerNeighborSampler sampler_;
  std::shared_ptr<spdlog::logger> log_;
  std::vector<float> normalized_;  // row-normalised copy of the features, when asked for
  std::span<const float> features_;
  torch::Tensor labels_;           // int64 [num_nodes]
  std::unique_ptr<Model> model_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::vector<int64_t> order_;
  std::vector<float> rows_;        // gather buffer, reused across batches
  int64_t global_step_ = 0;
};

void Run::gather_rows(std::span<const int64_t> nodes, std::vector<float>& out) const {
  const size_t d = static_cast<size_t>(g_.feat_dim);
  out.resize(nodes.size() * d);
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::memcpy(out.data() + i * d, features_.data() + static_cast<size_t>(nodes[i]) * d, d * sizeof(float));
  }
}

Result<TrainResult> Run::run() {
  const auto t_start = Clock::now();
  const int threads = resolve_num_threads(c_.num_threads);
  set_threads(threads);
  torch::manual_seed(c_.seed);

  features_ = g_.features;
  if (c_.row_normalize) {
    const size_t d = static_cast<size_t>(g_.feat_dim);
    normalized_.assign(g_.features.begin(), g_.features.end());
    for (int64_t v = 0; v < g_.num_nodes; ++v) {
      float* row = normalized_.data() + static_cast<size_t>(v) * d;
      double sum = 0;
      for (size_t j = 0; j < d; ++j) sum += row[j];
      if (sum != 0) {
        for (size_t j = 0; j < d; ++j) row[j] = static_cast<float>(row[j] / sum);
      }
    }
    features_ = normalized_;
  }
  labels_ = ids_tensor(g_.labels);

  DGLD_ASSIGN_OR_RETURN(ModelKind kind, parse_model_kind(c_.model));
  ModelConfig mc;
  mc.kind = kind;
  mc.in_dim = g_.feat_dim;
  mc.num_hidden = c_.num_hidden;
  mc.num_classes = num_classes_;
  mc.num_layers = c_.num_layers;
  mc.dropout = c_.dropout;
  mc.num_heads = c_.num_heads;
  DGLD_ASSIGN_OR_RETURN(model_, Model::create(mc));
  optimizer_ = std::make_unique<torch::optim::Adam>(
      model_->impl().net->parameters(), torch::optim::AdamOptions(c_.lr).weight_decay(c_.weight_decay));
  log_->info("training {} on '{}': {} nodes, {} edges, {} train / {} val / {} test, fanouts {}, {} threads",
             model_->describe(), g_.graph_name, g_.num_nodes, g_.in_edges.num_edges(), g_.train_ids.size(),
             g_.val_ids.size(), g_.test_ids.size(), c_.fan_out, threads);

  TrainResult r;
  r.graph_name = g_.graph_name;
  r.config = c_;
  r.num_classes = num_classes_;
  r.num_parameters = model_->num_parameters();
  order_ = g_.train_ids;
  for (int epoch = 0; epoch < c_.num_epochs; ++epoch) {
    EpochMetrics m;
    m.epoch = epoch;
    DGLD_RETURN_IF_ERROR(train_epoch(epoch, m));
    log_->info("Epoch {:05d} | Loss {:.4f} | Train Acc {:.4f} | Time {:.3f} s (sample {:.3f}, fetch {:.3f}, "
               "compute {:.3f}) | {:.0f} seeds/s",
               epoch, m.loss, m.train_acc, m.time_s, m.sample_s, m.fetch_s, m.compute_s, m.seeds_per_s);
    r.epochs.push_back(m);
    const bool last = epoch == c_.num_epochs - 1;
    if (last || (c_.eval_every > 0 && (epoch + 1) % c_.eval_every == 0)) {
      DGLD_ASSIGN_OR_RETURN(EvalMetrics e, evaluate(epoch));
      log_->info("Epoch {:05d} | Val Acc {:.4f} | Test Acc {:.4f} | eval {:.3f} s", epoch, e.val_acc, e.test_acc,
                 e.time_s);
      r.val_acc = e.val_acc;
      r.test_acc = e.test_acc;
      r.evals.push_back(e);
    }
  }
  r.total_time_s = seconds_since(t_start);
  return r;
}

Status Run::train_epoch(int epoch, EpochMetrics& m) {
  const auto t_epoch = Clock::now();
  auto& net = model_->impl().net;
  net->train();
  shuffle_ids(order_, mix(c_.seed, static_cast<uint64_t>(epoch)));
  const int64_t n = static_cast<int64_t>(order_.size());
  double loss_sum = 0;
  int64_t correct = 0, steps = 0;
  for (int64_t start = 0; start < n; start += c_.batch_size, ++steps) {
    const int64_t len = std::min(c_.batch_size, n - start);
    const std::span<const int64_t> seeds(order_.data() + start, static_cast<size_t>(len));

    auto t0 = Clock::now();
    auto batch = sampler_.sample(source_, seeds, mix(mix(c_.seed, static_cast<uint64_t>(epoch)), steps));
    if (!batch.is_ok()) return batch.status().with_context(fmt::format("epoch {} step {}: sampling", epoch, steps));
    m.sample_s += seconds_since(t0);

    t0 = Clock::now();
    gather_rows(batch->input_nodes, rows_);
    auto input = make_model_input(*batch, rows_, g_.feat_dim);
    if (!input.is_ok()) return input.status().with_context(fmt::format("epoch {} step {}", epoch, steps));
    const auto labels = labels_.index_select(0, ids_tensor(batch->seeds));
    m.fetch_s += seconds_since(t0);

    t0 = Clock::now();
    auto logits = forward_checked(*model_, *input);
    if (!logits.is_ok()) return logits.status().with_context(fmt::format("epoch {} step {}", epoch, steps));
    auto loss = torch::nn::functional::cross_entropy(*logits, labels);
    const double loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) {
      return internal_error(fmt::format("the loss became {} at epoch {} step {} (lr {}): training stopped; "
                                        "try a lower --lr",
                                        loss_value, epoch, steps, c_.lr));
    }
    optimizer_->zero_grad();
    loss.backward();
    optimizer_->step();
    const int64_t batch_correct = logits->argmax(1).eq(labels).sum().item<int64_t>();
    m.compute_s += seconds_since(t0);

    loss_sum += loss_value;
    correct += batch_correct;
    ++global_step_;
    if (c_.log_every > 0 && (steps + 1) % c_.log_every == 0) {
      log_->info("Part 0 | Epoch {:05d} | Step {:05d} | Loss {:.4f} | Train Acc {:.4f} | Speed (samples/sec) {:.1f}",
                 epoch, steps, loss_value, static_cast<double>(batch_correct) / static_cast<double>(len),
                 static_cast<double>(start + len) / seconds_since(t_epoch));
    }
  }
  m.loss = steps ? loss_sum / static_cast<double>(steps) : 0.0;
  m.train_acc = n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
  m.time_s = seconds_since(t_epoch);
  m.seeds_per_s = m.time_s > 0 ? static_cast<double>(n) / m.time_s : 0.0;
  return Status::ok();
}

Result<EvalMetrics> Run::evaluate(int epoch) {
  const auto t0 = Clock::now();
  auto& net = model_->impl().net;
  net->eval();
  torch::NoGradGuard no_grad;
  const MultiLayerNeighborSampler full({-1});
  // Layer 0 reads the features in place (index_select only reads).
  torch::Tensor h = torch::from_blob(const_cast<float*>(features_.data()), {g_.num_nodes, g_.feat_dim},
                                     torch::kFloat32);
  std::vector<int64_t> chunk;
  for (int l = 0; l < net->num_layers(); ++l) {
    auto out = torch::empty({g_.num_nodes, net->layer_out_dim(l)}, torch::kFloat32);
    for (int64_t start = 0; start < g_.num_nodes; start += c_.batch_size_eval) {
      const int64_t len = std::min(c_.batch_size_eval, g_.num_nodes - start);
      chunk.resize(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) chunk[static_cast<size_t>(i)] = start + i;
      auto batch = full.sample(source_, chunk, 0);
      if (!batch.is_ok()) return batch.status().with_context(fmt::format("evaluation, layer {}", l));
      auto bt = make_block_tensors(batch->blocks[0]);
      if (!bt.is_ok()) return bt.status().with_context(fmt::format("evaluation, layer {}", l));
      const auto h_src = h.index_select(0, ids_tensor(batch->input_nodes));
      out.narrow(0, start, len).copy_(net->forward_layer(l, *bt, h_src));
    }
    h = out;
  }
  net->train();
  EvalMetrics e;
  e.epoch = epoch;
  e.val_acc = accuracy(h, labels_, g_.val_ids);
  e.test_acc = accuracy(h, labels_, g_.test_ids);
  e.time_s = seconds_since(t0);
  return e;
}

}  // namespace

Result<std::vector<int64_t>> parse_fan_out(const std::string& text) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < -1) {
      return invalid_argument("--fan-out '" + text + "': '" + item + "' is not a fanout (an integer >= -1)");
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

Status validate_train_config(const TrainConfig& c) {
  if (c.num_epochs < 1) return invalid_argument(fmt::format("--num-epochs must be >= 1, got {}", c.num_epochs));
  if (c.num_hidden < 1) return invalid_argument(fmt::format("--num-hidden must be >= 1, got {}", c.num_hidden));
  if (c.num_layers < 1) return invalid_argument(fmt::format("--num-layers must be >= 1, got {}", c.num_layers));
  DGLD_ASSIGN_OR_RETURN(auto fanouts, parse_fan_out(c.fan_out));
  if (static_cast<int>(fanouts.size()) != c.num_layers) {
    return invalid_argument(fmt::format("--fan-out '{}' gives {} fanouts but --num-layers is {}: give one fanout "
                                        "per layer",
                                        c.fan_out, fanouts.size(), c.num_layers));
  }
  if (c.batch_size < 1) return invalid_argument(fmt::format("--batch-size must be >= 1, got {}", c.batch_size));
  if (c.batch_size_eval < 1) {
    return invalid_argument(fmt::format("--batch-size-eval must be >= 1, got {}", c.batch_size_eval));
  }
  if (!(c.lr > 0 && std::isfinite(c.lr))) return invalid_argument(fmt::format("--lr must be > 0, got {}", c.lr));
  if (!(c.dropout >= 0 && c.dropout < 1)) {
    return invalid_argument(fmt::format("--dropout must be in [0, 1), got {}", c.dropout));
  }
  if (c.eval_every < 0) return invalid_argument(fmt::format("--eval-every must be >= 0, got {}", c.eval_every));
  if (c.log_every < 0) return invalid_argument(fmt::format("--log-every must be >= 0, got {}", c.log_every));
  DGLD_RETURN_IF_ERROR(parse_model_kind(c.model).status().with_context("--model"));
  if (c.num_threads < 0) return invalid_argument(fmt::format("--num-threads must be >= 0, got {}", c.num_threads));
  if (c.num_heads < 1) return invalid_argument(fmt::format("--num-heads must be >= 1, got {}", c.num_heads));
  if (!(c.weight_decay >= 0 && std::isfinite(c.weight_decay))) {
    return invalid_argument(fmt::format("--weight-decay must be >= 0, got {}", c.weight_decay));
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

Result<LocalGraph> local_graph_from_partition(const MappedPartition& part, const std::string& graph_name) {
  if (part.num_parts() != 1) {
    return invalid_argument(fmt::format("standalone training needs a 1-partition config; '{}' has {} partitions",
                                        graph_name, part.num_parts()));
  }
  const int64_t n = part.num_inner_nodes();
  if (part.num_local_nodes() != n) {
    return invalid_argument(fmt::format("partition of '{}' has {} halo nodes; a 1-partition config has none",
                                        graph_name, part.num_local_nodes() - n));
  }
  const auto gids = part.node_global_ids();
  for (int64_t i = 0; i < n; ++i) {
    if (gids[i] != i) {
      return invalid_argument(fmt::format("partition of '{}': local node {} has global id {} (expected the identity "
                                          "map of a 1-partition config)",
                                          graph_name, i, gids[i]));
    }
  }
  LocalGraph g;
  g.graph_name = graph_name;
  g.num_nodes = n;
  g.in_edges = part.in_edges();
  const TensorView* feats = part.node_tensor("_N/features");
  if (!feats) return not_found("the partition has no node tensor '_N/features' (needed for training)");
  if (feats->dtype != DType::float32 || feats->shape.size() != 2 || feats->num_rows() != n) {
    return invalid_argument(fmt::format("node tensor '_N/features' must be float32 [{}, d], got shape [{}]", n,
                                        fmt::join(feats->shape, ", ")));
  }
  g.feat_dim = feats->shape[1];
  g.features = feats->as<float>();
  DGLD_ASSIGN_OR_RETURN(g.labels, node_column<int64_t>(part, "_N/labels", true, "int64"));
  DGLD_ASSIGN_OR_RETURN(g.train_ids, ids_from_mask(part, "_N/train_mask", true));
  DGLD_ASSIGN_OR_RETURN(g.val_ids, ids_from_mask(part, "_N/val_mask", false));
  DGLD_ASSIGN_OR_RETURN(g.test_ids, ids_from_mask(part, "_N/test_mask", false));
  return g;
}

Result<TrainResult> train_local(const LocalGraph& graph, const TrainConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_train_config(config));
  DGLD_ASSIGN_OR_RETURN(auto fanouts, parse_fan_out(config.fan_out));
  if (graph.num_nodes < 1 || graph.feat_dim < 1) return invalid_argument("the graph has no nodes or no features");
  if (graph.in_edges.num_rows() != graph.num_nodes ||
      static_cast<int64_t>(graph.features.size()) != graph.num_nodes * graph.feat_dim ||
      static_cast<int64_t>(graph.labels.size()) != graph.num_nodes) {
    return invalid_argument(fmt::format("graph '{}': adjacency rows, features and labels disagree on the node count",
                                        graph.graph_name));
  }
  if (graph.train_ids.empty()) return invalid_argument(fmt::format("graph '{}' has no training nodes", graph.graph_name));
  int64_t max_label = -1;
  for (const auto* ids : {&graph.train_ids, &graph.val_ids, &graph.test_ids}) {
    for (int64_t v : *ids) {
      if (v < 0 || v >= graph.num_nodes) {
        return invalid_argument(fmt::format("graph '{}': split node id {} out of range", graph.graph_name, v));
      }
      if (graph.labels[v] < 0) {
        return invalid_argument(fmt::format("graph '{}': node {} of a split has label {}", graph.graph_name, v,
                                            graph.labels[v]));
      }
      max_label = std::max(max_label, graph.labels[v]);
    }
  }
  try {
    Run run(graph, config, std::move(fanouts), max_label + 1);
    return run.run();
  } catch (const c10::Error& e) {
    return internal_error(std::string("training failed in LibTorch: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return internal_error(std::string("training failed: ") + e.what());
  }
}

Result<TrainResult> train_standalone(const std::string& part_config, const TrainConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_train_config(config));
  DGLD_ASSIGN_OR_RETURN(PartitionConfig pc, load_part_config(part_config));
  if (pc.num_parts != 1) {
    return invalid_argument(fmt::format("{}: standalone mode trains on one partition, but '{}' has {} (partition "
                                        "with --num-parts 1, or use distributed mode)",
                                        part_config, pc.graph_name, pc.num_parts));
  }
  auto part = open_partition(pc, 0, /*verify_checksums=*/false);
  if (!part.is_ok()) return part.status().with_context(part_config);
  DGLD_ASSIGN_OR_RETURN(LocalGraph graph, local_graph_from_partition(**part, pc.graph_name));
  return train_local(graph, config);
}

std::string metrics_json(const TrainResult& r) {
  using nlohmann::json;
  const TrainConfig& c = r.config;
  json j;
  j["graph_name"] = r.graph_name;
  j["model"] = c.model;
  j["num_trainers"] = 1;
  j["config"] = {{"num_epochs", c.num_epochs},   {"num_hidden", c.num_hidden},
                 {"num_layers", c.num_layers},   {"fan_out", c.fan_out},
                 {"batch_size", c.batch_size},   {"batch_size_eval", c.batch_size_eval},
                 {"lr", c.lr},                   {"dropout", c.dropout},
                 {"eval_every", c.eval_every},   {"log_every", c.log_every},
                 {"model", c.model},             {"seed", c.seed},
                 {"num_threads", resolve_num_threads(c.num_threads)},
                 {"num_heads", c.num_heads},     {"weight_decay", c.weight_decay},
                 {"row_normalize", c.row_normalize}, {"replace", c.replace}};
  j["num_classes"] = r.num_classes;
  j["num_parameters"] = r.num_parameters;
  j["epochs"] = json::array();
  for (const auto& e : r.epochs) {
    j["epochs"].push_back({{"epoch", e.epoch},         {"loss", e.loss},
                           {"train_acc", e.train_acc}, {"time_s", e.time_s},
                           {"sample_s", e.sample_s},   {"fetch_s", e.fetch_s},
                           {"compute_s", e.compute_s}, {"allreduce_s", 0.0},
                           {"seeds_per_s", e.seeds_per_s}});
  }
  j["evals"] = json::array();
  for (const auto& e : r.evals) {
    j["evals"].push_back({{"epoch", e.epoch}, {"val_acc", e.val_acc}, {"test_acc", e.test_acc}, {"time_s", e.time_s}});
  }
  j["val_acc"] = r.val_acc;
  j["test_acc"] = r.test_acc;
  j["total_time_s"] = r.total_time_s;
  return j.dump(2) + "\n";
}

}  // namespace dgld::trainer
