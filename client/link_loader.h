#pragma once
// DistEdgeDataLoader: DGL's DistEdgeDataLoader with an edge-prediction
// sampler, over a trainer's training edges (edge_split of "train_mask").
// Each epoch cuts the (optionally shuffled) edges into batches; a batch is
//   - its positive edges (u, v) and k negative destinations per positive,
//     (u, v') with v' drawn uniformly over every node ("uniform") or over the
//     nodes this machine owns ("local-uniform", as GraphStorm offers); on a
//     heterogeneous graph over the nodes of v's type (DGL's Uniform draws an
//     edge type's negatives among its destination type's nodes);
//     with exclude_positives a draw that hits v itself, another positive of
//     the batch or a held-out (validation / test) edge is redrawn;
//   - the blocks of the union of all those endpoints, sampled with the
//     fanouts, with the batch's positive edges and their reverses removed
//     from every block (DGL's exclude='reverse_id', by endpoints), so the
//     model cannot read the answer;
//   - the input nodes' features.
// A batch depends only on (seed, epoch, batch id). Batches are made on the
// trainer's own threads, `prefetch` ahead, and handed out in order; the
// Cluster must outlive the loader.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/data_loader.h"
#include "common/sampling/multi_layer_sampler.h"
#include "common/status.h"

namespace dgld::client {

class Cluster;

enum class NegativeSampler { uniform, local_uniform };
// "uniform" | "local-uniform"; invalid_argument otherwise.
Result<NegativeSampler> parse_negative_sampler(const std::string& name);

struct LinkLoaderOptions {
  int64_t batch_size = 1000;  // positive edges per batch
  bool shuffle = true;
  uint64_t seed = 0;
  // fanouts (input layer first), replace, prob, and exclude: seed_edges
  // removes the batch's positive edges from its blocks, and their reverses
  // with exclude_reverse (DGL's exclude='reverse_id'; without it 'self').
  SamplingSpec sampling;
  bool exclude_reverse = true;
  std::string feature = "features";  // empty: no features
  size_t feature_cache_bytes = 0;    // remote feature rows kept here (row_cache.h)
  std::shared_ptr<const RowCache> shared_feature_cache;  // built already: used instead (BatchSpec)
  int num_negatives = 1;             // per positive edge
  NegativeSampler negative_sampler = NegativeSampler::uniform;
  bool exclude_positives = false;
  // Held-out positives negatives must avoid (with exclude_positives); null: none.
  std::shared_ptr<const EdgePairSet> held_out;
  int threads = 2;
  int thread_nice = 0;
  int prefetch = 4;
  std::chrono::milliseconds next_timeout{120000};
};

struct LinkBatch {
  // batch.mini_batch.seeds: every endpoint (positive and negative), unique;
  // the blocks over them, the input nodes' features (no labels).
  Batch batch;
  // Rows of the seeds: positive i is (pos_u[i], pos_v[i]); its negatives are
  // (pos_u[i], neg_v[i * k + j]) for j < k.
  std::vector<int64_t> pos_u, pos_v, neg_v;
  std::vector<int64_t> pos_eid;  // the positive edges' (homogeneous) ids
  int num_negatives = 0;
};

class DistEdgeDataLoader {
 public:
  // Looks up the endpoints of every training edge (find_edges) and opens the
  // feature tensor.
  static Result<std::unique_ptr<DistEdgeDataLoader>> create(Cluster& cluster, std::vector<int64_t> train_eids,
                                                            LinkLoaderOptions options);
  ~DistEdgeDataLoader();
  DistEdgeDataLoader(const DistEdgeDataLoader&) = delete;
  DistEdgeDataLoader& operator=(const DistEdgeDataLoader&) = delete;

  int64_t num_batches_per_epoch() const;
  int64_t num_edges() const;
  // Starts epoch `epoch` at batch `first_batch` (as DistDataLoader's).
  void start_epoch(int epoch, int64_t first_batch = 0);
  // The next batch of the epoch, nullopt after the last; waits at most
  // `timeout` (default: the options' next_timeout).
  Result<std::optional<LinkBatch>> next();
  Result<std::optional<LinkBatch>> next(std::chrono::milliseconds timeout);
  // Waits up to `max_wait` until next() would not block (for a caller that
  // checks for Ctrl-C between waits).
  bool wait_ready(std::chrono::milliseconds max_wait);
  // Makes batch `batch_id` of `epoch` on the calling thread (what the
  // prefetching threads run); for tests.
  Result<LinkBatch> make(int epoch, int64_t batch_id) const;
  int feature_dim() const;

  struct Impl;

 private:
  explicit DistEdgeDataLoader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgld::client
