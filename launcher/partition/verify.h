#pragma once
// dgl-partition --verify: checks every invariant of a partitioned graph and names
// the first violation. Invariants (docs/partition-format.md):
//  - config: node_map / edge_map ranges cover [0, num_nodes) / [0, num_edges) once;
//  - files: headers, checksums, array sizes, every index in range;
//  - nodes: inner nodes are the partition's range in order, halo nodes sorted,
//    outside it, with the owner the partition book gives; every halo node is used;
//  - edges: inner edges are the partition's edge range in order; every local edge
//    (in-CSC and out-CSR) matches the same edge at its owner (the partition of its
//    destination); every inner node's out-edges are all present;
//  - mappings: orig node ids and orig edge ids are permutations;
//  - node data: trainer ids belong to the machine, masks are 0/1.

#include <cstdint>
#include <filesystem>

#include "common/status.h"

namespace dgld {

struct VerifyReport {
  int num_parts = 0;
  int64_t num_nodes = 0, num_edges = 0, halo_nodes = 0, halo_edges = 0;
};

Status verify_partitions(const std::filesystem::path& config_json, VerifyReport* report);

}  // namespace dgld
