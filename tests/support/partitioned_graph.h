#pragma once
// Test support: a generated graph cut into partitions by the real dgl-partition
// binary, every partition mapped, and the whole graph rebuilt from them
// (rows = global ids, neighbours in the partitions' order) for comparisons.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/graph/csc.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "tests/support/process.h"

namespace dgld::testing {

struct PartitionedGraph {
  // Runs dgl-partition --generate `spec` --num-parts `num_parts` --graph-name g
  // (and `extra_flags`); throws std::runtime_error with the tool's log when it
  // fails.
  PartitionedGraph(const std::string& spec, int num_parts, const std::string& dir_prefix,
                   const std::vector<std::string>& extra_flags = {});

  TempDir dir;
  std::filesystem::path json;
  PartitionConfig config;
  std::vector<std::unique_ptr<MappedPartition>> parts;
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> edges;  // eid -> (src, dst), global ids
  std::vector<int64_t> in_indptr{0}, in_indices, in_eids, out_indptr{0}, out_indices, out_eids;

  AdjacencyView in_view() const { return {in_indptr, in_indices, in_eids}; }
  AdjacencyView out_view() const { return {out_indptr, out_indices, out_eids}; }
  int owner(int64_t v) const;
  // Row of node tensor `name` for global node v.
  const std::byte* node_row(const std::string& name, int64_t v) const;
};

std::filesystem::path graph_server_bin();
std::filesystem::path partition_bin();
std::filesystem::path trainer_host_bin();

}  // namespace dgld::testing
