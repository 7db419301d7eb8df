#pragma once
// node_split / edge_split: which training ids each trainer takes, exactly as
// DGL's dgl.distributed.node_split and edge_split (so a job split by dgld
// trains on the same ids as under DGL).
//
// force_even: the sorted list of ids whose mask is true is cut into P (the
// number of partitions) near-equal slices, the first nnz % P one longer;
// partition p takes slice p. With T trainers per machine, the slice is
// permuted with numpy's legacy RandomState(seed=p).permutation and cut evenly
// among them (trainer rank % T takes piece rank % T, sorted), or, given
// trainer ids (hierarchical partitioning), split as DGL's _split_by_trainer_id.
// Without force_even a trainer gets the true ids its own partition owns, cut
// into T contiguous pieces (the last takes the remainder); given trainer ids,
// those whose trainer id (mod T) is the trainer's position on its machine.
//
// Ranks follow DGL: the T trainers of partition p are ranks p*T .. p*T+T-1.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/partition/partition_book.h"
#include "common/status.h"

namespace dgld::client {

// Who asks: its partition (machine), its trainer rank and the job's trainer count.
struct SplitRank {
  int part_id = 0;
  int rank = 0;
  int num_trainers = 1;  // a multiple of the number of partitions
};

struct SplitOptions {
  bool force_even = true;
  // Trainer id of every node (edge) by global id, as written by hierarchical
  // partitioning; empty: split randomly within the partition.
  std::span<const int64_t> trainer_ids;
};

// mask[i] != 0 selects global id i; mask.size() must be the number of nodes.
Result<std::vector<int64_t>> node_split(std::span<const uint8_t> mask,
                                        const RangePartitionBook& book, const SplitRank& who,
                                        const SplitOptions& options = {});
Result<std::vector<int64_t>> node_split(const std::function<bool(int64_t)>& mask,
                                        const RangePartitionBook& book, const SplitRank& who,
                                        const SplitOptions& options = {});
Result<std::vector<int64_t>> edge_split(std::span<const uint8_t> mask,
                                        const RangePartitionBook& book, const SplitRank& who,
                                        const SplitOptions& options = {});
Result<std::vector<int64_t>> edge_split(const std::function<bool(int64_t)>& mask,
                                        const RangePartitionBook& book, const SplitRank& who,
                                        const SplitOptions& options = {});

// DGL's _even_offset: k + 1 offsets cutting n into k pieces, the first n % k one longer.
std::vector<int64_t> even_offsets(int64_t n, int64_t k);
// numpy.random.seed(seed); numpy.random.permutation(n) (legacy MT19937), bit for bit.
std::vector<int64_t> numpy_permutation(int64_t n, uint32_t seed);

}  // namespace dgld::client
