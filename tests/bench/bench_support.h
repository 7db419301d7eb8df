#pragma once
// What the mini-batch benchmarks (sampling_bench, link_bench) share: the
// whole graph rebuilt in memory from its partitions (the in-process
// baseline), fanout parsing, and the two graph-servers they start.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/client/cluster.h"
#include "common/partition/partition.h"
#include "common/status.h"
#include "tests/support/process.h"

namespace dgld::bench {

// The whole graph's in-edges in global ids, rebuilt from the partitions, and
// every node's feature row.
struct WholeGraph {
  std::vector<int64_t> indptr{0}, indices, eids;
  std::vector<const float*> rows;  // global id -> its row in the partition files
  int64_t dim = 0;
};

Result<WholeGraph> rebuild(const std::vector<std::unique_ptr<MappedPartition>>& parts, const std::string& feature);

// "10,25" -> {10, 25}.
std::vector<int64_t> parse_fanouts(const std::string& s);

// graph-servers 0 and 1 of a 2-partition config, logs in `logs`; an error
// with the log of one that did not start listening within 5 minutes.
Result<std::vector<testing::Process>> start_two_servers(const std::string& part_config, const std::string& ip_config,
                                                        const testing::TempDir& logs);

// Trainer 0 on machine 0 of the job (num_trainers: the job's trainer count,
// 0: the coordinator's).
Result<std::unique_ptr<client::Cluster>> connect_trainer0(const std::string& part_config, const std::string& ip_config,
                                                          int num_trainers = 0);

}  // namespace dgld::bench
