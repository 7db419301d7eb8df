#pragma once
// dgl-partition --distributed: starts one dgl-partition-rank per machine of
// ip_config.txt with mpirun (over SSH, with the keys and hosts dgl-launch
// uses; --local: all ranks on this machine) and waits for it
// (docs/formats.md, "Distributed partitioning"). The ranks do the work
// (dist_partition.h); this process only builds the command and reports.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace dgld {

struct DistLaunchOptions {
  std::filesystem::path ip_config;  // one rank per machine line (the machine's host)
  bool local = false;               // every rank on this machine
  int num_parts = 0;                // --local: the rank count (0: ip_config's line count, else 2)
  std::filesystem::path chunks, output;
  std::string graph_name;
  uint64_t seed = 0;
  double imbalance = 0.05;  // PT-Scotch's load imbalance ratio
  double scotch_edge_fraction = 0;  // the share of edges PT-Scotch cuts by (a symmetric sample); 1: all; 0: auto
  int refine_rounds = 8;            // label-propagation rounds on every edge after PT-Scotch; 0: none
  bool overwrite = false;
  std::string stats_json;
  std::string log_level = "info";
  // SSH for the remote ranks, as dgl-launch takes them.
  std::string identity_file;
  std::vector<std::string> ssh_options;  // "K=V"
  std::string mpirun = "mpirun";
  std::filesystem::path rank_binary;  // empty: dgl-partition-rank next to this executable
};

// --scotch-edge-fraction: "auto" (0) or a number in (0, 1]; the error names the flag.
Result<double> parse_scotch_edge_fraction(const std::string& text);

// The mpirun command line (argv) for `o` with `hosts` (one rank each).
std::vector<std::string> mpirun_command(const DistLaunchOptions& o, const std::vector<std::string>& hosts,
                                        const std::filesystem::path& rank_binary);

// Runs the job; ok when every rank finished (the partition config is then
// written), otherwise an error naming mpirun's exit status (the ranks print
// their own errors, each naming its rank, file and line).
Status run_distributed_partition(const DistLaunchOptions& o);

}  // namespace dgld
