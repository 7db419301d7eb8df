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

// The batch itself (BatchSpec, Batch, BatchBuilder) is in batch_builder.h,
// the sampler protocol in sampler_protocol.h.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/batch_builder.h"
#include "client/sampler_protocol.h"
#include "common/status.h"

namespace dgld {
class ThreadPool;
}

namespace dgld::client {

class Cluster;

struct DataLoaderOptions {
  int64_t batch_size = 1000;
  bool shuffle = true;  // permutation from (seed, epoch)
  bool drop_last = false;
  uint64_t seed = 0;  // shuffling and sampling
  BatchSpec spec;
  int prefetch = 4;            // batches in flight or ready, at most
  // And at most this many bytes of them (batch_bytes; batches in flight count
  // as the largest batch seen so far); 0: no byte bound. The batch the
  // consumer waits for is always made, so one batch is in flight at least.
  size_t prefetch_bytes = 0;
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
  int max_ahead = 0;  // most batches in flight or ready at once (prefetch, prefetch_bytes bound it)
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
  // Starts epoch `epoch` at batch `first_batch` (a run resumed mid-epoch:
  // the epoch's order depends on (seed, epoch) only, so the batches before
  // it are the ones already trained); what is left of the previous epoch is
  // dropped.
  void start_epoch(int epoch, int64_t first_batch = 0);
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
  // What the loader holds: its feature cache, the largest batch made so far,
  // and the idle feature buffers kept for reuse (bytes).
  struct Memory {
    size_t feature_cache = 0, largest_batch = 0, idle_buffers = 0;
  };
  Memory memory() const;
  // Frees the feature buffers kept for the next batches (between epochs,
  // before evaluation); returns their bytes.
  size_t release_idle_buffers();

  struct Impl;

 private:
  explicit DistDataLoader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgld::client
