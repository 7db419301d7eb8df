#include "client/batch_builder.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "client/cluster.h"
#include "client/row_cache.h"
#include "common/buffer_pool.h"
#include "common/cpu_time.h"
#include "common/random.h"

namespace dgld::client {

// ---------------------------------------------------------------- BatchBuilder

BatchBuilder::BatchBuilder(Cluster& cluster, BatchSpec spec, ThreadPool* pool,
                           std::shared_ptr<BufferPool> buffers)
    : spec_(std::move(spec)),
      buffers_(buffers ? std::move(buffers) : std::make_shared<BufferPool>()),
      source_(std::make_unique<DistNeighborSource>(
          cluster, DistSampleOptions{.out_edges = spec_.sampling.out_edges, .prob = spec_.sampling.prob, .pool = pool})),
      sampler_(spec_.sampling),
      cluster_(&cluster) {}

Result<std::vector<DistTensor>> open_typed_features(Cluster& cluster, const std::string& feature) {
  const GraphTypeInfo& types = cluster.config().types;
  std::vector<DistTensor> out;
  for (int t = 0; t < types.num_ntypes(); ++t) {
    const std::string name = types.ntypes[t] + "/" + feature;
    auto tensor = DistTensor::open(cluster, name);
    if (!tensor.is_ok() && tensor.status().code() == StatusCode::not_found) continue;  // a featureless type
    if (!tensor.is_ok()) return tensor.status();
    if (tensor->dtype() != DType::float32 || tensor->shape().size() != 2) {
      return invalid_argument("feature tensor '" + name + "' must be a float32 matrix, is " +
                              dtype_name(tensor->dtype()));
    }
    out.push_back(std::move(*tensor));
  }
  return out;
}

Result<TypedPlan> plan_typed_rows(const RangePartitionBook& book, const std::vector<DistTensor>& tensors,
                                  std::span<const int64_t> ids) {
  std::vector<int> slot(static_cast<size_t>(std::max(1, book.num_ntypes())), -1);
  TypedPlan all;
  for (size_t k = 0; k < tensors.size(); ++k) {
    slot[static_cast<size_t>(tensors[k].ntype())] = static_cast<int>(k);
    TypedRows r;
    r.ntype = tensors[k].ntype();
    r.dim = tensors[k].shape()[1];
    all.rows.push_back(std::move(r));
  }
  all.ids.resize(tensors.size());
  all.tensor.resize(tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) all.tensor[k] = static_cast<int>(k);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int type = book.node_type(ids[i]);
    if (type < 0) return invalid_argument("node id " + std::to_string(ids[i]) + " is not a node of the graph");
    const int s = slot[static_cast<size_t>(type)];
    if (s < 0) continue;
    all.rows[static_cast<size_t>(s)].index.push_back(static_cast<int64_t>(i));
    all.ids[static_cast<size_t>(s)].push_back(ids[i]);
  }
  // Types with no node among the ids are left out.
  TypedPlan out;
  for (size_t k = 0; k < all.rows.size(); ++k) {
    if (all.rows[k].index.empty()) continue;
    out.rows.push_back(std::move(all.rows[k]));
    out.ids.push_back(std::move(all.ids[k]));
    out.tensor.push_back(all.tensor[k]);
  }
  return out;
}

Status pull_typed_plan(const std::vector<DistTensor>& tensors, const TypedPlan& plan, std::span<float* const> into) {
  for (size_t k = 0; k < plan.rows.size(); ++k) {
    DGLD_RETURN_IF_ERROR(tensors[static_cast<size_t>(plan.tensor[k])].pull_into(plan.ids[k], into[k]));
  }
  return Status::ok();
}

Result<std::vector<TypedRows>> pull_typed_rows(Cluster& cluster, const std::vector<DistTensor>& tensors,
                                               std::span<const int64_t> ids) {
  DGLD_ASSIGN_OR_RETURN(TypedPlan plan, plan_typed_rows(cluster.partition_book(), tensors, ids));
  std::vector<float*> into;
  for (TypedRows& r : plan.rows) {
    r.rows.resize(r.index.size() * static_cast<size_t>(r.dim));
    into.push_back(r.rows.data());
  }
  DGLD_RETURN_IF_ERROR(pull_typed_plan(tensors, plan, into));
  return std::move(plan.rows);
}

Result<std::unique_ptr<BatchBuilder>> BatchBuilder::create(Cluster& cluster, BatchSpec spec,
                                                           ThreadPool* pool, std::shared_ptr<BufferPool> buffers) {
  DGLD_RETURN_IF_ERROR(spec.sampling.validate());
  const bool hetero = cluster.config().types.present();
  if (!spec.sampling.etype_fanouts.empty() && !hetero) {
    return invalid_argument("BatchBuilder: per-edge-type fanouts, but graph '" + cluster.config().graph_name +
                            "' is homogeneous");
  }
  DistGraph g(cluster);
  if (!spec.sampling.prob.empty()) {
    // DGL's prob= names an edge tensor of weights: g.edata's name ("w" for
    // "_E/w"), or a DistTensor's own name. It must be numeric (a bool mask
    // too), one value per edge; the sampler is given the tensor's full name.
    Result<DistTensor> w = g.edata(spec.sampling.prob);
    if (!w.is_ok()) {
      if (auto own = DistTensor::open(cluster, spec.sampling.prob); own.is_ok()) w = std::move(own);
    }
    if (!w.is_ok()) return w.status().with_context("sampling prob '" + spec.sampling.prob + "'");
    if (w->policy() != Policy::edge || w->row_bytes() != dtype_size(w->dtype())) {
      return invalid_argument("sampling prob '" + spec.sampling.prob + "' must be a numeric edge tensor with one "
                              "value per edge, is a " + dtype_name(w->dtype()) +
                              (w->policy() == Policy::edge ? " edge" : " node") + " tensor" +
                              (w->policy() == Policy::edge ? " with several values per edge" : ""));
    }
    spec.sampling.prob = w->name();
  }
  std::unique_ptr<BatchBuilder> b(new BatchBuilder(cluster, spec, pool, std::move(buffers)));
  if (hetero && !spec.feature.empty()) {
    DGLD_ASSIGN_OR_RETURN(b->typed_feature_, open_typed_features(cluster, spec.feature));
  } else if (!spec.feature.empty()) {
    DGLD_ASSIGN_OR_RETURN(DistTensor t, g.ndata(spec.feature));
    if (t.dtype() != DType::float32) {
      return invalid_argument("feature tensor '" + t.name() + "' is " + dtype_name(t.dtype()) +
                              ", not float32");
    }
    if (spec.shared_feature_cache) {
      t.set_row_cache(spec.shared_feature_cache);
    } else if (spec.feature_cache_bytes > 0) {
      DGLD_ASSIGN_OR_RETURN(auto cache, build_halo_row_cache(cluster, t, spec.feature_cache_bytes));
      t.set_row_cache(std::move(cache));
    }
    b->feature_ = std::move(t);
  }
  if (!spec.label.empty()) {
    DGLD_ASSIGN_OR_RETURN(DistTensor t, g.ndata(spec.label));
    if (t.dtype() != DType::int64 || t.row_bytes() != sizeof(int64_t)) {
      return invalid_argument("label tensor '" + t.name() + "' must be int64 with one value per node");
    }
    b->label_ = std::move(t);
  }
  return b;
}

Result<Batch> BatchBuilder::sample(int64_t batch_id, std::span<const int64_t> seeds, uint64_t rng_seed,
                                   const EdgePairSet* exclude) const {
  Batch out;
  out.batch_id = batch_id;
  StageTimer stage;
  net::CallScope scope(&out.traffic.calls);
  auto mb = sampler_.sample(*source_, seeds, rng_seed, exclude);
  if (!mb.is_ok()) return mb.status().with_context("batch " + std::to_string(batch_id));
  out.mini_batch = std::move(*mb);
  stage.lap(&out.timings.sample_s, &out.timings.sample_cpu_s);
  out.feature_dim = feature_dim();
  return out;
}

int64_t BatchBuilder::feature_dim() const {
  return feature_ ? static_cast<int64_t>(feature_->row_bytes() / sizeof(float)) : 0;
}

Status BatchBuilder::fetch(Batch& out, int skip_features_of) const {
  if (skip_features_of >= cluster_->num_machines()) {
    return invalid_argument("batch " + std::to_string(out.batch_id) + ": skip_features_of machine " +
                            std::to_string(skip_features_of) + " does not exist");
  }
  StageTimer stage;
  net::CallScope scope(&out.traffic.calls);
  if (!typed_feature_.empty()) {
    if (skip_features_of >= 0) {
      return invalid_argument("batch " + std::to_string(out.batch_id) + ": a heterogeneous batch sends every "
                              "feature row (skip_features_of must be -1, is " + std::to_string(skip_features_of) + ")");
    }
    auto rows = pull_typed_rows(*cluster_, typed_feature_, out.mini_batch.input_nodes);
    if (!rows.is_ok()) return rows.status().with_context("features of batch " + std::to_string(out.batch_id));
    out.typed_features = std::move(*rows);
  }
  if (feature_) {
    std::span<const int64_t> rows = out.mini_batch.input_nodes;
    std::vector<int64_t> others;  // input nodes the skipped machine does not own
    if (skip_features_of >= 0) {
      const IdRange r = cluster_->partition_book().node_range(skip_features_of);
      for (int64_t v : rows) {
        if (v < r.start || v >= r.end) others.push_back(v);
      }
      rows = others;
      out.features_skipped_machine = skip_features_of;
    }
    out.features = buffers_->take(rows.size() * static_cast<size_t>(out.feature_dim));
    out.features_pool = buffers_;
    if (Status st = feature_->pull_unique_into(rows, out.features.data(), &out.traffic.rows); !st.is_ok()) {
      return st.with_context("features of batch " + std::to_string(out.batch_id));
    }
  }
  if (label_) {
    auto l = label_->pull_as<int64_t>(out.mini_batch.seeds);
    if (!l.is_ok()) return l.status().with_context("labels of batch " + std::to_string(out.batch_id));
    out.labels = std::move(*l);
  }
  stage.lap(&out.timings.fetch_s, &out.timings.fetch_cpu_s);
  return Status::ok();
}

Result<TypedPlan> BatchBuilder::plan_typed(const Batch& batch) const {
  return plan_typed_rows(cluster_->partition_book(), typed_feature_, batch.mini_batch.input_nodes);
}

Status BatchBuilder::fetch_into(const Batch& batch, float* rows, int64_t* labels, const TypedPlan* typed,
                                std::span<float* const> typed_rows, BatchTraffic* traffic) const {
  std::optional<net::CallScope> scope;
  if (traffic) scope.emplace(&traffic->calls);
  if (typed != nullptr) {
    if (Status st = pull_typed_plan(typed_feature_, *typed, typed_rows); !st.is_ok()) {
      return st.with_context("features of batch " + std::to_string(batch.batch_id));
    }
  }
  if (feature_) {
    if (Status st = feature_->pull_unique_into(batch.mini_batch.input_nodes, rows, traffic ? &traffic->rows : nullptr);
        !st.is_ok()) {
      return st.with_context("features of batch " + std::to_string(batch.batch_id));
    }
  }
  if (label_) {
    if (Status st = label_->pull_into(batch.mini_batch.seeds, labels); !st.is_ok()) {
      return st.with_context("labels of batch " + std::to_string(batch.batch_id));
    }
  }
  return Status::ok();
}

std::pair<uint64_t, uint64_t> BatchBuilder::feature_cache_hits_misses() const {
  if (!feature_ || !feature_->row_cache()) return {0, 0};
  return {feature_->row_cache()->hits(), feature_->row_cache()->misses()};
}

size_t BatchBuilder::feature_cache_bytes() const {
  return feature_ && feature_->row_cache() ? feature_->row_cache()->bytes() : 0;
}

// ---------------------------------------------------------------- wire

uint64_t batch_rng_seed(uint64_t seed, int epoch, int64_t batch_id) {
  return derive_seed(derive_seed(seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(batch_id));
}

size_t batch_bytes(const Batch& b) {
  auto bytes = [](const auto& v) { return v.size() * sizeof(v[0]); };
  const MiniBatch& m = b.mini_batch;
  size_t n = bytes(b.features) + bytes(b.labels) + bytes(m.seeds) + bytes(m.input_nodes);
  for (const Block& k : m.blocks) {
    n += bytes(k.dst_nodes) + bytes(k.src_nodes) + bytes(k.indptr) + bytes(k.indices) + bytes(k.eids) + bytes(k.etypes);
  }
  for (const TypedRows& t : b.typed_features) n += bytes(t.index) + bytes(t.rows);
  return n;
}

}  // namespace dgld::client
