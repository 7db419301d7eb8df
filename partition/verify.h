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
//  - node data: trainer ids belong to the machine, masks are 0/1;
//  - link split (when the config has one): orig edge ids are distinct (held-out
//    edges left the graph); the edge tensor "<etype>/train_mask" is 0/1 with one value
//    per edge and num_train marked (after a random split of a symmetric graph: each
//    undirected edge once, from its smaller original id); every link_split.dgld reads
//    (checksums, shapes, ids in range, dst owned); held-out edges match their original
//    ids and are absent from the graph (both directions when symmetric); negatives are
//    never the source, an edge of the graph or a held-out edge; totals match the config.

#include <cstdint>
#include <filesystem>

#include "common/status.h"

namespace dgld {

struct VerifyReport {
  int num_parts = 0;
  int64_t num_nodes = 0, num_edges = 0, halo_nodes = 0, halo_edges = 0;
  bool link_split = false;
  int64_t link_train = 0, link_valid = 0, link_test = 0;
};

Status verify_partitions(const std::filesystem::path& config_json, VerifyReport* report);

}  // namespace dgld
