#pragma once
// The relabelling dgl-partition applies once every node has its piece: new
// (global) node ids are partition-major, then trainer piece, then original
// id, so each partition owns one range of node ids and, its nodes' in-edges
// numbered in order, one range of edge ids (docs/partition-format.md, "Ids").
// A heterogeneous graph's edge ids are partition-major, then by edge type, then
// in-edge (CSC) order, so each type's edges of a partition are one range (DGL's
// layout); its in-edge CSC stays ordered by destination.

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
  std::vector<std::vector<IdRange>> etype_map;  // heterogeneous: [etype][part]
  // The edge id of each new CSC slot (new_indptr positions) when it is not
  // the slot itself: heterogeneous graphs, and one partition keeping the
  // input's edge ids (build_layout).
  std::vector<int64_t> slot_eid;

  explicit Layout(const GraphData& graph) : g(graph) {}
  // New (global) id of the edge at original CSC position `pos` of row `orig_dst`.
  int64_t new_eid(int64_t orig_dst, int64_t pos) const {
    const int64_t slot = new_indptr[orig2new[orig_dst]] + (pos - g.indptr[orig_dst]);
    return slot_eid.empty() ? slot : slot_eid[slot];
  }
};

// Fills L's maps from L->piece (set by the caller) for `trainers` pieces per
// partition. Heterogeneous graphs: partition-major, then node type, then
// trainer piece, then original id, so each type's nodes of a partition are
// one range.
//
// One partition keeps the input's ids, as DGL's partition_graph does: node
// ids are the original ones (trainer pieces are then told by trainer_id
// alone), and with keep_edge_ids (the caller's word that the original edge
// ids are [0, E) once each: no edges held out) edge ids are the original ones
// too, numbered off the CSC order through slot_eid (a typed graph's only when
// its original ids run type by type, as its per-type ranges need).
void build_layout(int trainers, Layout* L, bool keep_edge_ids = false);

}  // namespace dgld
