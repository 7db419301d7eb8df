#pragma once
// The relabelling dgl-partition applies once every node has its piece: new
// (global) node ids are partition-major, then trainer piece, then original
// id, so each partition owns one range of node ids and, its nodes' in-edges
// numbered in order, one range of edge ids (docs/partition-format.md, "Ids").

#include <cstdint>
#include <vector>

#include "common/part_config.h"
#include "partition/graph_data.h"

namespace dgld {

// The relabelling: new ids are partition-major (then trainer piece, then original id).
struct Layout {
  const GraphData& g;
  int num_parts = 1;
  std::vector<int32_t> piece, part;      // by original id
  std::vector<int32_t> new2orig, orig2new;
  std::vector<int64_t> new_indptr;       // in-edge offsets in new id order = new edge ids
  std::vector<IdRange> node_map, edge_map;
  std::vector<std::vector<IdRange>> ntype_map;  // heterogeneous: [ntype][part]

  explicit Layout(const GraphData& graph) : g(graph) {}
  // New (global) id of the edge at original CSC position `pos` of row `orig_dst`.
  int64_t new_eid(int64_t orig_dst, int64_t pos) const {
    return new_indptr[orig2new[orig_dst]] + (pos - g.indptr[orig_dst]);
  }
};

// Fills L's maps from L->piece (set by the caller) for `trainers` pieces per
// partition. Heterogeneous graphs: partition-major, then node type, then
// trainer piece, then original id, so each type's nodes of a partition are
// one range.
void build_layout(int trainers, Layout* L);

}  // namespace dgld
