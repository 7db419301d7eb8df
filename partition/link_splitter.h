#pragma once
// Link-prediction edge splits for dgl-partition (docs/formats.md, "Link split").
//
// apply_link_split works on the loaded graph before partitioning. With
// --link-split TRAIN,VALID,TEST it shuffles the graph's edges (seeded by --seed)
// and holds out the VALID and TEST fractions; with an OGB edge split in the input
// (GraphData::edge_split) it holds out the listed valid and test edges. Held-out
// edges are removed from the graph (both directions when the graph is symmetric),
// the remaining training edges are marked in GraphData::edge_train_mask, and every
// held-out edge gets K negative destinations: listed in the input, or drawn
// uniformly (seeded) from the nodes v' != u with (u, v') neither an edge of the
// input graph nor a held-out edge.
//
// Units: on a symmetric graph (GraphData::symmetric_simple) the undirected edge
// {u, v}, held out as u -> v with u < v and marked in the train mask once, as its
// u -> v direction; otherwise the distinct directed edge (u, v) (parallel copies go
// together), and every remaining edge is marked.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "partition/graph_data.h"

namespace dgld {

struct LinkSplitOptions {
  bool random = false;                    // --link-split given
  std::array<double, 3> fractions{};      // train, valid, test
  int64_t num_negatives = -1;             // --link-negatives; -1: not given (100)
  uint64_t seed = 0;                      // --seed
};

inline constexpr int64_t kDefaultLinkNegatives = 100;

// Parses "TRAIN,VALID,TEST" (each >= 0, summing to 1 within 1e-6); errors name --link-split.
Result<std::array<double, 3>> parse_link_split_fractions(const std::string& text);
// Checks fractions and negatives (errors name the flags).
Status check_link_split_options(const LinkSplitOptions& o);

// Held-out edges of one set in original node ids; neg holds k per edge.
struct HeldOutEdges {
  std::vector<int32_t> src, dst, neg;
  int64_t size() const { return static_cast<int64_t>(src.size()); }
};

struct LinkSplitResult {
  bool present = false;
  std::string source;              // "random" or "ogb:<name>"
  std::vector<double> fractions;   // random only
  uint64_t seed = 0;
  int64_t num_negatives = 0;
  int64_t num_train = 0;           // edges marked in g->edge_train_mask
  bool symmetric = true;
  int64_t removed_edges = 0;       // CSC entries removed from the graph
  HeldOutEdges valid, test;
};

// Applies --link-split or the input's OGB edge split to `g` (see above). Without
// either, out->present is false and `g` is unchanged. `what` names the input in
// messages.
Status apply_link_split(const LinkSplitOptions& o, const std::string& what, GraphData* g, LinkSplitResult* out);

}  // namespace dgld
