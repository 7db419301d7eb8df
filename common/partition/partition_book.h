#pragma once
// RangePartitionBook: which partition owns a global node or edge id, DGL's
// RangePartitionBook. Every partition owns one contiguous range of node ids and one
// of edge ids (node_map / edge_map of the partition config); ownership is a binary
// search over the range ends and the local id is the offset into the range.

#include <cstdint>
#include <vector>

#include "common/part_config.h"
#include "common/status.h"

namespace dgld {

// Per-type ids of a heterogeneous graph's nodes or edges: type t's ids in
// partition p are the homogeneous range range(t, p); per-type ids run over the
// partitions in order (docs/heterogeneous.md).
class TypedIdSpace {
 public:
  TypedIdSpace() = default;
  explicit TypedIdSpace(std::vector<std::vector<IdRange>> ranges);  // [type][part]

  int num_types() const { return static_cast<int>(ranges_.size()); }
  const IdRange& range(int type, int part) const { return ranges_[type][part]; }
  // Type `type`'s homogeneous ids in each partition ([part]).
  const std::vector<IdRange>& ranges(int type) const { return ranges_[type]; }
  // The per-type ids of type `type` that partition `part` owns (DGL's partid2nids of a type).
  IdRange type_wise_range(int type, int part) const { return {starts_[type][part], starts_[type][part + 1]}; }
  int64_t count(int type) const { return starts_[type].back(); }
  // Type of homogeneous id `id` owned by partition `part`, or -1.
  int type_of(int64_t id, int part) const;
  // Homogeneous id (owned by `part`) -> per-type id and *type; -1 when it is in no range.
  int64_t to_type_wise(int64_t id, int part, int* type) const;
  // Per-type id -> homogeneous id; -1 when type or id is out of range.
  int64_t to_homogeneous(int type, int64_t type_wise_id) const;

 private:
  std::vector<std::vector<IdRange>> ranges_;  // [type][part]
  std::vector<std::vector<int64_t>> starts_;  // [type][part + 1]: per-type id of each part's first
};

class RangePartitionBook {
 public:
  // Ranges must be contiguous from 0 (as validate_part_config checks).
  RangePartitionBook(std::vector<IdRange> node_ranges, std::vector<IdRange> edge_ranges);
  // With types: ntype_ranges[t][p] tile node_ranges[p] in type order, and
  // etype_ranges[t][p] edge_ranges[p] (empty: one edge type).
  RangePartitionBook(std::vector<IdRange> node_ranges, std::vector<IdRange> edge_ranges,
                     std::vector<std::vector<IdRange>> ntype_ranges,
                     std::vector<std::vector<IdRange>> etype_ranges = {});
  static Result<RangePartitionBook> from_config(const PartitionConfig& config);

  int num_partitions() const { return static_cast<int>(node_ranges_.size()); }
  int64_t num_nodes() const { return node_ranges_.empty() ? 0 : node_ranges_.back().end; }
  int64_t num_edges() const { return edge_ranges_.empty() ? 0 : edge_ranges_.back().end; }

  // Owner of a global id, or -1 when the id is outside [0, num).
  int node_partition(int64_t nid) const { return find(node_ends_, nid); }
  int edge_partition(int64_t eid) const { return find(edge_ends_, eid); }
  // Global id -> id local to its owner (offset into the owner's range); -1 if out of range.
  int64_t node_local_id(int64_t nid) const;
  int64_t edge_local_id(int64_t eid) const;
  // Local id of partition `part` -> global id.
  int64_t node_global_id(int part, int64_t local) const { return node_ranges_[part].start + local; }

  // Heterogeneous graphs (docs/heterogeneous.md): node type t's nodes of partition
  // p are the homogeneous ids type_range(t, p); per-type ids run over the
  // partitions in order, so type t's per-type id space is partition-major too.
  // A homogeneous graph has one type (0) covering every node (every edge).
  int num_ntypes() const { return ntypes_.num_types(); }
  const IdRange& type_range(int type, int part) const { return ntypes_.range(type, part); }
  int64_t type_count(int type) const { return ntypes_.count(type); }
  // Node type of a homogeneous id, or -1 when it is out of range.
  int node_type(int64_t nid) const;
  // Homogeneous id -> per-type id (and its type in *type); -1 when out of range.
  int64_t to_type_wise(int64_t nid, int* type) const;
  // Per-type id -> homogeneous id; -1 when type or id is out of range.
  int64_t to_homogeneous(int type, int64_t type_wise_id) const { return ntypes_.to_homogeneous(type, type_wise_id); }
  const TypedIdSpace& ntypes() const { return ntypes_; }
  // The same for edges, by canonical edge type id.
  const TypedIdSpace& etypes() const { return etypes_; }
  int64_t edge_to_type_wise(int64_t eid, int* type) const;

  const IdRange& node_range(int part) const { return node_ranges_[part]; }
  const IdRange& edge_range(int part) const { return edge_ranges_[part]; }
  const std::vector<IdRange>& node_ranges() const { return node_ranges_; }
  const std::vector<IdRange>& edge_ranges() const { return edge_ranges_; }

 private:
  static int find(const std::vector<int64_t>& ends, int64_t id);

  std::vector<IdRange> node_ranges_, edge_ranges_;
  std::vector<int64_t> node_ends_, edge_ends_;
  TypedIdSpace ntypes_, etypes_;
};

}  // namespace dgld
