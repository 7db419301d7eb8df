#pragma once
// Neighbour sampling on one adjacency view, with DGL's sample_neighbors
// semantics. For each seed row: degree 0 gives nothing; fanout -1 gives every
// neighbour; without replacement a fanout >= degree gives every neighbour and
// otherwise `fanout` distinct edges; with replacement exactly `fanout` draws.
// With edge weights, picks are proportional to weight, zero-weight edges are
// never picked and "every neighbour" means every positive-weight one.
//
// Reproducible: each seed draws from its own random stream, derived from
// (rng_seed, the seed's stream key), so the output does not depend on the
// thread count, on the other seeds, or (with global ids as keys) on the
// partition the row lives in. Output is grouped by seed, in seed order.

#include <cstdint>
#include <span>
#include <vector>

#include "common/graph/csc.h"
#include "common/status.h"

namespace dgld {

class ThreadPool;

struct SampleOptions {
  int64_t fanout = -1;  // -1: all neighbours; otherwise >= 0
  bool replace = false;
  uint64_t rng_seed = 0;
  // Heterogeneous graphs (DGL's fanout dict): etype_fanouts[r] for the edges of
  // type r (-1: all, 0: none), sampled separately per type from the seed's
  // edges of that type, each type from its own random stream; `fanout` is then
  // unused and SampleExtras::etypes is required. Empty: one fanout over all edges.
  std::vector<int64_t> etype_fanouts;
};

// Sampled edges as parallel arrays, ready to send: edge i goes from src[i]
// (the neighbour) to dst[i] (the seed) and has global edge id eid[i]. dst is
// empty when the caller took per-seed counts instead (SampleExtras).
struct SampledEdges {
  std::vector<int64_t> src, dst, eid;
  std::vector<int32_t> etype;  // per-edge-type sampling only: the type of each edge

  size_t size() const { return eid.size(); }
  void reserve(size_t n);
  void append(const SampledEdges& other);
};

struct SampleExtras {
  std::span<const float> weights;        // parallel to adj.indices; empty: uniform
  std::span<const int32_t> etypes;       // parallel to adj.indices, each row sorted; with etype_fanouts
  std::span<const int64_t> stream_keys;  // parallel to seeds; empty: the seed rows
  ThreadPool* pool = nullptr;            // null: run on the calling thread
  // When set: receives each seed's edge count, and the output's dst is left
  // empty (the counts say which seed each edge belongs to).
  std::vector<int64_t>* seed_counts = nullptr;
};

// Samples in-neighbours (for CSC) of each row in `seed_rows`. src/dst are in
// the view's id space (src = adj.indices[...], dst = the seed row). Errors:
// invalid_argument for a seed outside [0, num_rows), fanout < -1, a weights or
// stream_keys array of the wrong length, or a negative / non-finite weight on
// a seed's edges; resource_exhausted past 2^31 - 1 edges in one call.
Result<SampledEdges> sample_neighbors(const AdjacencyView& adj, std::span<const int64_t> seed_rows,
                                      const SampleOptions& opt, const SampleExtras& extras = {});

// ids[i] = local_to_global[ids[i]] in place; invalid_argument if an id is out
// of the table's range (ids are then left partly mapped).
Status map_to_global(std::span<int64_t> ids, std::span<const int64_t> local_to_global);

}  // namespace dgld
