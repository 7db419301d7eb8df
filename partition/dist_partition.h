#pragma once
// One rank of `dgl-partition --distributed` (docs/formats.md, "Distributed
// partitioning"): the program mpirun starts on every machine
// (dgl-partition-rank). Rank r of P reads only its share of a chunked graph
// (chunked.h: a contiguous block of node chunks and of edge chunks), builds
// its part of the distributed graph, cuts it into P parts with PT-Scotch
// (SCOTCH_dgraphPart), exchanges nodes, edges and feature rows with
// all-to-all so that it ends with exactly partition r, and writes partition r
// on its own machine in the single-process format (partition-format.md: ids
// relabelled to contiguous per-partition ranges, halo nodes, original ids,
// checksums). Once every rank has its partition in place, every rank writes
// the partition config (the same bytes) next to it, so every machine holds its
// partition and the config; no rank holds more than its share plus what it
// exchanges.
//
// Every step ends with an agreement: a rank that fails (a missing chunk, a bad
// row) sends its error to all, and every rank stops with "rank R: <error>";
// nothing is renamed into place and no config is written.

#include <cstdint>
#include <filesystem>
#include <string>

namespace dgld {

struct DistPartitionOptions {
  std::filesystem::path chunks;  // the chunked graph (chunked.h), readable on every machine
  std::filesystem::path output;  // each machine writes its part<r> here; rank 0 the config
  std::string graph_name;        // empty: the chunked graph's
  uint64_t seed = 0;             // PT-Scotch's random seed
  double imbalance = 0.05;       // PT-Scotch's load imbalance ratio
  // The share of the edges PT-Scotch sees: each undirected edge is kept with
  // this probability (a hash of its ends and the seed, so both ends agree).
  // Its working memory (~150 bytes per kept edge end) shrinks in proportion;
  // the cut is still counted, and the partitions hold, on every edge. 1: all;
  // 0 (auto): the largest fraction whose working memory fits 1.65x the
  // rank's share of the input, the same on every rank.
  double scotch_edge_fraction = 0;
  // Rounds of size-constrained label propagation on the whole graph after
  // PT-Scotch's cut (partition/rank/refine.cpp); 0: none.
  int refine_rounds = 8;
  bool overwrite = false;        // replace existing part<r> / config
  std::filesystem::path stats_json;  // rank 0 writes the run's figures here (benchmarks)
};

// Runs rank `argc/argv`'s part of the job inside MPI (MPI_Init and
// MPI_Finalize included); returns the process exit status. The flags are
// dgl-partition-rank's (--help).
int run_partition_rank(int argc, const char* const argv[]);

}  // namespace dgld
