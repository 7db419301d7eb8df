#pragma once
// What a mini-batch is and how one is made: BatchSpec (what to make of a
// batch of seeds), Batch (blocks, input feature rows, seed labels) and
// BatchBuilder, which samples the blocks and pulls the rows. The
// sampler-worker and the trainer's own threads run the same BatchBuilder, and
// a batch's random stream depends only on (seed, epoch, batch id), so a batch
// is identical wherever it was made.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "client/dist_graph.h"
#include "client/dist_tensor.h"
#include "common/sampling/multi_layer_sampler.h"
#include "common/net/traffic.h"
#include "common/sampling/sampling_spec.h"
#include "common/status.h"

namespace dgld {
class BufferPool;
class ThreadPool;
}

namespace dgld::client {

class Cluster;
class RowCache;

// What to make of a batch of seeds.
struct BatchSpec {
  SamplingSpec sampling;             // fanouts (input layer first), direction, replace, prob
  std::string feature = "features";  // float32 node tensor; empty: no features
  std::string label = "labels";      // int64 node tensor; empty: no labels
  // Remote feature rows kept in this process (row_cache.h); 0: none.
  size_t feature_cache_bytes = 0;
  // A cache of the same tensor built already (by shared_halo_cache's caller,
  // for every loader of the process): used instead of building one.
  std::shared_ptr<const RowCache> shared_feature_cache;
  // Heterogeneous graphs (docs/heterogeneous.md): sampling.etype_fanouts
  // gives each layer a fanout per edge type and the blocks keep each edge's
  // type. `feature` then names a per-type tensor ("features" reads
  // "<ntype>/features" of every type that has one) and the rows come in
  // Batch::typed_features; `label` names the target type's tensor in full
  // ("paper/labels").
};

// The input rows of one node type of a heterogeneous batch.
struct TypedRows {
  int ntype = -1;
  std::vector<int64_t> index;  // positions in input_nodes of this type's nodes, ascending
  std::vector<float> rows;     // index.size() rows of dim floats
  int64_t dim = 0;
};

// Which rows of `ids` (homogeneous node ids) each of `tensors` holds: per
// tensor with nodes among the ids, a TypedRows with its positions in `ids`
// (rows still empty), those ids and the tensor's index in `tensors`.
struct TypedPlan {
  std::vector<TypedRows> rows;
  std::vector<std::vector<int64_t>> ids;
  std::vector<int> tensor;
};

struct BatchTimings {
  double sample_s = 0;  // sampling the blocks (on whoever made the batch)
  double fetch_s = 0;   // pulling features and labels
  double wait_s = 0;    // the consumer blocked in next() for this batch
  // CPU time of the thread that sampled / fetched (common/cpu_time.h): with
  // more threads than cores, wall time includes waiting for a core.
  double sample_cpu_s = 0;
  double fetch_cpu_s = 0;
};

// What making a batch asked of the network: its RPCs (round trips, bytes
// by peer machine; common/net/traffic.h) and where its input feature rows
// came from.
struct BatchTraffic {
  net::CallCost calls;
  PullRows rows;
};

struct Batch {
  int64_t batch_id = -1;
  MiniBatch mini_batch;         // seeds, blocks (input layer first), input_nodes
  std::vector<float> features;  // input_nodes.size() rows of feature_dim
  // Where `features` came from; whoever is done with them may hand the
  // buffer back (null: nowhere, just free it).
  std::shared_ptr<BufferPool> features_pool;
  int64_t feature_dim = 0;
  std::vector<int64_t> labels;  // one per seed
  // Heterogeneous batches: the feature rows per node type that has features
  // (features stays empty, feature_dim 0).
  std::vector<TypedRows> typed_features;
  BatchTimings timings;
  BatchTraffic traffic;  // of whoever made the batch (a worker's comes in its reply)
  int worker = -1;  // sampler endpoint index that made it; -1: the trainer
  bool from_slot = false;  // a sampler-worker wrote it into a shared-memory slot
  // >= 0 only between a worker and the loader: `features` lacks the rows of
  // the nodes this machine owns (the trainer copies them from shared memory).
  int features_skipped_machine = -1;
  // Set instead of `features` when the rows stay in the sampler-worker's
  // shared-memory slot they were written to (batch_slots.h): the slot is
  // reused once every copy of this pointer is gone.
  std::shared_ptr<const float> slot_features;

  // The input feature rows, wherever they are.
  std::span<const float> feature_rows() const {
    if (slot_features) {
      return {slot_features.get(), mini_batch.input_nodes.size() * static_cast<size_t>(feature_dim)};
    }
    return features;
  }
};

// Bytes a batch holds in this process: its feature rows (none when they stay in
// a sampler-worker's slot), blocks, ids and labels.
size_t batch_bytes(const Batch& b);

// seeds -> Batch: samples with DistNeighborSource + MultiLayerNeighborSampler
// and pulls features and labels with DistTensor. Used by the sampler-worker
// and by the trainer's own threads. Safe to call from several threads.
class BatchBuilder {
 public:
  // Opens the feature and label tensors. `pool` (may be null) is borrowed
  // for local sampling; feature buffers come from `buffers` (null: a private
  // pool). The Cluster must outlive the builder.
  static Result<std::unique_ptr<BatchBuilder>> create(Cluster& cluster, BatchSpec spec,
                                                      ThreadPool* pool = nullptr,
                                                      std::shared_ptr<BufferPool> buffers = nullptr);
  // A batch in two halves (a caller may free memory or place the rows
  // itself between them): the blocks (timings.sample_s set), then the
  // features and labels of those blocks, into a Batch's own buffers ...
  // With `exclude`, edges between its pairs are left out of the blocks.
  Result<Batch> sample(int64_t batch_id, std::span<const int64_t> seeds, uint64_t rng_seed,
                       const EdgePairSet* exclude = nullptr) const;
  // With skip_features_of >= 0, features holds only the rows of input nodes
  // that machine does not own (features_skipped_machine says so).
  Status fetch(Batch& batch, int skip_features_of = -1) const;
  // ... or into `rows` (input nodes x feature_dim() floats) and `labels`
  // (one per seed), each ignored when the spec has no such tensor.
  // A heterogeneous batch: which rows of which type it needs (plan_typed),
  // then fetch_into with `typed` pulls them into typed_rows[k] (one buffer
  // per plan entry, index.size() x dim floats).
  Result<TypedPlan> plan_typed(const Batch& batch) const;
  bool heterogeneous() const { return !typed_feature_.empty(); }
  // The RPCs of both halves are added to batch.traffic (fetch_into: to
  // `traffic` when given).
  Status fetch_into(const Batch& batch, float* rows, int64_t* labels, const TypedPlan* typed = nullptr,
                    std::span<float* const> typed_rows = {}, BatchTraffic* traffic = nullptr) const;
  int64_t feature_dim() const;  // 0 without features
  const BatchSpec& spec() const { return spec_; }
  // Rows served from the feature cache / requested because not cached (0, 0 without one).
  std::pair<uint64_t, uint64_t> feature_cache_hits_misses() const;
  // Bytes of other machines' feature rows kept (0: no cache).
  size_t feature_cache_bytes() const;

 private:
  BatchBuilder(Cluster& cluster, BatchSpec spec, ThreadPool* pool, std::shared_ptr<BufferPool> buffers);
  BatchSpec spec_;
  std::shared_ptr<BufferPool> buffers_;
  std::unique_ptr<DistNeighborSource> source_;
  MultiLayerNeighborSampler sampler_;
  Cluster* cluster_;
  std::optional<DistTensor> feature_, label_;
  std::vector<DistTensor> typed_feature_;  // heterogeneous: one per node type with the feature
};

// The per-type feature tensors "<ntype>/<feature>" of a heterogeneous graph
// (types without one are skipped); invalid_argument for one that is not a
// float32 matrix.
Result<std::vector<DistTensor>> open_typed_features(Cluster& cluster, const std::string& feature);
Result<TypedPlan> plan_typed_rows(const RangePartitionBook& book, const std::vector<DistTensor>& tensors,
                                  std::span<const int64_t> ids);
// Pulls each plan entry's rows into into[k].
Status pull_typed_plan(const std::vector<DistTensor>& tensors, const TypedPlan& plan, std::span<float* const> into);
// The rows of `ids` (homogeneous node ids), grouped by node type: one
// TypedRows per tensor of `tensors` that has nodes among the ids.
Result<std::vector<TypedRows>> pull_typed_rows(Cluster& cluster, const std::vector<DistTensor>& tensors,
                                               std::span<const int64_t> ids);

// The rng seed of batch `batch_id` of `epoch` under the loader's `seed`.
uint64_t batch_rng_seed(uint64_t seed, int epoch, int64_t batch_id);

}  // namespace dgld::client
