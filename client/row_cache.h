#pragma once
// RowCache: rows of a read-only DistTensor (the input features) that other
// machines own, kept in this process so that pulling them needs no request.
// DGL has no such cache: every remote feature row crosses the network every
// time a batch needs it.
//
// build_halo_row_cache fills one at start-up with the remote nodes that
// neighbour sampling on this machine reaches first: the halo nodes of the
// local partition, most in-edges into this machine's nodes first, up to a
// byte budget. The rows never change (features are read-only while training),
// so nothing is invalidated. Read by any number of threads once built.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/sampling/id_map.h"
#include "common/status.h"

namespace dgld::client {

class Cluster;
class DistTensor;

class RowCache {
 public:
  // rows holds ids.size() rows of row_bytes each, in the order of ids.
  // id_range > 0: the ids lie in [0, id_range) (the graph's node count), and
  // up to IdMap::kMaxDirectRange find() looks them up by array, not hash.
  RowCache(size_t row_bytes, std::vector<int64_t> ids, std::unique_ptr<uint8_t[]> rows, int64_t id_range = 0);

  // The cached row of `id`, or nullptr. Counts hits and misses.
  const uint8_t* find(int64_t id) const;
  size_t row_bytes() const { return row_bytes_; }
  size_t num_rows() const { return map_.size(); }
  size_t bytes() const { return map_.size() * row_bytes_; }
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }

 private:
  size_t row_bytes_;
  IdMap map_;
  std::unique_ptr<uint8_t[]> rows_;
  mutable std::atomic<uint64_t> hits_{0}, misses_{0};
};

// Pulls the halo rows of `tensor` that fit `budget_bytes` (see above). A
// budget of 0, or a partition without halo nodes, gives an empty cache.
Result<std::shared_ptr<const RowCache>> build_halo_row_cache(Cluster& cluster, const DistTensor& tensor,
                                                             size_t budget_bytes);

}  // namespace dgld::client
