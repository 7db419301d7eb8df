#include "common/partition/partition_book.h"

#include <algorithm>

namespace dgld {

RangePartitionBook::RangePartitionBook(std::vector<IdRange> node_ranges, std::vector<IdRange> edge_ranges)
    : node_ranges_(std::move(node_ranges)), edge_ranges_(std::move(edge_ranges)) {
  for (const auto& r : node_ranges_) node_ends_.push_back(r.end);
  for (const auto& r : edge_ranges_) edge_ends_.push_back(r.end);
}

Result<RangePartitionBook> RangePartitionBook::from_config(const PartitionConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_part_config(config, config.graph_name.empty() ? "partition config"
                                                                               : config.graph_name));
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
