#pragma once
// dgl-partition's writer of one partition: finds its halo nodes (num_hops
// deep), and writes its graph file, its node and edge tensor files and, with
// a link split, its held-out edges (docs/partition-format.md).

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "common/status.h"
#include "partition/layout.h"
#include "partition/link_splitter.h"
#include "partition/partitioner.h"

namespace dgld {

// Indices of the valid and test edges whose destination each partition owns.
using LinkBuckets = std::vector<std::array<std::vector<int64_t>, 2>>;

// One per thread; write() may be called for one partition after another.
class PartitionWriter {
 public:
  PartitionWriter(const Layout& L, const PartitionOptions& o, const LinkSplitResult& link,
                  const LinkBuckets& buckets);
  ~PartitionWriter();
  PartitionWriter(const PartitionWriter&) = delete;
  PartitionWriter& operator=(const PartitionWriter&) = delete;

  // Writes partition `p`'s files into `dir` (created), fills `st` and adds the
  // in-edges of its nodes that come from other partitions to *cut.
  Status write(int p, const std::filesystem::path& dir, PartStats* st, int64_t* cut);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgld
