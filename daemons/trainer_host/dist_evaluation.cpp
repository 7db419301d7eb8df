#include "daemons/trainer_host/dist_backend.h"
#include "daemons/trainer_host/eval_chunks.h"
#include "common/memory.h"
#include "common/process_memory.h"

namespace dgld::trainer::dist {

Result<client::DistTensor> DistBackend::create_tensor(const std::string& name, int64_t dim, client::Init init,
                                                      uint64_t seed) {
  client::CreateTensor spec;
  spec.name = name;
  spec.dtype = DType::float32;
  spec.shape = {num_nodes(), dim};
  spec.policy = client::Policy::node;
  spec.init = init;
  spec.init_a = -1.0;
  spec.init_b = 1.0;
  spec.seed = seed;
  auto t = client::DistTensor::create(*cluster_, spec, o_.collective_timeout);
  if (t.is_ok()) created_.push_back(name);
  return t;
}

Status DistBackend::destroy_tensor(const std::string& name) {
  created_.erase(std::remove(created_.begin(), created_.end(), name), created_.end());
  DGLD_ASSIGN_OR_RETURN(auto t, client::DistTensor::open(*cluster_, name));
  return t.destroy(o_.collective_timeout).with_context("deleting DistTensor '" + name + "'");
}

Result<std::unique_ptr<EmbeddingStore>> DistBackend::create_embedding_store(const std::vector<int64_t>& dims,
                                                                            uint64_t seed) {
  std::vector<client::DistTensor> tables;
  for (size_t i = 0; i < dims.size(); ++i) {
    DGLD_ASSIGN_OR_RETURN(auto t, create_tensor(fmt::format("dgld.{}.embedding.{}", run_id_, i), dims[i],
                                                i == 0 ? client::Init::uniform : client::Init::zeros, seed));
    tables.push_back(std::move(t));
  }
  return std::unique_ptr<EmbeddingStore>(
      new DistEmbeddingStore(std::move(tables), *coll_, RowOwners(cluster_->partition_book(), machine_of_rank_)));
}

Status DistBackend::count_correct(std::span<const int64_t> nodes, const torch::Tensor& logits,
                                  EvalCounts& counts) const {
  DGLD_ASSIGN_OR_RETURN(auto labels_t, graph_->ndata(labelled(c_.label)));
  DGLD_ASSIGN_OR_RETURN(auto labels, labels_t.pull_as<int64_t>(nodes));
  const auto pred = logits.argmax(1);
  const int64_t* p = pred.data_ptr<int64_t>();
  for (const char* mask : {"val_mask", "test_mask"}) {
    auto mt = graph_->ndata(labelled(mask));
    if (!mt.is_ok()) continue;  // no such split
    DGLD_ASSIGN_OR_RETURN(auto m, mt->pull_as<uint8_t>(nodes));
    int64_t& correct = mask[0] == 'v' ? counts.val_correct : counts.test_correct;
    int64_t& total = mask[0] == 'v' ? counts.val_total : counts.test_total;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!m[i]) continue;
      ++total;
      correct += p[i] == labels[i] ? 1 : 0;
    }
  }
  return Status::ok();
}

Result<EvalCounts> DistBackend::layerwise(Model& model, const Layer0Input& input, const LayerwiseRequest& request) {
  const int round = eval_round_++;
  // The training loader's spare feature buffers are not needed until the
  // next epoch: evaluation's chunks take their place instead of adding to them.
  // They were allocated by the loader's threads, in their own malloc arenas,
  // which this thread's allocations cannot reuse: handed back to the system.
  if (const size_t idle = loader_ ? loader_->release_idle_buffers() : 0; idle > 0) {
    trim_heap();
    if (log_->should_log(spdlog::level::debug)) {  // reading /proc only when it is logged
      log_->debug("layer-wise evaluation: released {:.1f} MiB of idle feature buffers; {}",
                  static_cast<double>(idle) / (1 << 20), describe(read_process_memory()));
    }
  }
  client::DistNeighborSource source(*cluster_);
  MultiLayerNeighborSampler full({c_.eval_fan_out});
  const GraphTypeInfo& types = cluster_->config().types;
  if (types.present()) {
    full.set_etype_fanouts({std::vector<int64_t>(static_cast<size_t>(types.num_etypes()), c_.eval_fan_out)});
  }
  // Each node's sampled in-edges, once: they size the chunks (eval_chunks.h).
  if (eval_in_edges_.size() != eval_nodes_.size()) {
    auto deg = graph_->in_degrees(eval_nodes_);
    if (!deg.is_ok()) return deg.status().with_context("layer-wise evaluation: in-degrees");
    eval_in_edges_ = eval_in_edges(std::move(*deg), c_.eval_fan_out, types.present() ? types.num_etypes() : 1);
  }
  // The last layer's output is needed for the labelled type only (unless kept).
  std::vector<int64_t> target_nodes, target_in_edges;
  if (target_type_ >= 0) {
    const auto& book = cluster_->partition_book();
    for (size_t i = 0; i < eval_nodes_.size(); ++i) {
      if (book.node_type(eval_nodes_[i]) != target_type_) continue;
      target_nodes.push_back(eval_nodes_[i]);
      target_in_edges.push_back(eval_in_edges_[i]);
    }
  }
  const std::vector<EvalLayerWidths> widths = eval_layer_widths(model);
  const int64_t budget = c_.eval_memory_mb << 20;
  {
    // Every trainer refuses a budget too small for any trainer's nodes, alike.
    EvalChunker::Need need = EvalChunker::smallest_budget(eval_nodes_, eval_in_edges_, widths);
    auto most = torch::tensor({need.bytes}, torch::kInt64);
    DGLD_RETURN_IF_ERROR(coll_->allreduce(most, Reduce::max, "layer-wise evaluation: memory budget"));
    if (most.item<int64_t>() > need.bytes) need = {most.item<int64_t>(), -1, 0, 0};
    DGLD_RETURN_IF_ERROR(EvalChunker::check_budget(need, budget));
  }
  std::optional<client::DistTensor> features;
  if (feat_dim_ > 0) {
    DGLD_ASSIGN_OR_RETURN(features, graph_->ndata(c_.feature));
  }
  EvalCounts counts;
  const int L = model.num_layers();
  auto kept = [&](int l) { return std::find(request.keep.begin(), request.keep.end(), l) != request.keep.end(); };
  // outs[l]: layer l's output for every node, while a later layer or the
  // caller still needs it.
  std::vector<std::optional<client::DistTensor>> outs(static_cast<size_t>(L));
  std::vector<float> rows;
  EvalChunkStats stats;
  for (int l = 0; l < L; ++l) {
    const bool last = l == L - 1;
    auto& cur = outs[static_cast<size_t>(l)];
    if (!last || kept(l)) {
      DGLD_ASSIGN_OR_RETURN(cur, create_tensor(fmt::format("dgld.{}.eval{}.h{}", run_id_, round, l),
                                               model.impl().layer_out_dim(l), client::Init::zeros, 0));
    }
    const bool targets_only = last && !kept(l) && target_type_ >= 0;
    const std::vector<int64_t>& nodes = targets_only ? target_nodes : eval_nodes_;
    EvalChunker chunker(targets_only ? target_in_edges : eval_in_edges_, widths[static_cast<size_t>(l)], budget,
                        c_.batch_size_eval);
    const SampleChunk sample = [&](std::span<const int64_t> chunk) -> Result<MiniBatch> {
      auto batch = full.sample(source, chunk, 0);
      if (!batch.is_ok()) return batch.status().with_context(fmt::format("layer {}: sampling", l));
      return batch;
    };
    const ComputeChunk compute = [&](std::span<const int64_t> chunk, MiniBatch& batch) -> Status {
      auto bt = make_block_graph(batch.blocks[0], types.num_etypes());
      if (!bt.is_ok()) return bt.status().with_context(fmt::format("layer {}", l));
      const auto& src = batch.input_nodes;
      const int64_t n = static_cast<int64_t>(src.size());
      torch::Tensor h_src;
      if (l == 0) {
        rows.resize(static_cast<size_t>(n * feat_dim_));
        if (features) DGLD_RETURN_IF_ERROR(features->pull_into(src, rows.data()).with_context("layer 0: features"));
        std::vector<client::TypedRows> typed;
        if (!typed_features_.empty()) {
          DGLD_ASSIGN_OR_RETURN(typed, client::pull_typed_rows(*cluster_, typed_features_, src));
        }
        DGLD_ASSIGN_OR_RETURN(h_src, input(src, rows_tensor(rows, n, feat_dim_), typed));
      } else {
        const auto& prev = outs[static_cast<size_t>(l - 1)];
        h_src = torch::empty({n, prev->shape()[1]}, torch::kFloat32);
        DGLD_RETURN_IF_ERROR(
            prev->pull_into(src, h_src.data_ptr<float>()).with_context(fmt::format("layer {}: inputs", l)));
      }
      auto h = model.impl().forward_layer(l, *bt, h_src).contiguous();
      if (last && request.count) DGLD_RETURN_IF_ERROR(count_correct(chunk, h, counts));
      if (cur) {
        DGLD_RETURN_IF_ERROR(cur->push(chunk, h.data_ptr<float>()).with_context(fmt::format("layer {}: outputs", l)));
      }
      return Status::ok();
    };
    DGLD_RETURN_IF_ERROR(for_each_eval_chunk(chunker, nodes, sample, compute));
    stats.record(chunker);
    if (log_->should_log(spdlog::level::debug)) {
      log_->debug("layer-wise evaluation: layer {} done; {}", l, describe(read_process_memory()));
    }
    std::vector<float>().swap(rows);
    // Layer l is complete everywhere before anyone reads it.
    auto one = torch::ones({1}, torch::kInt64);
    DGLD_RETURN_IF_ERROR(coll_->allreduce(one, Reduce::sum, fmt::format("layer-wise inference: layer {} barrier", l)));
    if (l > 0 && outs[static_cast<size_t>(l - 1)] && !kept(l - 1)) {
      DGLD_RETURN_IF_ERROR(destroy_tensor(outs[static_cast<size_t>(l - 1)]->name()));
      outs[static_cast<size_t>(l - 1)].reset();
    }
  }
  log_->info("layer-wise evaluation: {}", stats.describe(c_.eval_memory_mb));
  for (const int l : request.keep) {
    auto& out = outs[static_cast<size_t>(l)];
    if ((rank() == 0 || request.every_rank) && request.on_kept) {
      const RowReader read = [&out](std::span<const int64_t> ids, float* dst) { return out->pull_into(ids, dst); };
      DGLD_RETURN_IF_ERROR(request.on_kept(l, out->shape()[1], read));
    }
    auto one = torch::ones({1}, torch::kInt64);
    DGLD_RETURN_IF_ERROR(
        coll_->allreduce(one, Reduce::sum, fmt::format("layer-wise inference: layer {} used", l)));
  }
  for (auto& out : outs) {
    if (out) DGLD_RETURN_IF_ERROR(destroy_tensor(out->name()));
  }
  if (!request.count) return counts;
  auto t = torch::tensor({counts.val_correct, counts.val_total, counts.test_correct, counts.test_total},
                         torch::kInt64);
  DGLD_RETURN_IF_ERROR(coll_->allreduce(t, Reduce::sum, "evaluation: counts"));
  return EvalCounts{t[0].item<int64_t>(), t[1].item<int64_t>(), t[2].item<int64_t>(), t[3].item<int64_t>()};
}

Status DistBackend::original_node_ids(int64_t start, int64_t count, int64_t* out) {
  DGLD_ASSIGN_OR_RETURN(auto t, graph_->ndata("orig_id"));
  std::vector<int64_t> ids(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) ids[static_cast<size_t>(i)] = start + i;
  return t.pull_into(ids, out);
}

}  // namespace dgld::trainer::dist
