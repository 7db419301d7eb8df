#include "client/data_loader.h"

#include <sys/resource.h>
#include <unistd.h>

#include "common/buffer_pool.h"
#include "common/cpu_time.h"
#include "client/row_cache.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "client/cluster.h"
#include "common/logging.h"
#include "common/memory.h"
#include "common/net/io_threads.h"
#include "common/net/rpc_client.h"
#include "client/local_partition.h"
#include "common/random.h"
#include "common/shm/shared_tensor.h"
#include "schemas/rpc_generated.h"
#include "schemas/sampler_generated.h"

namespace dgld::client {

using Clock = std::chrono::steady_clock;

namespace {

// A full-neighbourhood batch above this (layer-wise inference's) is followed
// by a heap trim in the thread that made it.
constexpr size_t kTrimAfterBatchBytes = size_t{64} << 20;
// The same between such a batch's sampling and its features, once its blocks
// are this large: the sampled edges they were built from (more bytes than
// the blocks) are freed, and their pages go back before the feature rows
// are allocated, rather than adding to the rows at the batch's peak.
constexpr size_t kTrimAfterSampleBytes = size_t{16} << 20;

// Whether some layer takes every neighbour (fanout -1): batches whose size
// no fanout bounds, as layer-wise inference's.
bool samples_every_neighbour(const SamplingSpec& s) {
  auto unbounded = [](const std::vector<int64_t>& f) { return std::any_of(f.begin(), f.end(), [](int64_t k) { return k < 0; }); };
  return unbounded(s.fanouts) || std::any_of(s.etype_fanouts.begin(), s.etype_fanouts.end(), unbounded);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// "host:port" -> (host, port).
Result<std::pair<std::string, uint16_t>> split_endpoint(const std::string& ep) {
  const auto colon = ep.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return invalid_argument("sampler endpoint '" + ep + "' is not host:port");
  }
  try {
    size_t used = 0;
    const std::string p = ep.substr(colon + 1);
    const long port = std::stol(p, &used);
    if (used != p.size() || port < 1 || port > 65535) throw std::invalid_argument(p);
    return std::make_pair(ep.substr(0, colon), static_cast<uint16_t>(port));
  } catch (const std::exception&) {
    return invalid_argument("sampler endpoint '" + ep + "' has no valid port");
  }
}

}  // namespace

// ---------------------------------------------------------------- DistDataLoader

struct DistDataLoader::Impl {
  Cluster* cluster = nullptr;
  DataLoaderOptions o;
  std::vector<int64_t> train_ids;
  std::unique_ptr<BatchBuilder> builder;  // the trainer's own
  // Feature buffers of every batch, recycled by the consumer (prefetch
  // batches plus the ones being made and consumed).
  std::shared_ptr<BufferPool> buffers;
  std::unique_ptr<net::IoThreads> io;
  struct Remote {
    std::string endpoint;
    std::shared_ptr<net::RpcClient> client;
    bool alive = true;
    std::shared_ptr<BatchSlots> slots;  // null: batches come in the replies
    std::shared_ptr<std::atomic<bool>> slots_refused = std::make_shared<std::atomic<bool>>(false);
  };
  std::vector<Remote> remotes;

  struct Task {
    int64_t batch_id = -1;
    int epoch = -1;
    uint64_t generation = 0;  // which start_epoch() it belongs to
    std::shared_ptr<const std::vector<int64_t>> order;
  };

  mutable std::mutex mu;
  std::condition_variable cv;
  int epoch = -1;
  uint64_t generation = 0;                            // bumped by every start_epoch()
  std::shared_ptr<const std::vector<int64_t>> order;  // this epoch's seeds, permuted
  std::set<int64_t> todo;                             // batch ids not handed out
  int in_flight = 0;
  std::map<int64_t, Batch> ready;
  size_t ready_bytes = 0;     // batch_bytes of `ready`
  size_t largest_batch = 0;   // batch_bytes of the largest batch made so far
  int64_t next_id = 0;  // deterministic: the next batch id to yield
  int64_t delivered = 0;
  std::optional<Status> fatal;
  bool stop = false;
  int live = 0;
  DataLoaderStats stats;
  std::vector<std::thread> threads;

  int64_t num_batches() const {
    const int64_t n = static_cast<int64_t>(train_ids.size()), bs = o.batch_size;
    return o.drop_last ? n / bs : (n + bs - 1) / bs;
  }

  std::span<const int64_t> seeds_of(const Task& t) const {
    const int64_t n = static_cast<int64_t>(t.order->size());
    const int64_t b = t.batch_id * o.batch_size;
    return std::span<const int64_t>(*t.order).subspan(static_cast<size_t>(b),
                                                       static_cast<size_t>(std::min(o.batch_size, n - b)));
  }

  // Waits for a batch this thread may make; false when it should exit.
  // `remote` < 0: a trainer thread (works only while no worker is alive).
  bool take(int remote, Task& t) {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      if (stop) return false;
      if (remote >= 0 && !remotes[remote].alive) return false;
      const bool eligible = remote >= 0 || live == 0;
      if (eligible && !todo.empty()) {
        const int64_t first = *todo.begin();
        const int ahead = in_flight + static_cast<int>(ready.size());
        // Under a byte bound, one batch at a time until a batch's size is known.
        const bool bytes_ok =
            o.prefetch_bytes == 0 ||
            (largest_batch == 0 ? ahead == 0
                                : ready_bytes + static_cast<size_t>(in_flight + 1) * largest_batch <= o.prefetch_bytes);
        const bool credit = ahead < o.prefetch && bytes_ok;
        // The batch the consumer waits for is always handed out, so a
        // re-issued early batch cannot be starved by later ready ones.
        if (credit || (o.deterministic && first == next_id)) {
          todo.erase(todo.begin());
          ++in_flight;
          stats.max_ahead = std::max(stats.max_ahead, in_flight + static_cast<int>(ready.size()));
          t = Task{first, epoch, generation, order};
          return true;
        }
      }
      cv.wait_for(lk, std::chrono::seconds(1));
    }
  }

  void complete(const Task& t, Batch&& b, int remote) {
    std::lock_guard<std::mutex> lk(mu);
    --in_flight;
    if (t.generation == generation) {
      b.worker = remote;
      ++(remote >= 0 ? stats.batches_by_workers : stats.batches_by_trainer);
      const size_t bytes = batch_bytes(b);
      largest_batch = std::max(largest_batch, bytes);
      ready_bytes += bytes;
      ready.emplace(t.batch_id, std::move(b));
    }
    cv.notify_all();
  }

  void requeue(const Task& t) {
    std::lock_guard<std::mutex> lk(mu);
    --in_flight;
    if (t.generation == generation) {
      todo.insert(t.batch_id);
      ++stats.reissued;
    }
    cv.notify_all();
  }

  // Every worker builds its sampler and feature cache for this spec now, all
  // at once, instead of in the first epoch's first batch (which the other
  // trainers then wait for at the allreduce). A worker that fails it is dead
  // from the start: its share goes to the others.
  void prepare_workers() {
    std::vector<net::PendingCall> calls;
    for (Remote& rem : remotes) calls.push_back(rem.client->start(encode_prepare(o.spec)));
    const auto deadline = net::Clock::now() + o.batch_timeout;
    for (size_t r = 0; r < remotes.size(); ++r) {
      auto reply = remotes[r].client->wait(calls[r], deadline);
      if (reply.is_ok()) continue;
      logger("sampler")->warn("sampler-worker {} is treated as dead (preparing it failed: {}); its batches go to the "
                              "others", remotes[r].endpoint, reply.status().to_string());
      remotes[r].alive = false;
      remotes[r].client->close();
    }
  }

  void remote_loop(int r) {
    Remote& rem = remotes[r];
    Task t;
    while (take(r, t)) {
      auto seeds = seeds_of(t);
      // A heterogeneous batch comes with every row (in a slot or through the socket).
      const bool typed = cluster->config().types.present();
      const int skip = o.local_features_from_shm && !o.spec.feature.empty() && !typed ? cluster->machine_id() : -1;
      std::optional<BatchSlots::Lease> slot =
          rem.slots && !rem.slots_refused->load() ? rem.slots->acquire() : std::nullopt;
      auto reply = rem.client->call(encode_sample_batch(t.batch_id, seeds, batch_rng_seed(o.seed, t.epoch, t.batch_id),
                                                        o.spec, skip, slot ? slot->name() : ""),
                                    o.batch_timeout);
      const int64_t needed = reply.is_ok() ? slot_bytes_needed(*reply) : 0;
      Result<Batch> b = reply.is_ok()
                            ? decode_sample_batch_reply(std::move(*reply), rem.endpoint, buffers, slot ? &*slot : nullptr)
                            : Result<Batch>(reply.status());
      const bool in_slot = b.is_ok() && b->from_slot;
      if (b.is_ok() && slot && !in_slot) {
        if (needed > 0) {
          slot->grow_to(static_cast<size_t>(needed));  // the next batch in this slot fits
        } else if (!rem.slots_refused->exchange(true)) {
          logger("sampler")->warn("sampler-worker {} cannot write into this trainer's shared memory (another "
                                  "machine?); its batches come through the socket",
                                  rem.endpoint);
        }
      }
      if (b.is_ok() && b->features_skipped_machine != (in_slot ? -1 : skip)) {
        b = protocol_error("sampler-worker " + rem.endpoint + " did not follow skip_features_of");
      }
      if (b.is_ok() && !in_slot) {
        StageTimer stage;
        if (Status st = fill_skipped_features(*cluster, o.spec.feature, *b, rem.endpoint); !st.is_ok()) {
          b = st;
        } else {
          stage.lap(&b->timings.fetch_s, &b->timings.fetch_cpu_s);  // the trainer's share of the fetch
        }
      }
      if (b.is_ok() && in_slot && o.spec.label.empty()) b->labels.clear();
      if (b.is_ok() && (b->batch_id != t.batch_id || b->mini_batch.seeds.size() != seeds.size())) {
        b = protocol_error("sampler-worker " + rem.endpoint + " answered batch " +
                           std::to_string(b->batch_id) + " for batch " + std::to_string(t.batch_id));
      }
      if (b.is_ok()) {
        complete(t, std::move(*b), r);
        continue;
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        if (rem.alive) {
          rem.alive = false;
          --live;
          stats.live_workers = live;
          if (!stop) logger("sampler")->warn("sampler-worker {} is treated as dead ({}); its batches are re-issued, {} left",
                                  rem.endpoint, b.status().to_string(), live);
        }
      }
      rem.client->close();  // fails this worker's other calls at once
      requeue(t);
      return;
    }
  }

  void local_loop() {
    // Raising a thread's own nice value needs no privilege; should it fail,
    // the thread runs at normal priority, which is only slower.
    if (o.local_thread_nice > 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), o.local_thread_nice);
    // After a full-neighbourhood batch far larger than a training batch
    // (layer-wise inference), the heap its sampling used and freed goes back
    // now rather than staying under the consumer's work on it. Not after a
    // training batch, however large (3 layers of fanouts 15,10,5 make 70 MB
    // ones): the trim unmaps every free page of the process, and the model
    // step that follows faulted them all in again (docs/performance.md, "The
    // model step by operator").
    const bool trim_after_large = samples_every_neighbour(o.spec.sampling);
    Task t;
    while (take(-1, t)) {
      auto b = builder->sample(t.batch_id, seeds_of(t), batch_rng_seed(o.seed, t.epoch, t.batch_id));
      if (b.is_ok()) {
        if (trim_after_large && batch_bytes(*b) > kTrimAfterSampleBytes) trim_heap();
        if (Status st = builder->fetch(*b); !st.is_ok()) b = st;
      }
      if (b.is_ok()) {
        if (trim_after_large && batch_bytes(*b) > kTrimAfterBatchBytes) trim_heap();
        complete(t, std::move(*b), -1);
        continue;
      }
      // The trainer was the last resort: the epoch cannot complete.
      std::lock_guard<std::mutex> lk(mu);
      --in_flight;
      if (t.generation == generation && !fatal) fatal = b.status();
      cv.notify_all();
    }
  }
};

DistDataLoader::DistDataLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DistDataLoader::~DistDataLoader() { shutdown(); }

void DistDataLoader::shutdown() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
    impl_->cv.notify_all();
  }
  for (auto& r : impl_->remotes) r.client->close();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->remotes.clear();
  if (impl_->io) impl_->io->stop();
}

Result<std::unique_ptr<DistDataLoader>> DistDataLoader::create(Cluster& cluster,
                                                               std::vector<int64_t> train_ids,
                                                               DataLoaderOptions options) {
  if (options.batch_size < 1) return invalid_argument("DistDataLoader: batch_size must be >= 1");
  if (options.prefetch < 1) return invalid_argument("DistDataLoader: prefetch must be >= 1");
  if (options.local_threads < 1) return invalid_argument("DistDataLoader: local_threads must be >= 1");
  auto impl = std::make_unique<Impl>();
  impl->cluster = &cluster;
  impl->o = std::move(options);
  impl->buffers = std::make_shared<BufferPool>(static_cast<size_t>(impl->o.prefetch) + 4);
  impl->train_ids = std::move(train_ids);
  // With sampler-workers the trainer makes batches only once every worker
  // died: its builder keeps no feature cache (each worker has its own), so
  // a machine does not pull and hold the same halo rows once more per trainer.
  BatchSpec own = impl->o.spec;
  if (!impl->o.samplers.empty()) {
    own.feature_cache_bytes = 0;
    own.shared_feature_cache = nullptr;
  }
  DGLD_ASSIGN_OR_RETURN(impl->builder, BatchBuilder::create(cluster, own, impl->o.pool, impl->buffers));
  if (!impl->o.samplers.empty()) {
    impl->io = std::make_unique<net::IoThreads>(1);
    net::ConnectOptions co;
    co.timeout = impl->o.connect_timeout;
    co.secret = cluster.secret();
    co.traffic = net::TrafficTag{cluster.traffic(), cluster.machine_id()};  // its own machine's workers
    for (const std::string& ep : impl->o.samplers) {
      DGLD_ASSIGN_OR_RETURN(auto hp, split_endpoint(ep));
      auto c = net::RpcClient::connect(impl->io->context(), hp.first, hp.second, "sampler-worker " + ep, co);
      if (!c.is_ok()) return c.status();
      impl->remotes.push_back(Impl::Remote{ep, std::move(*c), true});
    }
    impl->prepare_workers();
  }
  impl->live = static_cast<int>(std::count_if(impl->remotes.begin(), impl->remotes.end(),
                                               [](const Impl::Remote& r) { return r.alive; }));
  impl->stats.live_workers = impl->live;
  Impl* p = impl.get();
  std::unique_ptr<DistDataLoader> loader(new DistDataLoader(std::move(impl)));
  const int per_worker = std::max(1, p->o.prefetch);
  if (p->o.shared_memory_batches) {
    // Slots for the batches in flight, ready and being trained on; the first
    // batch of each slot comes through the socket and sizes it.
    static std::atomic<int> loaders{0};
    const int loader = loaders++;
    for (int r = 0; r < static_cast<int>(p->remotes.size()); ++r) {
      auto slots = BatchSlots::create(p->cluster->job_id(), p->cluster->machine_id(),
                                      std::to_string(::getpid()) + "." + std::to_string(loader) + "." + std::to_string(r),
                                      p->o.prefetch + 2, size_t{4} << 20);
      if (!slots.is_ok()) {
        logger("sampler")->warn("no shared-memory batch slots for sampler-worker {} ({}); its batches come through "
                                "the socket",
                                p->remotes[r].endpoint, slots.status().to_string());
        continue;
      }
      p->remotes[r].slots = std::move(*slots);
    }
  }
  for (int r = 0; r < static_cast<int>(p->remotes.size()); ++r) {
    for (int k = 0; k < per_worker; ++k) p->threads.emplace_back([p, r] { p->remote_loop(r); });
  }
  for (int k = 0; k < p->o.local_threads; ++k) p->threads.emplace_back([p] { p->local_loop(); });
  return loader;
}

int64_t DistDataLoader::num_batches_per_epoch() const { return impl_->num_batches(); }

std::pair<uint64_t, uint64_t> DistDataLoader::feature_cache_hits_misses() const {
  return impl_->builder->feature_cache_hits_misses();
}

size_t DistDataLoader::release_idle_buffers() { return impl_->buffers->release_idle(); }

DistDataLoader::Memory DistDataLoader::memory() const {
  Memory m;
  m.feature_cache = impl_->builder->feature_cache_bytes();
  m.idle_buffers = impl_->buffers->idle_bytes();
  std::lock_guard<std::mutex> lk(impl_->mu);
  m.largest_batch = impl_->largest_batch;
  return m;
}

void DistDataLoader::start_epoch(int epoch, int64_t first_batch) {
  Impl& s = *impl_;
  auto order = std::make_shared<std::vector<int64_t>>(s.train_ids);
  if (s.o.shuffle && order->size() > 1) {
    StreamRng rng(s.o.seed, 0x5eed0000ull + static_cast<uint64_t>(epoch));
    seeded_shuffle(std::span<int64_t>(*order), rng);
  }
  std::lock_guard<std::mutex> lk(s.mu);
  s.epoch = epoch;
  ++s.generation;
  s.order = std::move(order);
  s.ready.clear();
  s.ready_bytes = 0;
  s.todo.clear();
  first_batch = std::clamp<int64_t>(first_batch, 0, s.num_batches());
  for (int64_t b = first_batch; b < s.num_batches(); ++b) s.todo.insert(b);
  s.next_id = first_batch;
  s.delivered = first_batch;
  s.fatal.reset();
  s.cv.notify_all();
}

Result<std::optional<Batch>> DistDataLoader::next() { return next(impl_->o.next_timeout); }

bool DistDataLoader::wait_ready(std::chrono::milliseconds max_wait) {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lk(s.mu);
  return s.cv.wait_for(lk, max_wait, [&] {
    if (s.stop || s.epoch < 0 || s.fatal || s.delivered >= s.num_batches()) return true;
    return s.o.deterministic ? s.ready.count(s.next_id) > 0 : !s.ready.empty();
  });
}

Result<std::optional<Batch>> DistDataLoader::next(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout;
  std::unique_lock<std::mutex> lk(s.mu);
  if (s.stop) return closed_error("DistDataLoader: shut down");
  if (s.epoch < 0) return invalid_argument("DistDataLoader::next before start_epoch");
  if (s.delivered >= s.num_batches()) return std::optional<Batch>();
  for (;;) {
    if (s.fatal) return *s.fatal;
    auto it = s.o.deterministic ? s.ready.find(s.next_id) : s.ready.begin();
    if (it != s.ready.end()) {
      Batch b = std::move(it->second);
      s.ready.erase(it);
      s.ready_bytes -= batch_bytes(b);
      ++s.delivered;
      if (s.o.deterministic) ++s.next_id;
      s.cv.notify_all();
      b.timings.wait_s = seconds_since(t0);
      return std::optional<Batch>(std::move(b));
    }
    if (s.cv.wait_until(lk, deadline) == std::cv_status::timeout && Clock::now() >= deadline) {
      return timeout_error("DistDataLoader: no batch of epoch " + std::to_string(s.epoch) + " within " +
                           std::to_string(timeout.count()) + " ms (next batch " +
                           std::to_string(s.next_id) + ", " + std::to_string(s.live) +
                           " live sampler-workers, " + std::to_string(s.in_flight) + " in flight)");
    }
  }
}

DataLoaderStats DistDataLoader::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->stats;
}

}  // namespace dgld::client
