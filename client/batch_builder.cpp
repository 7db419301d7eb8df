#include "client/batch_builder.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "client/cluster.h"
#include "client/row_cache.h"
#include "common/buffer_pool.h"
#include "common/random.h"

namespace dgld::client {

using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

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

Result<std::vector<TypedRows>> pull_typed_rows(Cluster& cluster, const std::vector<DistTensor>& tensors,
                                               std::span<const int64_t> ids) {
  const RangePartitionBook& book = cluster.partition_book();
  std::vector<int> slot(static_cast<size_t>(std::max(1, book.num_ntypes())), -1);
  std::vector<TypedRows> out;
  for (const DistTensor& t : tensors) {
    slot[static_cast<size_t>(t.ntype())] = static_cast<int>(out.size());
    TypedRows r;
    r.ntype = t.ntype();
    r.dim = t.shape()[1];
    out.push_back(std::move(r));
  }
  std::vector<std::vector<int64_t>> type_ids(out.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int type = book.node_type(ids[i]);
    if (type < 0) return invalid_argument("node id " + std::to_string(ids[i]) + " is not a node of the graph");
    const int s = slot[static_cast<size_t>(type)];
    if (s < 0) continue;
    out[static_cast<size_t>(s)].index.push_back(static_cast<int64_t>(i));
    type_ids[static_cast<size_t>(s)].push_back(ids[i]);
  }
  for (size_t s = 0; s < out.size(); ++s) {
    out[s].rows.resize(type_ids[s].size() * static_cast<size_t>(out[s].dim));
    DGLD_RETURN_IF_ERROR(tensors[s].pull_into(type_ids[s], out[s].rows.data()));
  }
  // Types with no node among the ids are left out.
  out.erase(std::remove_if(out.begin(), out.end(), [](const TypedRows& r) { return r.index.empty(); }), out.end());
  return out;
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
    // "_E/w"), or a DistTensor's own name. It must be float32, one per edge;
    // the sampler is given the tensor's full name.
    Result<DistTensor> w = g.edata(spec.sampling.prob);
    if (!w.is_ok()) {
      if (auto own = DistTensor::open(cluster, spec.sampling.prob); own.is_ok()) w = std::move(own);
    }
    if (!w.is_ok()) return w.status().with_context("sampling prob '" + spec.sampling.prob + "'");
    if (w->policy() != Policy::edge || w->dtype() != DType::float32 || w->row_bytes() != sizeof(float)) {
      return invalid_argument("sampling prob '" + spec.sampling.prob + "' must be a float32 edge tensor with one "
                              "value per edge, is a " + dtype_name(w->dtype()) +
                              (w->policy() == Policy::edge ? " edge" : " node") + " tensor");
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
    if (spec.feature_cache_bytes > 0) {
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
  const auto t0 = Clock::now();
  auto mb = sampler_.sample(*source_, seeds, rng_seed, exclude);
  if (!mb.is_ok()) return mb.status().with_context("batch " + std::to_string(batch_id));
  out.mini_batch = std::move(*mb);
  out.timings.sample_s = seconds_since(t0);
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
  const auto t1 = Clock::now();
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
    if (Status st = feature_->pull_unique_into(rows, out.features.data()); !st.is_ok()) {
      return st.with_context("features of batch " + std::to_string(out.batch_id));
    }
  }
  if (label_) {
    auto l = label_->pull_as<int64_t>(out.mini_batch.seeds);
    if (!l.is_ok()) return l.status().with_context("labels of batch " + std::to_string(out.batch_id));
    out.labels = std::move(*l);
  }
  out.timings.fetch_s = seconds_since(t1);
  return Status::ok();
}

Status BatchBuilder::fetch_into(const Batch& batch, float* rows, int64_t* labels) const {
  if (feature_) {
    if (Status st = feature_->pull_unique_into(batch.mini_batch.input_nodes, rows); !st.is_ok()) {
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

Result<Batch> BatchBuilder::build(int64_t batch_id, std::span<const int64_t> seeds,
                                  uint64_t rng_seed, int skip_features_of) const {
  if (skip_features_of >= cluster_->num_machines()) {
    return invalid_argument("batch " + std::to_string(batch_id) + ": skip_features_of machine " +
                            std::to_string(skip_features_of) + " does not exist");
  }
  DGLD_ASSIGN_OR_RETURN(Batch out, sample(batch_id, seeds, rng_seed));
  DGLD_RETURN_IF_ERROR(fetch(out, skip_features_of));
  return out;
}

std::pair<uint64_t, uint64_t> BatchBuilder::feature_cache_hits_misses() const {
  if (!feature_ || !feature_->row_cache()) return {0, 0};
  return {feature_->row_cache()->hits(), feature_->row_cache()->misses()};
}

// ---------------------------------------------------------------- wire

uint64_t batch_rng_seed(uint64_t seed, int epoch, int64_t batch_id) {
  return derive_seed(derive_seed(seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(batch_id));
}

}  // namespace dgld::client
