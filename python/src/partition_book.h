#pragma once
// dgld._C's PartitionBook: DGL's GraphPartitionBook (its RangePartitionBook)
// over common/partition's RangePartitionBook and the config's type names,
// every id mapping vectorised over int64 tensors. Made from a partition
// config (load_partition_book, no job needed) or from a Client (the job's
// book). python/dgld/distributed/graph_partition_book.py wraps it.
//
// A homogeneous graph is one node type and one edge type here, named by the
// config (ntype "_N", etype "_N:_E:_N"), so every call works on either kind
// of graph. Type arguments are type ids; -1 means "every node (edge)", i.e.
// homogeneous ids. Errors are StatusError(invalid_argument) naming the id.

#include <string>
#include <utility>
#include <vector>

#include "common/part_config.h"
#include "common/partition/partition_book.h"
#include "python/src/binding.h"

namespace dgld::python {

class PartitionBook {
 public:
  // `book` must be RangePartitionBook::from_config(config)'s.
  PartitionBook(const PartitionConfig& config, RangePartitionBook book, int part_id);
  // The book of the config at `path`, as partition part_id sees it.
  static PartitionBook load(const std::string& path, int part_id);
  // [type][part] homogeneous [start, end) ranges.
  using TypeRanges = std::vector<std::vector<std::pair<int64_t, int64_t>>>;
  // DGL's RangePartitionBook(part_id, num_parts, node_map, edge_map, ntypes,
  // etypes), made with no config: each type's ranges as given (types by id,
  // edge types canonical "src:rel:dst"; the types "_N" and "_N:_E:_N" alone
  // are a homogeneous graph), each partition's range from the previous one's
  // end to the largest end of its types' ranges, as DGL derives it.
  static PartitionBook from_ranges(int part_id, int num_parts, const std::vector<std::string>& ntypes,
                                   const std::vector<std::string>& etypes, const TypeRanges& ntype_map,
                                   const TypeRanges& etype_map);

  int part_id() const { return part_id_; }
  const std::string& graph_name() const { return graph_name_; }
  bool is_homogeneous() const { return homogeneous_; }
  const RangePartitionBook& book() const { return book_; }
  // Node types by id; canonical edge types "src:rel:dst" by id.
  const GraphTypeInfo& types() const { return types_; }
  int ntype_id(const std::string& name) const;
  int etype_id(const std::string& name) const;

  // Owner of each homogeneous id.
  torch::Tensor partition_of(const torch::Tensor& ids, bool edges) const;
  // Ids -> ids local to partition `part` (per-type ids of `type` when type >= 0).
  torch::Tensor local_ids(const torch::Tensor& ids, int part, int type, bool edges) const;
  // The ids partition `part` owns: homogeneous (type -1) or per-type ids of `type`.
  torch::Tensor owned_ids(int part, int type, bool edges) const;
  // Per-type ids of `type` -> homogeneous ids.
  torch::Tensor to_homogeneous(int type, const torch::Tensor& ids, bool edges) const;
  // Homogeneous ids -> (type ids, per-type ids).
  std::pair<torch::Tensor, torch::Tensor> to_type_wise(const torch::Tensor& ids, bool edges) const;
  // Each partition's [start, end) of homogeneous ids (of `type` when type >= 0).
  std::vector<std::pair<int64_t, int64_t>> ranges(int type, bool edges) const;

 private:
  const TypedIdSpace& space(bool edges) const { return edges ? book_.etypes() : book_.ntypes(); }
  void check_part(int part) const;
  void check_type(int type, bool edges) const;

  RangePartitionBook book_;
  GraphTypeInfo types_;
  std::string graph_name_;
  int part_id_ = 0;
  bool homogeneous_ = true;
};

}  // namespace dgld::python
