#pragma once
// Small owned graphs for the sampling tests: hand-built ones from edge lists
// and random CSC graphs with distinct, shuffled edge ids.

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "common/graph/csc.h"

namespace dgld::test {

struct OwnedGraph {
  std::vector<int64_t> indptr, indices, eids;
  AdjacencyView view() const { return {indptr, indices, eids}; }
  int64_t num_rows() const { return static_cast<int64_t>(indptr.size()) - 1; }
};

// CSC over `n` rows from (src, dst) pairs; edge i gets id 1000 + i, and a
// row lists its in-edges in the order given.
inline OwnedGraph from_edges(int64_t n, const std::vector<std::pair<int64_t, int64_t>>& edges) {
  OwnedGraph g;
  g.indptr.assign(n + 1, 0);
  for (const auto& [s, d] : edges) ++g.indptr[d + 1];
  for (int64_t v = 0; v < n; ++v) g.indptr[v + 1] += g.indptr[v];
  g.indices.resize(edges.size());
  g.eids.resize(edges.size());
  std::vector<int64_t> cursor(g.indptr.begin(), g.indptr.end() - 1);
  for (size_t i = 0; i < edges.size(); ++i) {
    const int64_t at = cursor[edges[i].second]++;
    g.indices[at] = edges[i].first;
    g.eids[at] = 1000 + static_cast<int64_t>(i);
  }
  return g;
}

// Random CSC: degrees uniform in [0, max_degree], neighbours uniform (parallel
// edges possible, told apart by eid), edge ids a shuffled permutation.
inline OwnedGraph random_graph(int64_t n, int64_t max_degree, uint64_t seed) {
  std::mt19937_64 rng(seed);
  OwnedGraph g;
  g.indptr.assign(n + 1, 0);
  for (int64_t v = 0; v < n; ++v) {
    g.indptr[v + 1] = g.indptr[v] + static_cast<int64_t>(rng() % (max_degree + 1));
  }
  const int64_t m = g.indptr[n];
  g.indices.resize(m);
  for (int64_t& u : g.indices) u = static_cast<int64_t>(rng() % n);
  g.eids.resize(m);
  for (int64_t e = 0; e < m; ++e) g.eids[e] = e;
  std::shuffle(g.eids.begin(), g.eids.end(), rng);
  return g;
}

// eid -> (src, dst) of every edge, to check that a sampled edge is real.
inline std::map<int64_t, std::pair<int64_t, int64_t>> edge_table(const OwnedGraph& g) {
  std::map<int64_t, std::pair<int64_t, int64_t>> t;
  for (int64_t v = 0; v < g.num_rows(); ++v) {
    for (int64_t p = g.indptr[v]; p < g.indptr[v + 1]; ++p) t[g.eids[p]] = {g.indices[p], v};
  }
  return t;
}

inline std::vector<int64_t> iota_ids(int64_t n, int64_t first = 0) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = first + i;
  return ids;
}

}  // namespace dgld::test
