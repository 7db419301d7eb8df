#pragma once
// A graph already in memory as the source of dgl-partition's partitioner
// (dgld.distributed.partition_graph's DGLGraph, python/src/partition.cpp):
// edge i is src[i] -> dst[i] with original id i, node data by node id. The
// arrays are borrowed: whoever makes the source keeps them alive and
// unchanged until partition_graph returns.
//
// Within each node's in-edges the order is the input order, as for
// edges:FILE, except that a symmetric graph without self loops or duplicate
// edges has them sorted by source, as ogb:DIR's: the same graph given either
// way is partitioned into the same files.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "partition/graph_data.h"

namespace dgld {

struct MemoryGraph {
  std::string name = "in-memory graph";  // for messages
  int64_t num_nodes = 0;
  std::span<const int64_t> src, dst;
  int64_t feat_dim = 0;
  std::span<const float> features;                   // [num_nodes * feat_dim] or empty
  std::span<const int64_t> labels;                   // [num_nodes] or empty
  std::span<const uint8_t> train_mask, val_mask, test_mask;  // 0/1 [num_nodes] each, or empty
  std::span<const int32_t> balance_type;             // [num_nodes] in [0, num_balance_types), or empty
  int32_t num_balance_types = 0;
  std::vector<NamedTensor> node_tensors, edge_tensors;
  // A typed graph (DGL's heterograph) when ntypes is not empty: node type t
  // holds the ids [ntype_offset[t], ntype_offset[t + 1]), edge i has type
  // edge_type[i] (non-decreasing: each type's edges are consecutive, in
  // etypes order), and every named tensor names its type (NamedTensor::type).
  // Features, labels, masks and balance types stay empty: its data are named
  // tensors, kept under their own names.
  std::vector<std::string> ntypes;
  std::vector<int64_t> ntype_offset;  // [ntypes + 1]
  std::vector<CanonicalEtype> etypes;
  std::span<const int32_t> edge_type;
};

std::unique_ptr<GraphSource> make_memory_source(MemoryGraph g);

}  // namespace dgld
