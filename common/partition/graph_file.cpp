#include "common/partition/graph_file.h"

#include "common/partition/partition.h"

namespace dgld {

std::vector<ArraySpec> graph_file_arrays(const GraphFileCounts& c) {
  namespace pa = part_arrays;
  std::vector<ArraySpec> specs = {
      {pa::kMeta, DType::int64, {pa::kMetaSize}},
      {pa::kNodeGlobalId, DType::int64, {c.local_nodes}},
      {pa::kNodeInner, DType::uint8, {c.local_nodes}},
      {pa::kNodeOwner, DType::int32, {c.local_nodes}},
      {pa::kNodeOrigId, DType::int64, {c.inner_nodes}},
      {pa::kInIndptr, DType::int64, {c.local_nodes + 1}},
      {pa::kInIndices, DType::int64, {c.local_edges}},
      {pa::kInEids, DType::int64, {c.local_edges}},
      {pa::kEdgeInner, DType::uint8, {c.local_edges}},
      {pa::kEdgeOrigId, DType::int64, {c.inner_edges}},
      {pa::kOutIndptr, DType::int64, {c.inner_nodes + 1}},
      {pa::kOutIndices, DType::int64, {c.out_edges}},
      {pa::kOutEids, DType::int64, {c.out_edges}},
  };
  if (c.typed) specs.push_back({pa::kInEtype, DType::int32, {c.local_edges}});
  return specs;
}

std::vector<int64_t> graph_file_meta(const GraphFileCounts& c) {
  namespace pa = part_arrays;
  std::vector<int64_t> meta(pa::kMetaSize, 0);
  meta[pa::kMetaPartId] = c.part_id;
  meta[pa::kMetaNumParts] = c.num_parts;
  meta[pa::kMetaNumInnerNodes] = c.inner_nodes;
  meta[pa::kMetaNumLocalNodes] = c.local_nodes;
  meta[pa::kMetaNumInnerEdges] = c.inner_edges;
  meta[pa::kMetaNumLocalEdges] = c.local_edges;
  meta[pa::kMetaNumOutEdges] = c.out_edges;
  meta[pa::kMetaHaloHops] = c.halo_hops;
  return meta;
}

}  // namespace dgld
