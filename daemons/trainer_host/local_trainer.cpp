#include "daemons/trainer_host/local_trainer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "common/buffer_pool.h"
#include "common/cpu_time.h"
#include "common/logging.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "common/sampling/multi_layer_sampler.h"
#include "daemons/trainer_host/eval_chunks.h"
#include "daemons/trainer_host/training_loop.h"
#include "common/random.h"

namespace dgld::trainer {

namespace {

template <typename T>
Result<std::span<const T>> node_column(const MappedPartition& part, const std::string& name, bool required,
                                       const char* dtype_name) {
  const TensorView* t = part.node_tensor(name);
  if (!t) {
    if (!required) return std::span<const T>{};
    return not_found("the partition has no node tensor '" + name + "' (needed for training; it has: " +
                     node_tensor_names(part) + ")");
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

// Standalone training: the whole graph in this process, one trainer.
class LocalBackend final : public TrainingBackend {
 public:
  LocalBackend(const LocalGraph& g, const TrainConfig& c, SamplingSpec sampling, int64_t num_classes)
      : g_(g), c_(c), num_classes_(num_classes), source_(g.in_edges), sampler_(std::move(sampling)),
        order_(g.train_ids), features_(g.features) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int part_id() const override { return 0; }
  const std::string& graph_name() const override { return g_.graph_name; }
  int64_t num_nodes() const override { return g_.num_nodes; }
  int64_t feat_dim() const override { return uses_features() ? g_.feat_dim : 0; }
  int64_t num_classes() const override { return num_classes_; }
  int64_t steps_per_epoch() const override {
    return (static_cast<int64_t>(order_.size()) + c_.batch_size - 1) / c_.batch_size;
  }
  void start_epoch(int epoch, int64_t first_step) override {
    epoch_ = epoch;
    step_ = first_step;
    order_ = g_.train_ids;  // each epoch's order depends on (seed, epoch) only, so a resumed run repeats it
    StreamRng rng(c_.seed, 0x5eed0000ull + static_cast<uint64_t>(epoch));  // as DistDataLoader's
    seeded_shuffle(std::span<int64_t>(order_), rng);
  }
  Result<client::Batch> next_batch() override;
  Status allreduce(torch::Tensor&, Reduce, const std::string&) override { return Status::ok(); }
  Status broadcast(torch::Tensor&, const std::string&) override { return Status::ok(); }
  Result<EvalCounts> layerwise(Model& model, const Layer0Input& input, const LayerwiseRequest& request) override;
  Status original_node_ids(int64_t start, int64_t count, int64_t* out) override {
    if (start < 0 || count < 0 || start + count > g_.num_nodes) {
      return invalid_argument(fmt::format("original ids of nodes [{}, {}) asked, the graph has {}", start,
                                          start + count, g_.num_nodes));
    }
    for (int64_t i = 0; i < count; ++i) {
      out[i] = g_.orig_ids.empty() ? start + i : g_.orig_ids[static_cast<size_t>(start + i)];
    }
    return Status::ok();
  }
  Result<std::unique_ptr<EmbeddingStore>> create_embedding_store(const std::vector<int64_t>& dims,
                                                                 uint64_t seed) override {
    return make_local_embedding_store(g_.num_nodes, dims, seed);
  }

 private:
  bool uses_features() const { return c_.learnable_features != LearnableFeatures::replace; }
  void gather_rows(std::span<const int64_t> nodes, std::vector<float>& out) const {
    const size_t d = static_cast<size_t>(feat_dim());
    if (out.size() != nodes.size() * d) out = buffers_->take(nodes.size() * d);
    for (size_t i = 0; i < nodes.size() && d > 0; ++i) {
      std::memcpy(out.data() + i * d, features_.data() + static_cast<size_t>(nodes[i]) * d, d * sizeof(float));
    }
  }
  static void count(const torch::Tensor& logits, const torch::Tensor& labels, std::span<const int64_t> ids,
                    int64_t& correct, int64_t& total) {
    total = static_cast<int64_t>(ids.size());
    if (ids.empty()) return;
    const auto idx = ids_tensor(ids);
    correct = logits.index_select(0, idx).argmax(1).eq(labels.index_select(0, idx)).sum().item<int64_t>();
  }

  const LocalGraph& g_;
  const TrainConfig& c_;
  int64_t num_classes_;
  LocalGraphSource source_;
  MultiLayerNeighborSampler sampler_;
  std::vector<int64_t> order_;
  std::span<const float> features_;
  std::shared_ptr<BufferPool> buffers_ = std::make_shared<BufferPool>(4);
  int epoch_ = 0;
  int64_t step_ = 0;
};

Result<client::Batch> LocalBackend::next_batch() {
  const int64_t n = static_cast<int64_t>(order_.size());
  const int64_t start = step_ * c_.batch_size;
  if (start >= n) return internal_error("no batch left in this epoch");
  const int64_t len = std::min(c_.batch_size, n - start);
  const std::span<const int64_t> seeds(order_.data() + start, static_cast<size_t>(len));
  client::Batch b;
  b.batch_id = step_;
  StageTimer stage;
  auto mb = sampler_.sample(source_, seeds, derive_seed(derive_seed(c_.seed, static_cast<uint64_t>(epoch_)), static_cast<uint64_t>(step_)));
  if (!mb.is_ok()) return mb.status().with_context("sampling");
  b.mini_batch = std::move(mb).value();
  stage.lap(&b.timings.sample_s, &b.timings.sample_cpu_s);
  gather_rows(b.mini_batch.input_nodes, b.features);
  b.features_pool = buffers_;
  b.feature_dim = feat_dim();
  b.labels.resize(b.mini_batch.seeds.size());
  for (size_t i = 0; i < b.labels.size(); ++i) b.labels[i] = g_.labels[static_cast<size_t>(b.mini_batch.seeds[i])];
  stage.lap(&b.timings.fetch_s, &b.timings.fetch_cpu_s);
  ++step_;
  return b;
}

Result<EvalCounts> LocalBackend::layerwise(Model& model, const Layer0Input& input, const LayerwiseRequest& request) {
  const MultiLayerNeighborSampler full({c_.eval_fan_out});
  std::vector<int64_t> nodes(static_cast<size_t>(g_.num_nodes)), in_edges(nodes.size());
  for (int64_t v = 0; v < g_.num_nodes; ++v) {
    nodes[static_cast<size_t>(v)] = v;
    in_edges[static_cast<size_t>(v)] = g_.in_edges.degree(v);
  }
  in_edges = eval_in_edges(std::move(in_edges), c_.eval_fan_out, 1);
  const std::vector<EvalLayerWidths> widths = eval_layer_widths(model);
  const int64_t budget = c_.eval_memory_mb << 20;
  DGLD_RETURN_IF_ERROR(EvalChunker::check_budget(EvalChunker::smallest_budget(nodes, in_edges, widths), budget));
  EvalChunkStats stats;
  torch::Tensor h;  // the previous layer's output for every node
  std::vector<float> rows;
  for (int l = 0; l < model.num_layers(); ++l) {
    auto out = torch::empty({g_.num_nodes, model.impl().layer_out_dim(l)}, torch::kFloat32);
    EvalChunker chunker(in_edges, widths[static_cast<size_t>(l)], budget, c_.batch_size_eval);
    const SampleChunk sample = [&](std::span<const int64_t> chunk) -> Result<MiniBatch> {
      auto batch = full.sample(source_, chunk, 0);
      if (!batch.is_ok()) return batch.status().with_context(fmt::format("layer {}", l));
      return batch;
    };
    const ComputeChunk compute = [&](std::span<const int64_t> chunk, MiniBatch& batch) -> Status {
      auto bt = make_block_graph(batch.blocks[0]);
      if (!bt.is_ok()) return bt.status().with_context(fmt::format("layer {}", l));
      torch::Tensor h_src;
      if (l == 0) {
        gather_rows(batch.input_nodes, rows);
        const int64_t n = static_cast<int64_t>(batch.input_nodes.size());
        DGLD_ASSIGN_OR_RETURN(h_src, input(batch.input_nodes, rows_tensor(rows, n, feat_dim()), {}));
      } else {
        h_src = h.index_select(0, ids_tensor(batch.input_nodes));
      }
      // The chunks are runs of consecutive ids.
      out.narrow(0, chunk.front(), static_cast<int64_t>(chunk.size())).copy_(model.impl().forward_layer(l, *bt, h_src));
      return Status::ok();
    };
    DGLD_RETURN_IF_ERROR(for_each_eval_chunk(chunker, nodes, sample, compute));
    stats.record(chunker);
    std::vector<float>().swap(rows);
    h = out;  // the layer before it is released here
    if (request.on_kept && std::find(request.keep.begin(), request.keep.end(), l) != request.keep.end()) {
      const RowReader read = [&out](std::span<const int64_t> ids, float* dst) {
        const int64_t w = out.size(1);
        const float* src = out.data_ptr<float>();
        for (size_t i = 0; i < ids.size(); ++i) {
          std::memcpy(dst + static_cast<int64_t>(i) * w, src + ids[i] * w, static_cast<size_t>(w) * sizeof(float));
        }
        return Status::ok();
      };
      DGLD_RETURN_IF_ERROR(request.on_kept(l, out.size(1), read));
    }
  }
  logger("trainer")->info("layer-wise evaluation: {}", stats.describe(c_.eval_memory_mb));
  EvalCounts c;
  if (!request.count) return c;
  const auto labels = ids_tensor(g_.labels);
  count(h, labels, g_.val_ids, c.val_correct, c.val_total);
  count(h, labels, g_.test_ids, c.test_correct, c.test_total);
  return c;
}

}  // namespace

Result<LocalGraph> local_graph_from_partition(const MappedPartition& part, const std::string& graph_name,
                                              const std::string& feature, const std::string& label) {
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
  g.orig_ids = part.orig_node_ids();
  if (!feature.empty()) {
    const std::string name = "_N/" + feature;
    const TensorView* feats = part.node_tensor(name);
    if (!feats) {
      return not_found("the partition has no node tensor '" + name + "' (--feature " + feature +
                       "; it has: " + node_tensor_names(part) + ")");
    }
    if (feats->dtype != DType::float32 || feats->shape.size() != 2 || feats->num_rows() != n) {
      return invalid_argument(fmt::format("node tensor '{}' must be float32 [{}, d], got {} [{}]", name, n,
                                          dtype_name(feats->dtype), fmt::join(feats->shape, ", ")));
    }
    g.feat_dim = feats->shape[1];
    g.features = feats->as<float>();
  }
  DGLD_ASSIGN_OR_RETURN(g.labels, node_column<int64_t>(part, "_N/" + label, true, "int64"));
  DGLD_ASSIGN_OR_RETURN(g.train_ids, ids_from_mask(part, "_N/train_mask", true));
  DGLD_ASSIGN_OR_RETURN(g.val_ids, ids_from_mask(part, "_N/val_mask", false));
  DGLD_ASSIGN_OR_RETURN(g.test_ids, ids_from_mask(part, "_N/test_mask", false));
  return g;
}

Result<TrainResult> train_local(const LocalGraph& graph, const TrainConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_train_config(config));
  if (!config.model_file.empty()) DGLD_RETURN_IF_ERROR(check_model_file(config.model_file).with_context("--model-file"));
  DGLD_ASSIGN_OR_RETURN(SamplingSpec sampling, sampling_spec(config));
  if (!sampling.prob.empty()) {
    return invalid_argument("--sample-prob '" + sampling.prob + "': weighted sampling reads the edge tensor from the "
                            "graph-servers; standalone training has none (run distributed, e.g. dgl-launch --local)");
  }
  const bool uses_features = config.learnable_features != LearnableFeatures::replace;
  if (graph.num_nodes < 1) return invalid_argument(fmt::format("graph '{}' has no nodes", graph.graph_name));
  if (uses_features && graph.feat_dim < 1) {
    return invalid_argument(fmt::format("graph '{}' has no input features (train an embedding instead with "
                                        "--learnable-features replace)",
                                        graph.graph_name));
  }
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
  const int threads = resolve_num_threads(config.num_threads);
  set_torch_threads(threads);
  logger("trainer")->info("standalone: {} nodes, {} edges, {} train / {} val / {} test, {} threads", graph.num_nodes,
                          graph.in_edges.num_edges(), graph.train_ids.size(), graph.val_ids.size(),
                          graph.test_ids.size(), threads);
  LocalBackend backend(graph, config, std::move(sampling), max_label + 1);
  return run_training(backend, config);
}

Result<TrainResult> train_standalone(const std::string& part_config, const TrainConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_train_config(config));
  DGLD_ASSIGN_OR_RETURN(PartitionConfig pc, load_part_config(part_config));
  if (pc.num_parts != 1) {
    return invalid_argument(fmt::format("{}: standalone mode trains on one partition, but '{}' has {} (partition "
                                        "with --num-parts 1, or use distributed mode)",
                                        part_config, pc.graph_name, pc.num_parts));
  }
  if (pc.types.present()) {
    return invalid_argument(fmt::format("{}: '{}' is a heterogeneous graph; standalone mode trains homogeneous graphs "
                                        "only, run it as a distributed job (dgl-launch, --local for one machine)",
                                        part_config, pc.graph_name));
  }
  auto part = open_partition(pc, 0, /*verify_checksums=*/false);
  if (!part.is_ok()) return part.status().with_context(part_config);
  const std::string feature = config.learnable_features == LearnableFeatures::replace ? "" : config.feature;
  auto graph = local_graph_from_partition(**part, pc.graph_name, feature, config.label);
  if (!graph.is_ok()) return graph.status().with_context(part_config);
  return train_local(*graph, config);
}

}  // namespace dgld::trainer
