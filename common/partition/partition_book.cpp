#include "common/partition/partition_book.h"

#include <algorithm>
#include <utility>

namespace dgld {

TypedIdSpace::TypedIdSpace(std::vector<std::vector<IdRange>> ranges) : ranges_(std::move(ranges)) {
  for (const auto& per_part : ranges_) {
    std::vector<int64_t> starts{0};
    for (const auto& r : per_part) starts.push_back(starts.back() + r.size());
    starts_.push_back(std::move(starts));
  }
}

int TypedIdSpace::type_of(int64_t id, int part) const {
  int type = -1;
  to_type_wise(id, part, &type);
  return type;
}

int64_t TypedIdSpace::to_type_wise(int64_t id, int part, int* type) const {
  *type = -1;
  if (part < 0) return -1;
  for (size_t t = 0; t < ranges_.size(); ++t) {
    const IdRange& r = ranges_[t][part];
    if (id >= r.start && id < r.end) {
      *type = static_cast<int>(t);
      return starts_[t][part] + (id - r.start);
    }
  }
  return -1;
}

int64_t TypedIdSpace::to_homogeneous(int type, int64_t id) const {
  if (type < 0 || type >= num_types()) return -1;
  const auto& starts = starts_[type];
  if (id < 0 || id >= starts.back()) return -1;
  // Last partition whose first per-type id is <= id (skipping empty ones).
  const size_t p = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end() - 1, id) - starts.begin()) - 1;
  return ranges_[type][p].start + (id - starts[p]);
}

RangePartitionBook::RangePartitionBook(std::vector<IdRange> node_ranges, std::vector<IdRange> edge_ranges)
    : RangePartitionBook(node_ranges, edge_ranges, {node_ranges}, {edge_ranges}) {}

RangePartitionBook::RangePartitionBook(std::vector<IdRange> node_ranges, std::vector<IdRange> edge_ranges,
                                       std::vector<std::vector<IdRange>> ntype_ranges,
                                       std::vector<std::vector<IdRange>> etype_ranges)
    : node_ranges_(std::move(node_ranges)), edge_ranges_(std::move(edge_ranges)),
      ntypes_(std::move(ntype_ranges)),
      etypes_(etype_ranges.empty() ? std::vector<std::vector<IdRange>>{edge_ranges_} : std::move(etype_ranges)) {
  for (const auto& r : node_ranges_) node_ends_.push_back(r.end);
  for (const auto& r : edge_ranges_) edge_ends_.push_back(r.end);
}

int RangePartitionBook::node_type(int64_t nid) const { return ntypes_.type_of(nid, node_partition(nid)); }

int64_t RangePartitionBook::to_type_wise(int64_t nid, int* type) const {
  return ntypes_.to_type_wise(nid, node_partition(nid), type);
}

int64_t RangePartitionBook::edge_to_type_wise(int64_t eid, int* type) const {
  return etypes_.to_type_wise(eid, edge_partition(eid), type);
}

Result<RangePartitionBook> RangePartitionBook::from_config(const PartitionConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_part_config(config, config.graph_name.empty() ? "partition config"
                                                                               : config.graph_name));
  if (config.types.present()) {
    return RangePartitionBook(config.node_map, config.edge_map, config.types.ntype_map, config.types.etype_map);
  }
  return RangePartitionBook(config.node_map, config.edge_map);
}

int RangePartitionBook::find(const std::vector<int64_t>& ends, int64_t id) {
  if (id < 0 || ends.empty() || id >= ends.back()) return -1;
  // First range whose end is > id (empty ranges have end == start and are skipped).
  return static_cast<int>(std::upper_bound(ends.begin(), ends.end(), id) - ends.begin());
}

int64_t RangePartitionBook::node_local_id(int64_t nid) const {
  const int p = node_partition(nid);
  return p < 0 ? -1 : nid - node_ranges_[p].start;
}

int64_t RangePartitionBook::edge_local_id(int64_t eid) const {
  const int p = edge_partition(eid);
  return p < 0 ? -1 : eid - edge_ranges_[p].start;
}

}  // namespace dgld
