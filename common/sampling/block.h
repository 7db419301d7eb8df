#pragma once
// A block (DGL's message-flow graph) for one GNN layer: a bipartite graph
// from src_nodes to dst_nodes, relabelled to local indices. src_nodes starts
// with dst_nodes, in the same order, followed by the other neighbours in order
// of first appearance, so a layer can read h_dst = h_src[:num_dst]. Edges are
// stored as CSR over destinations: dst local index d has in-edges
// indices[indptr[d] .. indptr[d+1]) (local src indices) with global ids eids[...],
// in the order they were given.

#include <cstdint>
#include <span>
#include <vector>

#include "common/sampling/neighbor_sampling.h"
#include "common/status.h"

namespace dgld {

struct Block {
  std::vector<int64_t> dst_nodes;  // global ids
  std::vector<int64_t> src_nodes;  // global ids; dst_nodes first
  std::vector<int64_t> indptr;     // [num_dst + 1]
  std::vector<int64_t> indices;    // [num_edges] local src index
  std::vector<int64_t> eids;       // [num_edges] global edge ids
  std::vector<int32_t> etypes;     // [num_edges] edge type ids; empty for a homogeneous graph

  int64_t num_dst() const { return static_cast<int64_t>(dst_nodes.size()); }
  int64_t num_src() const { return static_cast<int64_t>(src_nodes.size()); }
  int64_t num_edges() const { return static_cast<int64_t>(eids.size()); }
};

// Builds the block for `dst_nodes` (unique global ids) from sampled edges in
// global ids, whose dst must all be among dst_nodes. invalid_argument on a
// repeated dst node, an edge whose dst is not a dst node, or arrays of
// different lengths. Keeps its relabelling table per thread between calls
// (dropped after a block whose table grew past 16 MiB).
// node_id_range > 0 says the ids lie in [0, node_id_range) (the graph's node
// count): up to IdMap::kMaxDirectRange the relabelling reads an array indexed
// by id instead of hashing (8 bytes per id, kept per thread); an id outside
// the range is still relabelled, by the hash.
// Edges already grouped by dst in dst_nodes' order (what the samplers emit)
// are relabelled in place: the block takes over `edges`' arrays, so building
// it needs no second copy of them. Otherwise they are sorted into CSR order
// and `edges` is left as it was, as it is on an error.
Result<Block> build_block(std::span<const int64_t> dst_nodes, SampledEdges&& edges, int64_t node_id_range = 0);
// The same over a copy of `edges`.
Result<Block> build_block(std::span<const int64_t> dst_nodes, const SampledEdges& edges,
                          int64_t node_id_range = 0);

}  // namespace dgld
