#pragma once
// One partition of a graph as dgl-partition wrote it, memory-mapped read-only.
// Local node ids: inner (owned) nodes first, in global-id order (local = global -
// node_map start), then halo nodes sorted by global id. Local edge ids are positions
// in the in-edge CSC; the in-edges of inner nodes come first and their global ids are
// the partition's edge_map range: in order for a homogeneous graph, grouped by edge
// type for a heterogeneous one (inner_edge_slot maps an id back to its position).
// Edge tensors hold one row per inner edge in global id order. See
// docs/partition-format.md.
//
// A MappedPartition owns its mappings; every span and view it returns borrows from
// it and is valid while it lives.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/graph/csc.h"
#include "common/part_config.h"
#include "common/partition/array_file.h"
#include "common/status.h"

namespace dgld {

// Array names in a partition graph file.
namespace part_arrays {
inline constexpr const char* kMeta = "meta";                // int64 [kMetaSize]
inline constexpr const char* kNodeGlobalId = "node/global_id";  // int64 [num_local_nodes]
inline constexpr const char* kNodeInner = "node/inner";         // uint8 [num_local_nodes]
inline constexpr const char* kNodeOwner = "node/owner";         // int32 [num_local_nodes]
inline constexpr const char* kNodeOrigId = "node/orig_id";      // int64 [num_inner_nodes]
inline constexpr const char* kInIndptr = "in/indptr";           // int64 [num_local_nodes + 1]
inline constexpr const char* kInIndices = "in/indices";         // int64 [num_local_edges] local src
inline constexpr const char* kInEids = "in/eids";               // int64 [num_local_edges] global eid
inline constexpr const char* kEdgeInner = "edge/inner";         // uint8 [num_local_edges]
inline constexpr const char* kEdgeOrigId = "edge/orig_id";      // int64 [num_inner_edges]
inline constexpr const char* kOutIndptr = "out/indptr";         // int64 [num_inner_nodes + 1]
inline constexpr const char* kOutIndices = "out/indices";       // int64 [num_out_edges] local dst
inline constexpr const char* kOutEids = "out/eids";             // int64 [num_out_edges] global eid
// Heterogeneous graphs only: the edge type of each in-edge; each row's in-edges
// are sorted by type.
inline constexpr const char* kInEtype = "in/etype";             // int32 [num_local_edges]
// Slots of the meta array.
enum MetaSlot : int {
  kMetaPartId = 0,
  kMetaNumParts,
  kMetaNumInnerNodes,
  kMetaNumLocalNodes,
  kMetaNumInnerEdges,
  kMetaNumLocalEdges,
  kMetaNumOutEdges,
  kMetaHaloHops,
  kMetaSize
};
}  // namespace part_arrays

// A named tensor of a feature file ("_N/features", ...). Rows are inner nodes (or
// inner edges) in local order.
struct TensorView {
  std::string name;
  DType dtype = DType::uint8;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t num_bytes = 0;

  int64_t num_rows() const { return shape.empty() ? 0 : shape[0]; }
  // Elements per row (product of the trailing dims).
  int64_t row_size() const;
  // The data as T; empty when dtype does not match T.
  template <typename T>
  std::span<const T> as() const {
    if (dtype != element_dtype<T>::value) return {};
    return {reinterpret_cast<const T*>(data), num_bytes / sizeof(T)};
  }
};

class MappedPartition {
 public:
  int part_id() const { return part_id_; }
  int num_parts() const { return num_parts_; }
  int halo_hops() const { return halo_hops_; }
  int64_t num_inner_nodes() const { return num_inner_nodes_; }
  int64_t num_local_nodes() const { return static_cast<int64_t>(node_global_id_.size()); }
  int64_t num_inner_edges() const { return num_inner_edges_; }
  int64_t num_local_edges() const { return static_cast<int64_t>(in_.indices.size()); }

  // In-edges: rows are local nodes, indices local source ids, eids global edge ids.
  // Rows of inner nodes hold every in-edge of the node.
  const AdjacencyView& in_edges() const { return in_; }
  // Out-edges of inner nodes: rows are inner nodes, indices local destination ids.
  const AdjacencyView& out_edges() const { return out_; }

  std::span<const int64_t> node_global_ids() const { return node_global_id_; }
  std::span<const uint8_t> inner_node() const { return node_inner_; }
  std::span<const int32_t> node_owner() const { return node_owner_; }
  std::span<const int64_t> edge_global_ids() const { return in_.eids; }
  // Position in the in-edge CSC of inner edge `eid - edge_map start`: the
  // identity in the usual homogeneous layout (inner edges numbered in CSC
  // order); an index for typed graphs and for one partition keeping the
  // input's edge ids.
  int64_t inner_edge_slot(int64_t local_eid) const {
    return edge_slot_.empty() ? local_eid : edge_slot_[static_cast<size_t>(local_eid)];
  }
  // An edge tensor named `name` (`rows` values of `dtype`, one per inner edge
  // in global id order) as sampling weights: one float per inner in-edge
  // position (CSC order, what the samplers index). float32 rows already in
  // CSC order are used in place; other numeric dtypes (DGL's prob may be a
  // bool mask or float64) and reordered rows go through `scratch`.
  // invalid_argument naming the tensor for any other shape.
  Result<std::span<const float>> edge_weights(const std::string& name, DType dtype, const void* data, int64_t rows,
                                              size_t row_bytes, std::vector<float>* scratch) const;
  // Global (source, destination) of inner edge `eid - edge_map start`.
  std::pair<int64_t, int64_t> inner_edge_ends(int64_t local_eid) const;
  // Edge type of each in-edge (parallel to in_edges().indices); empty for a
  // homogeneous graph.
  std::span<const int32_t> edge_types() const { return edge_type_; }
  std::span<const uint8_t> inner_edge() const { return edge_inner_; }
  // Original (input) ids of the inner nodes / inner edges, in local order.
  std::span<const int64_t> orig_node_ids() const { return orig_node_id_; }
  std::span<const int64_t> orig_edge_ids() const { return orig_edge_id_; }
  // Trainer (0 .. num_parts * num_trainers_per_machine - 1) of each inner node.
  std::span<const int64_t> trainer_ids() const { return trainer_id_; }

  const std::vector<TensorView>& node_tensors() const { return node_tensors_; }
  const std::vector<TensorView>& edge_tensors() const { return edge_tensors_; }
  // By full name ("_N/features"); nullptr if absent.
  const TensorView* node_tensor(std::string_view name) const;
  const TensorView* edge_tensor(std::string_view name) const;

  const MappedArrayFile& graph_file() const { return *graph_; }
  // Drops the pages of [p, p + n), a range of one of the partition's mapped
  // files, from this process's memory (MappedArrayFile::release_pages): for a
  // server that has copied a tensor into shared memory.
  void release_pages(const void* p, size_t n) const;

 private:
  friend Result<std::unique_ptr<MappedPartition>> open_partition(const PartitionConfig&, int, bool);
  MappedPartition() = default;
  // When inner edge ids are not the CSC order (typed graphs, kept input ids):
  // checks that every inner edge's id lies in the partition's range (its
  // type's) once and fills edge_slot_.
  Status index_edges(const PartitionConfig& config, const std::string& where);

  std::unique_ptr<MappedArrayFile> graph_, node_feats_, edge_feats_;
  int part_id_ = 0, num_parts_ = 0, halo_hops_ = 0;
  int64_t num_inner_nodes_ = 0, num_inner_edges_ = 0;
  AdjacencyView in_, out_;
  std::span<const int64_t> node_global_id_, orig_node_id_, orig_edge_id_, trainer_id_;
  std::span<const uint8_t> node_inner_, edge_inner_;
  std::span<const int32_t> node_owner_;
  std::span<const int32_t> edge_type_;
  std::vector<int64_t> edge_slot_;  // inner edge id - range start -> CSC position, or empty: the identity
  std::vector<TensorView> node_tensors_, edge_tensors_;
};

// Maps partition `part_id` of `config` (its part_graph, node_feats and edge_feats
// files). Always checks headers, sizes and the indptr arrays; with
// `verify_checksums` also every array's CRC and that every index is in range.
Result<std::unique_ptr<MappedPartition>> open_partition(const PartitionConfig& config, int part_id,
                                                        bool verify_checksums);

}  // namespace dgld
