#pragma once
// The held-out edges of a link-prediction split, one array file per partition
// (`part<i>/link_split.dgld`, kind 4; docs/partition-format.md). dgl-partition
// removes the validation and test edges from the graph and stores each with the
// partition that owns its destination, with the negative destinations to rank it
// against. The training edges stay in the graph, marked by the uint8 edge tensor
// "<etype>/train_mask" (`graph.edata("train_mask")`).

#include <cstdint>
#include <string>
#include <vector>

#include "common/part_config.h"
#include "common/status.h"

namespace dgld {

// Array names in a link split file; "<set>/..." with set "valid" or "test".
namespace link_arrays {
inline constexpr const char* kMeta = "meta";  // int64 [kMetaSize]
enum MetaSlot : int { kMetaPartId = 0, kMetaNumParts, kMetaNumNegatives, kMetaSize };
inline constexpr const char* kSets[] = {"valid", "test"};
inline constexpr const char* kSrc = "src";            // int64 [n] global (partitioned) ids
inline constexpr const char* kDst = "dst";            // int64 [n] global ids, owned by the partition
inline constexpr const char* kOrigSrc = "orig_src";   // int64 [n] original (input) ids
inline constexpr const char* kOrigDst = "orig_dst";   // int64 [n]
inline constexpr const char* kNegDst = "neg_dst";     // int64 [n, K] global ids; absent when K == 0
}  // namespace link_arrays

// Name of the edge tensor marking the training edges: "<etype>/train_mask".
inline std::string link_train_mask_name(const PartitionConfig& config) { return config.etype + "/train_mask"; }

// Held-out edges of one set. Edge i is src[i] -> dst[i] (global ids; orig_* the
// input ids), its negatives neg_dst[i*K .. i*K+K) with K = num_negatives.
struct LinkEdges {
  std::vector<int64_t> src, dst, orig_src, orig_dst, neg_dst;
  int64_t num_negatives = 0;
};

struct LinkSplitPart {
  LinkEdges valid, test;
};

// Reads partition `part_id`'s link split file, verifying checksums, shapes (every
// array of a set has the same length, neg_dst is [n, config.link_split.num_negatives])
// and that every id lies in [0, num_nodes) and every dst is owned by the partition.
// not_found (naming the file) when the config has no link split or the file is
// missing; corruption when the file is inconsistent.
Result<LinkSplitPart> read_link_split(const PartitionConfig& config, int part_id);

}  // namespace dgld
