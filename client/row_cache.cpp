#include "client/row_cache.h"

#include <algorithm>
#include <numeric>

#include "client/cluster.h"
#include "client/dist_tensor.h"
#include "client/local_partition.h"
#include "common/memory.h"
#include "common/partition/partition.h"

namespace dgld::client {

RowCache::RowCache(size_t row_bytes, std::vector<int64_t> ids, std::unique_ptr<uint8_t[]> rows, int64_t id_range)
    : row_bytes_(row_bytes), rows_(std::move(rows)) {
  if (!ids.empty()) map_.set_direct_range(id_range);  // an empty cache keeps no array
  map_.reserve(ids.size());
  for (int64_t id : ids) map_.insert_or_find(id);
}

const uint8_t* RowCache::find(int64_t id) const {
  const int32_t i = map_.find(id);
  if (i < 0) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  return rows_.get() + static_cast<size_t>(i) * row_bytes_;
}

Result<std::shared_ptr<const RowCache>> build_halo_row_cache(Cluster& cluster, const DistTensor& tensor,
                                                             size_t budget_bytes) {
  const size_t rb = tensor.row_bytes();
  const size_t max_rows = rb ? budget_bytes / rb : 0;
  std::vector<int64_t> chosen;
  if (max_rows > 0) {
    const MappedPartition& part = cluster.local().graph();
    const int64_t inner = part.num_inner_nodes(), local = part.num_local_nodes();
    const AdjacencyView& in = part.in_edges();
    // In-edges from each halo node into this machine's nodes.
    std::vector<int64_t> count(static_cast<size_t>(std::max<int64_t>(local - inner, 0)), 0);
    for (int64_t v = 0; v < inner; ++v) {
      for (int64_t e = in.indptr[v]; e < in.indptr[v + 1]; ++e) {
        const int64_t u = in.indices[e];
        if (u >= inner) ++count[static_cast<size_t>(u - inner)];
      }
    }
    std::vector<int64_t> order(count.size());
    std::iota(order.begin(), order.end(), 0);
    const size_t take = std::min(max_rows, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(),
                      [&](int64_t a, int64_t b) { return count[a] != count[b] ? count[a] > count[b] : a < b; });
    const auto gids = part.node_global_ids();
    for (size_t i = 0; i < take; ++i) {
      if (count[static_cast<size_t>(order[i])] == 0) break;
      chosen.push_back(gids[static_cast<size_t>(inner + order[i])]);
    }
    std::sort(chosen.begin(), chosen.end());  // requests grouped by owner, ranges in order
  }
  auto rows = uninitialized_bytes(chosen.size() * rb);
  if (!chosen.empty()) {
    DGLD_RETURN_IF_ERROR(tensor.pull_into(chosen, rows.get()).with_context("filling the feature cache"));
  }
  return std::make_shared<const RowCache>(rb, std::move(chosen), std::move(rows), cluster.config().num_nodes);
}

}  // namespace dgld::client
