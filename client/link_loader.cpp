#include "client/link_loader.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include <fmt/format.h>

#include "client/cluster.h"
#include "client/dist_graph.h"
#include "client/prefetch.h"
#include "common/random.h"

namespace dgld::client {

namespace {
using Clock = std::chrono::steady_clock;
// Redraws of one negative before it is kept as drawn (a node whose every
// candidate is excluded cannot stall the batch).
constexpr int kMaxRedraws = 64;
}  // namespace

Result<NegativeSampler> parse_negative_sampler(const std::string& name) {
  if (name == "uniform") return NegativeSampler::uniform;
  if (name == "local-uniform" || name == "local_uniform") return NegativeSampler::local_uniform;
  return invalid_argument("unknown negative sampler '" + name + "' (known: uniform, local-uniform)");
}

// The nodes negatives are drawn from (of one node type on a heterogeneous
// graph): id ranges, drawn from uniformly over their union.
struct NegativePool {
  std::vector<IdRange> ranges;
  std::vector<int64_t> ends;  // running total of the sizes
  uint64_t total() const { return ends.empty() ? 0 : static_cast<uint64_t>(ends.back()); }
  void add(IdRange r) {
    if (r.size() <= 0) return;
    ranges.push_back(r);
    ends.push_back((ends.empty() ? 0 : ends.back()) + r.size());
  }
  int64_t draw(StreamRng& rng) const {
    const auto k = static_cast<int64_t>(rng.below(total()));
    const size_t i = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), k) - ends.begin());
    return ranges[i].start + (k - (i == 0 ? 0 : ends[i - 1]));
  }
};

struct DistEdgeDataLoader::Impl {
  Cluster* cluster = nullptr;
  LinkLoaderOptions o;
  std::vector<int64_t> eids, src, dst;  // each training edge and its endpoints
  std::unique_ptr<BatchBuilder> builder;
  std::vector<NegativePool> neg_pools;  // by node type (one on a homogeneous graph)
  std::vector<int32_t> dst_type;        // heterogeneous graphs: each training edge's destination type
  int epoch = -1;
  std::vector<int64_t> order;  // this epoch's edge positions
  std::unique_ptr<OrderedPrefetcher<LinkBatch>> prefetcher;

  Status make_negative_pools();

  int64_t num_batches() const {
    const int64_t n = static_cast<int64_t>(src.size());
    return (n + o.batch_size - 1) / o.batch_size;
  }

  std::vector<int64_t> epoch_order(int e) const {
    std::vector<int64_t> ord(src.size());
    for (size_t i = 0; i < ord.size(); ++i) ord[i] = static_cast<int64_t>(i);
    if (o.shuffle && ord.size() > 1) {
      StreamRng rng(o.seed, 0x11c0000ull + static_cast<uint64_t>(e));
      seeded_shuffle(std::span<int64_t>(ord), rng);
    }
    return ord;
  }

  Result<LinkBatch> make(int e, const std::vector<int64_t>& ord, int64_t batch_id) const {
    const int64_t n = static_cast<int64_t>(ord.size());
    const int64_t start = batch_id * o.batch_size, end = std::min(n, start + o.batch_size);
    if (start >= end) return invalid_argument(fmt::format("link batch {} of epoch {} is empty", batch_id, e));
    const uint64_t rng_seed = batch_rng_seed(o.seed, e, batch_id);
    StreamRng rng(rng_seed, 0x4e6567ull);  // the negatives' own stream
    const auto t0 = Clock::now();
    LinkBatch lb;
    lb.num_negatives = o.num_negatives;
    std::vector<int64_t> nodes;
    std::unordered_map<int64_t, int64_t> row;
    auto row_of = [&](int64_t v) {
      auto [it, fresh] = row.emplace(v, static_cast<int64_t>(nodes.size()));
      if (fresh) nodes.push_back(v);
      return it->second;
    };
    // The batch's positive edges, both ways (what negatives avoid, and what
    // exclude_reverse keeps out of the blocks); `own_edges` them one way
    // (what leaves the blocks without exclude_reverse, DGL's 'self').
    const bool exclude = o.sampling.exclude == SamplingSpec::Exclude::seed_edges;
    EdgePairSet positives, own_edges(/*directed=*/true);
    positives.reserve(static_cast<size_t>(end - start));
    for (int64_t i = start; i < end; ++i) {
      const int64_t p = ord[static_cast<size_t>(i)];
      const int64_t u = src[static_cast<size_t>(p)], v = dst[static_cast<size_t>(p)];
      positives.add(u, v);
      if (exclude && !o.exclude_reverse) own_edges.add(u, v);
      lb.pos_u.push_back(row_of(u));
      lb.pos_v.push_back(row_of(v));
      lb.pos_eid.push_back(eids[static_cast<size_t>(p)]);
    }
    lb.neg_v.reserve(static_cast<size_t>((end - start) * o.num_negatives));
    for (int64_t i = start; i < end; ++i) {
      const int64_t p = ord[static_cast<size_t>(i)];
      const int64_t u = src[static_cast<size_t>(p)], v = dst[static_cast<size_t>(p)];
      const NegativePool& pool = neg_pools[dst_type.empty() ? 0 : static_cast<size_t>(dst_type[static_cast<size_t>(p)])];
      for (int j = 0; j < o.num_negatives; ++j) {
        int64_t w = pool.draw(rng);
        if (o.exclude_positives) {
          for (int tries = 0; tries < kMaxRedraws && (w == v || positives.contains(u, w) ||
                                                      (o.held_out && o.held_out->contains(u, w)));
               ++tries) {
            w = pool.draw(rng);
          }
        }
        lb.neg_v.push_back(row_of(w));
      }
    }
    const EdgePairSet* excluded = !exclude ? nullptr : o.exclude_reverse ? &positives : &own_edges;
    auto b = builder->sample(batch_id, nodes, rng_seed, excluded);
    if (!b.is_ok()) return b.status().with_context(fmt::format("link batch {} of epoch {}", batch_id, e));
    lb.batch = std::move(b).value();
    DGLD_RETURN_IF_ERROR(builder->fetch(lb.batch).with_context(fmt::format("link batch {} of epoch {}", batch_id, e)));
    lb.batch.timings.sample_s = std::chrono::duration<double>(Clock::now() - t0).count() - lb.batch.timings.fetch_s;
    return lb;
  }
};

DistEdgeDataLoader::DistEdgeDataLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DistEdgeDataLoader::~DistEdgeDataLoader() { impl_->prefetcher.reset(); }

Result<std::unique_ptr<DistEdgeDataLoader>> DistEdgeDataLoader::create(Cluster& cluster,
                                                                        std::vector<int64_t> train_eids,
                                                                        LinkLoaderOptions options) {
  if (options.batch_size < 1) return invalid_argument("link loader: batch size must be >= 1");
  if (options.num_negatives < 0) return invalid_argument("link loader: the number of negatives must be >= 0");
  if (train_eids.empty()) return invalid_argument("link loader: this trainer has no training edges");
  auto impl = std::make_unique<Impl>();
  impl->cluster = &cluster;
  impl->o = std::move(options);
  const LinkLoaderOptions& o = impl->o;
  DistGraph g(cluster);
  DGLD_ASSIGN_OR_RETURN(Edges e, g.find_edges(train_eids));
  impl->eids = std::move(train_eids);
  impl->src = std::move(e.src);
  impl->dst = std::move(e.dst);
  BatchSpec spec;
  spec.sampling = o.sampling;
  spec.feature = o.feature;
  spec.label = "";
  spec.feature_cache_bytes = o.feature_cache_bytes;
  spec.shared_feature_cache = o.shared_feature_cache;
  DGLD_ASSIGN_OR_RETURN(impl->builder, BatchBuilder::create(cluster, spec));
  DGLD_RETURN_IF_ERROR(impl->make_negative_pools());
  return std::unique_ptr<DistEdgeDataLoader>(new DistEdgeDataLoader(std::move(impl)));
}

// Every node ("uniform") or this machine's ("local-uniform"); on a
// heterogeneous graph one pool per node type, and each training edge's
// destination type. An error names a destination type with no node to draw.
Status DistEdgeDataLoader::Impl::make_negative_pools() {
  const PartitionConfig& config = cluster->config();
  const bool local = o.negative_sampler == NegativeSampler::local_uniform;
  const int machine = cluster->machine_id();
  const char* where = local ? " on this machine" : "";
  if (!config.types.present()) {
    neg_pools.resize(1);
    neg_pools[0].add(local ? cluster->partition_book().node_range(machine) : IdRange{0, config.num_nodes});
    if (neg_pools[0].total() == 0) return invalid_argument(fmt::format("link loader: no nodes{} to draw negatives from", where));
    return Status::ok();
  }
  const GraphTypeInfo& t = config.types;
  neg_pools.resize(static_cast<size_t>(t.num_ntypes()));
  struct Owner { IdRange r; int32_t type; };
  std::vector<Owner> owners;  // every type's ranges, by start
  for (int32_t ty = 0; ty < t.num_ntypes(); ++ty) {
    const auto& parts = t.ntype_map[static_cast<size_t>(ty)];
    for (size_t p = 0; p < parts.size(); ++p) {
      if (!local || static_cast<int>(p) == machine) neg_pools[static_cast<size_t>(ty)].add(parts[p]);
      if (parts[p].size() > 0) owners.push_back({parts[p], ty});
    }
  }
  std::sort(owners.begin(), owners.end(), [](const Owner& a, const Owner& b) { return a.r.start < b.r.start; });
  dst_type.resize(dst.size());
  for (size_t i = 0; i < dst.size(); ++i) {
    auto it = std::upper_bound(owners.begin(), owners.end(), dst[i],
                               [](int64_t v, const Owner& w) { return v < w.r.start; });
    if (it == owners.begin() || dst[i] >= std::prev(it)->r.end) {
      return invalid_argument(fmt::format("link loader: node {} (the end of edge {}) has no node type", dst[i], eids[i]));
    }
    const int32_t ty = std::prev(it)->type;
    if (neg_pools[static_cast<size_t>(ty)].total() == 0) {
      return invalid_argument(fmt::format("link loader: no nodes of type {}{} to draw negatives of edge {} from",
                                          t.ntypes[static_cast<size_t>(ty)], where, eids[i]));
    }
    dst_type[i] = ty;
  }
  return Status::ok();
}

int64_t DistEdgeDataLoader::num_batches_per_epoch() const { return impl_->num_batches(); }
int64_t DistEdgeDataLoader::num_edges() const { return static_cast<int64_t>(impl_->src.size()); }
int DistEdgeDataLoader::feature_dim() const { return static_cast<int>(impl_->builder->feature_dim()); }

void DistEdgeDataLoader::start_epoch(int epoch, int64_t first_batch) {
  Impl& s = *impl_;
  s.prefetcher.reset();  // what is left of the previous epoch
  s.epoch = epoch;
  s.order = s.epoch_order(epoch);
  s.prefetcher = std::make_unique<OrderedPrefetcher<LinkBatch>>(
      s.num_batches(), [&s, epoch](int64_t id) { return s.make(epoch, s.order, id); }, s.o.threads, s.o.prefetch,
      s.o.thread_nice, std::clamp<int64_t>(first_batch, 0, s.num_batches()));
}

Result<std::optional<LinkBatch>> DistEdgeDataLoader::next() { return next(impl_->o.next_timeout); }

bool DistEdgeDataLoader::wait_ready(std::chrono::milliseconds max_wait) {
  return !impl_->prefetcher || impl_->prefetcher->wait_ready(max_wait);
}

Result<std::optional<LinkBatch>> DistEdgeDataLoader::next(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  if (!s.prefetcher) return invalid_argument("link loader: next() before start_epoch()");
  const auto t0 = Clock::now();
  auto r = s.prefetcher->next(timeout, fmt::format("link batches of epoch {}", s.epoch));
  if (r.is_ok() && r->has_value()) {
    (*r)->batch.timings.wait_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return r;
}

Result<LinkBatch> DistEdgeDataLoader::make(int epoch, int64_t batch_id) const {
  return impl_->make(epoch, impl_->epoch_order(epoch), batch_id);
}

}  // namespace dgld::client
