#pragma once
// The layout of a partition graph file (docs/partition-format.md): which
// arrays it holds, in which order, with which dtype and length, and what its
// meta array says. The one description both writers use (dgl-partition's
// partitioner and each rank of dgl-partition --distributed); the reader
// (MappedPartition::open) opens the same names at the same lengths.

#include <cstdint>
#include <vector>

#include "common/partition/array_file.h"

namespace dgld {

// The counts that size every array of the file; they are its meta slots.
struct GraphFileCounts {
  int64_t part_id = 0, num_parts = 1;
  int64_t inner_nodes = 0, local_nodes = 0;  // local = inner + halo
  int64_t inner_edges = 0, local_edges = 0;  // in-edges of inner nodes, of all local nodes
  int64_t out_edges = 0;                     // out-edges of inner nodes
  int64_t halo_hops = 1;
  bool typed = false;  // heterogeneous: the in-edges' types (part_arrays::kInEtype) follow
};

// The file's arrays, in the order a writer appends them.
std::vector<ArraySpec> graph_file_arrays(const GraphFileCounts& c);

// The meta array (part_arrays::kMeta, kMetaSize slots) for `c`.
std::vector<int64_t> graph_file_meta(const GraphFileCounts& c);

}  // namespace dgld
