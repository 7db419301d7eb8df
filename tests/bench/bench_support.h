#pragma once
// What the mini-batch benchmarks (sampling_bench, link_bench) share: the
// whole graph rebuilt in memory from its partitions (the in-process
// baseline), fanout parsing, and the two graph-servers they start.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/cluster.h"
#include "client/data_loader.h"
#include "common/partition/partition.h"
#include "common/status.h"
#include "tests/support/process.h"

namespace dgld::bench {

// The whole graph's in-edges in global ids, rebuilt from the partitions, and
// every node's feature row.
struct WholeGraph {
  std::vector<int64_t> indptr{0}, indices, eids;
  std::vector<int32_t> etypes;     // heterogeneous graphs: each edge's type
  std::vector<const float*> rows;  // global id -> its row in the partition files
  int64_t dim = 0;
};

// `feature` empty: no rows (a heterogeneous graph's features are per type).
Result<WholeGraph> rebuild(const std::vector<std::unique_ptr<MappedPartition>>& parts, const std::string& feature);

// The first `max_batches` batches of `batch` ids each (the last may be short).
std::vector<std::span<const int64_t>> cut(const std::vector<int64_t>& ids, int64_t batch, int64_t max_batches);

// One measured DistDataLoader epoch: batches (seeds, sampled edges) and the
// loader's time split.
struct LoaderRun {
  std::string name;
  int64_t batches = 0, seeds = 0, edges = 0;
  double wall_s = 0, sample_s = 0, fetch_s = 0, wait_s = 0;
  double seeds_per_s() const { return wall_s > 0 ? static_cast<double>(seeds) / wall_s : 0; }
};
// A loader over `ids` with `o`: an unmeasured warm-up in epoch 0 (as training's
// later epochs find things: caches built, slots mapped, pages touched), then up
// to `max_batches` batches of epoch 1 measured.
Result<LoaderRun> measure_loader(client::Cluster& c, const std::vector<int64_t>& ids,
                                 const client::DataLoaderOptions& o, int64_t max_batches, const std::string& name);

// What making one batch in process took.
struct BatchCost {
  double sample_s = 0, fetch_s = 0;
  int64_t edges = 0;
};
// make(b) for every batch b of `batches` on `threads` threads, each taking the
// next batch; wall time and the sums. A failed batch is printed and leaves
// the run with no seeds (a rate of 0).
LoaderRun run_inprocess(const std::vector<std::span<const int64_t>>& batches, int threads,
                        const std::function<Result<BatchCost>(int64_t b)>& make);

// "10,25" -> {10, 25}.
std::vector<int64_t> parse_fanouts(const std::string& s);

// graph-servers 0 and 1 of a 2-partition config, logs in `logs`; an error
// with the log of one that did not start listening within 5 minutes.
Result<std::vector<testing::Process>> start_two_servers(const std::string& part_config, const std::string& ip_config,
                                                        const testing::TempDir& logs);

// A sampler-worker for trainer 0 on machine 0 with `threads` threads, its
// log in `logs`; returns its "127.0.0.1:<port>" endpoint (the process is
// appended to `procs`), or an error with its log when it did not start.
Result<std::string> start_sampler_worker(const std::string& part_config, const std::string& ip_config, int threads,
                                         const testing::TempDir& logs, std::vector<testing::Process>& procs);

// Trainer 0 on machine 0 of the job (num_trainers: the job's trainer count,
// 0: the coordinator's).
Result<std::unique_ptr<client::Cluster>> connect_trainer0(const std::string& part_config, const std::string& ip_config,
                                                          int num_trainers = 0);

}  // namespace dgld::bench
