#pragma once
// DistDataLoader: DGL's DistDataLoader over a trainer's training seeds. Each
// epoch cuts the (optionally shuffled) seeds into batches and turns each
// batch into a finished mini-batch (blocks, input features, seed labels),
// either on sampler-worker processes (SampleBatch requests, docs/formats.md)
// or, with no workers, on the trainer's own threads. Both run the same
// BatchBuilder, and a batch's random stream depends only on (seed, epoch,
// batch id), so a batch is identical wherever it was made.
//
// Up to `prefetch` batches are in flight or waiting to be taken. A worker that
// drops its connection, fails a request or misses the batch deadline is
// dead: its outstanding batches go back to the queue and are made by the
// other workers, or by the trainer's threads when none is left, so an epoch
// still yields every seed exactly once. The loader borrows its Cluster, which
// must outlive it; its methods are for one consumer thread.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/client/batch_slots.h"
#include "common/client/dist_graph.h"
#include "common/client/dist_tensor.h"
#include "common/net/message.h"
#include "common/sampling/multi_layer_sampler.h"
#include "common/status.h"

namespace dgld {
class BufferPool;
class ThreadPool;
}

namespace dgld::client {

class Cluster;

// What to make of a batch of seeds.
struct BatchSpec {
  std::vector<int64_t> fanouts{10, 25};  // input layer first (DGL's order)
  bool replace = false;
  std::string feature = "features";  // float32 node tensor; empty: no features
  std::string label = "labels";      // int64 node tensor; empty: no labels
  // Remote feature rows kept in this process (row_cache.h); 0: none.
  size_t feature_cache_bytes = 0;
  // Heterogeneous graphs (docs/heterogeneous.md): etype_fanouts[i][r] is block
  // i's fanout for edge type r, and the blocks keep each edge's type; empty:
  // `fanouts` over all edges. `feature` then names a per-type tensor
  // ("features" reads "<ntype>/features" of every type that has one) and the
  // rows come in Batch::typed_features; `label` names the target type's
  // tensor in full ("paper/labels").
  std::vector<std::vector<int64_t>> etype_fanouts;
};

// The input rows of one node type of a heterogeneous batch.
struct TypedRows {
  int ntype = -1;
  std::vector<int64_t> index;  // positions in input_nodes of this type's nodes, ascending
  std::vector<float> rows;     // index.size() rows of dim floats
  int64_t dim = 0;
};

struct BatchTimings {
  double sample_s = 0;  // sampling the blocks (on whoever made the batch)
  double fetch_s = 0;   // pulling features and labels
  double wait_s = 0;    // the consumer blocked in next() for this batch
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
  int worker = -1;  // sampler endpoint index that made it; -1: the trainer
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
  // With skip_features_of >= 0, features holds only the rows of input nodes
  // that machine does not own (features_skipped_machine says so).
  Result<Batch> build(int64_t batch_id, std::span<const int64_t> seeds, uint64_t rng_seed,
                      int skip_features_of = -1) const;
  // build() in two halves, for a caller that places the rows itself: the
  // blocks (timings.sample_s set), then the features and labels of those
  // blocks, into a Batch's own buffers ...
  // With `exclude`, edges between its pairs are left out of the blocks.
  Result<Batch> sample(int64_t batch_id, std::span<const int64_t> seeds, uint64_t rng_seed,
                       const EdgePairSet* exclude = nullptr) const;
  Status fetch(Batch& batch, int skip_features_of = -1) const;
  // ... or into `rows` (input nodes x feature_dim() floats) and `labels`
  // (one per seed), each ignored when the spec has no such tensor.
  Status fetch_into(const Batch& batch, float* rows, int64_t* labels) const;
  int64_t feature_dim() const;  // 0 without features
  const BatchSpec& spec() const { return spec_; }
  // Rows served from the feature cache / requested because not cached (0, 0 without one).
  std::pair<uint64_t, uint64_t> feature_cache_hits_misses() const;

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
// The rows of `ids` (homogeneous node ids), grouped by node type: one
// TypedRows per tensor of `tensors` that has nodes among the ids.
Result<std::vector<TypedRows>> pull_typed_rows(Cluster& cluster, const std::vector<DistTensor>& tensors,
                                               std::span<const int64_t> ids);


// The SampleBatch / SampleBatchReply messages (schemas/sampler.fbs).
// `reply_slot`: the requester's shared-memory slot to write the batch into
// (batch_slots.h); empty: none.
net::OutMessage encode_sample_batch(int64_t batch_id, std::span<const int64_t> seeds, uint64_t rng_seed,
                                    const BatchSpec& spec, int skip_features_of = -1,
                                    const std::string& reply_slot = "");
// Moves the batch's arrays into the reply's blobs. `slot_bytes_needed` > 0:
// the request's slot was too small by that much (the batch is sent anyway).
net::OutMessage encode_sample_batch_reply(Batch&& batch, int64_t slot_bytes_needed = 0);
// The reply to a request whose batch was written into its slot: sizes only.
net::OutMessage encode_slot_batch_reply(const Batch& batch);
// Writes the blocks, and leaves room for the rows and labels, of `batch` in
// `slot` (of `slot_bytes`) at the offsets of batch_slot_layout(); returns
// the layout, or the bytes needed (layout.total > slot_bytes, nothing
// written).
Result<BatchLayout> write_blocks_to_slot(const Batch& batch, std::byte* slot, size_t slot_bytes);
// Checks every size against the reply table; protocol_error naming `peer`.
// Feature rows go into a buffer from `buffers` when given. A reply whose
// batch is in a slot needs the lease of that slot (`slot`): the blocks and
// labels are copied out, the feature rows stay (Batch::slot_features).
Result<Batch> decode_sample_batch_reply(net::Message&& reply, const std::string& peer,
                                        const std::shared_ptr<BufferPool>& buffers = nullptr,
                                        BatchSlots::Lease* slot = nullptr);
// slot_bytes_needed of a reply (0 when absent or not a SampleBatchReply).
int64_t slot_bytes_needed(const net::Message& reply);
// Completes a batch whose features_skipped_machine is the caller's machine:
// the missing rows are copied from the machine's shared memory.
Status fill_skipped_features(Cluster& cluster, const std::string& feature, Batch& batch,
                             const std::string& peer);

// The rng seed of batch `batch_id` of `epoch` under the loader's `seed`.
uint64_t batch_rng_seed(uint64_t seed, int epoch, int64_t batch_id);

struct DataLoaderOptions {
  int64_t batch_size = 1000;
  bool shuffle = true;  // permutation from (seed, epoch)
  bool drop_last = false;
  uint64_t seed = 0;  // shuffling and sampling
  BatchSpec spec;
  int prefetch = 4;            // batches in flight or ready, at most
  // Workers leave out the feature rows of nodes the trainer's machine owns,
  // and the trainer copies those from its shared memory (as DGL's trainers
  // read local features); false: workers send every row.
  bool local_features_from_shm = true;
  bool deterministic = true;   // yield batches in batch-id order
  // "host:port" of sampler-workers (num_samplers = its size); empty: the
  // trainer makes every batch itself.
  std::vector<std::string> samplers;
  int local_threads = 1;  // trainer threads making batches (with workers: only once all died)
  // Sampler-workers write batches into shared-memory slots of this process
  // (batch_slots.h) instead of sending them, when they run on this machine;
  // false: always through the socket.
  bool shared_memory_batches = true;
  // Nice value of those threads (0: the process's). The trainer runs them at
  // 10, so that on a machine with fewer cores than busy threads the model
  // step, which every trainer waits for at the allreduce, takes the cores
  // first and sampling fills the time it leaves.
  int local_thread_nice = 0;
  ThreadPool* pool = nullptr;  // borrowed, for the local threads' local sampling; null: none
  std::chrono::milliseconds batch_timeout{30000};   // a worker's deadline per batch
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds next_timeout{120000};   // longest next() waits for one batch
};

struct DataLoaderStats {
  int64_t batches_by_workers = 0, batches_by_trainer = 0, reissued = 0;
  int live_workers = 0;
};

class DistDataLoader {
 public:
  // Connects to every sampler endpoint (an error names the unreachable one).
  static Result<std::unique_ptr<DistDataLoader>> create(Cluster& cluster,
                                                        std::vector<int64_t> train_ids,
                                                        DataLoaderOptions options);
  ~DistDataLoader();  // shutdown()
  DistDataLoader(const DistDataLoader&) = delete;
  DistDataLoader& operator=(const DistDataLoader&) = delete;

  // ceil (or floor with drop_last) of seeds / batch_size.
  int64_t num_batches_per_epoch() const;
  // Starts epoch `epoch`; what is left of the previous one is dropped.
  void start_epoch(int epoch);
  // The next batch of the epoch, nullopt once all were yielded, or the error
  // that made a batch impossible (the trainer's own attempt failed too).
  Result<std::optional<Batch>> next();
  // The same, waiting at most `timeout` for the batch.
  Result<std::optional<Batch>> next(std::chrono::milliseconds timeout);
  // Waits up to `max_wait` until next() would not block (a batch is ready,
  // the epoch is over or failed); false when the time ran out first. For a
  // caller that must do something between waits (a Python binding checking
  // for Ctrl-C).
  bool wait_ready(std::chrono::milliseconds max_wait);
  DataLoaderStats stats() const;
  // Stops making batches: closes the sampler-worker connections and joins
  // every thread (a thread in a server call returns when the call does).
  // Idempotent; next() fails afterwards.
  void shutdown();
  // Of the trainer's own batches (not the workers'): remote feature rows
  // served from the feature cache, and requested.
  std::pair<uint64_t, uint64_t> feature_cache_hits_misses() const;

  struct Impl;

 private:
  explicit DistDataLoader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgld::client
