#pragma once
// Multi-layer neighbour sampling for mini-batch GNN training, as DGL's
// dataloading.NeighborSampler: start from the batch's seeds at the output
// layer, sample each layer's neighbours, build its block, and take the
// block's src_nodes as the next (inner) layer's seeds.
//
// Fanout order is DGL's: fanouts[i] is the fanout of blocks[i], and blocks[0]
// is the input layer. DGL's GraphSAGE example passes `--fan_out 10,25` as
// NeighborSampler([10, 25]), so the input layer samples 10 neighbours per node
// and the output layer (the batch's seeds) 25.
//
// Where neighbours come from is a NeighborSource: a LocalGraphSource over an
// in-memory adjacency here, a client that asks the graph servers elsewhere.

#include <cstdint>
#include <functional>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/graph/csc.h"
#include "common/sampling/block.h"
#include "common/sampling/neighbor_sampling.h"
#include "common/sampling/sampling_spec.h"
#include "common/status.h"

namespace dgld {

// Samples neighbours of seeds given as global ids and returns the edges in
// global ids (dst = the seed), grouped by seed in seed order where possible.
// Implementations say whether they may be called from several threads.
class NeighborSource {
 public:
  virtual ~NeighborSource() = default;
  virtual Result<SampledEdges> sample(std::span<const int64_t> seeds_global,
                                      const SampleOptions& opt) = 0;
  // The global ids lie in [0, node_id_range()) (the graph's node count); 0:
  // not known. Lets build_block relabel by direct lookup.
  virtual int64_t node_id_range() const { return 0; }
};

// Samples from an adjacency view held in this process: the whole graph (rows
// are global ids) or one partition (rows are local ids, mapped through
// local_to_global). Random streams are keyed by global seed id, so a seed
// gets the same edges from either, provided its neighbours are listed in the
// same order. Borrows the view, the table, the weights and the pool: they must
// outlive the source. Safe to call from several threads.
struct LocalSourceOptions {
  std::span<const float> weights;  // per edge of the view; empty: uniform
  std::span<const int32_t> etypes;  // per edge of the view (rows sorted); for per-type fanouts
  ThreadPool* pool = nullptr;      // null: sample on the calling thread
};

class LocalGraphSource final : public NeighborSource {
 public:
  // Maps a global seed id to its local row, or -1 when the row is not here.
  using GlobalToLocal = std::function<int64_t(int64_t)>;
  using Options = LocalSourceOptions;

  explicit LocalGraphSource(const AdjacencyView& adj, Options options = {});
  LocalGraphSource(const AdjacencyView& adj, std::span<const int64_t> local_to_global,
                   GlobalToLocal global_to_local, Options options = {});

  Result<SampledEdges> sample(std::span<const int64_t> seeds_global,
                              const SampleOptions& opt) override;
  // The view's rows when they are the global ids; not known otherwise.
  int64_t node_id_range() const override { return local_to_global_.empty() ? adj_.num_rows() : 0; }

 private:
  AdjacencyView adj_;
  std::span<const int64_t> local_to_global_;  // empty: rows are global
  GlobalToLocal global_to_local_;
  Options options_;
};

// Unordered node pairs {u, v}: the edges u -> v and v -> u. What a link
// prediction batch must not contain (its seed edges and their reverses, DGL's
// exclude='reverse_id' by endpoints, which also drops parallel copies), and
// the held-out positives a negative sampler must not draw. A directed set
// holds the edges u -> v alone (DGL's exclude='self': the batch's own edges,
// their reverses kept).
class EdgePairSet {
 public:
  explicit EdgePairSet(bool directed = false) : directed_(directed) {}
  void add(int64_t u, int64_t v) { pairs_.insert(key(u, v)); }
  bool contains(int64_t u, int64_t v) const { return !pairs_.empty() && pairs_.count(key(u, v)) > 0; }
  bool empty() const { return pairs_.empty(); }
  size_t size() const { return pairs_.size(); }
  void reserve(size_t n) { pairs_.reserve(n); }

 private:
  struct Hash {
    size_t operator()(const std::pair<int64_t, int64_t>& p) const {
      return std::hash<uint64_t>()(static_cast<uint64_t>(p.first) * 0x9E3779B97F4A7C15ULL ^
                                   static_cast<uint64_t>(p.second));
    }
  };
  std::pair<int64_t, int64_t> key(int64_t u, int64_t v) const {
    return directed_ || u < v ? std::pair{u, v} : std::pair{v, u};
  }
  bool directed_ = false;
  std::unordered_set<std::pair<int64_t, int64_t>, Hash> pairs_;
};

struct MiniBatch {
  std::vector<int64_t> seeds;        // the batch: blocks.back().dst_nodes
  std::vector<Block> blocks;         // blocks[0] is the input layer
  std::vector<int64_t> input_nodes;  // blocks[0].src_nodes: whose features to fetch
};

// Multi-layer sampling by a SamplingSpec (sampling_spec.h). The spec's
// direction and prob are the NeighborSource's business (it was made for
// them); this class walks the layers.
class MultiLayerNeighborSampler {
 public:
  explicit MultiLayerNeighborSampler(SamplingSpec spec);
  // fanouts[i] >= -1 for block i (input layer first); -1 takes all neighbours.
  explicit MultiLayerNeighborSampler(std::vector<int64_t> fanouts, bool replace = false);

  // Samples the blocks of one batch of unique global seed ids. Layer i draws
  // with rng seed derive_seed(rng_seed, i); vary rng_seed per batch and epoch.
  // invalid_argument for a spec that does not validate or repeated seeds; the
  // source's errors are passed on with the layer named.
  // With `exclude`, sampled edges between a pair of the set are dropped
  // before each block is built (as DGL removes excluded edges after sampling).
  Result<MiniBatch> sample(NeighborSource& source, std::span<const int64_t> seeds,
                           uint64_t rng_seed, const EdgePairSet* exclude = nullptr) const;

  // Heterogeneous graphs: etype_fanouts[i][r] is block i's fanout for edge
  // type r (DGL's fanout dicts); the blocks then keep each edge's type.
  void set_etype_fanouts(std::vector<std::vector<int64_t>> etype_fanouts) {
    spec_.etype_fanouts = std::move(etype_fanouts);
  }
  const SamplingSpec& spec() const { return spec_; }
  const std::vector<std::vector<int64_t>>& etype_fanouts() const { return spec_.etype_fanouts; }
  const std::vector<int64_t>& fanouts() const { return spec_.fanouts; }
  bool replace() const { return spec_.replace; }

 private:
  SamplingSpec spec_;
};

}  // namespace dgld
