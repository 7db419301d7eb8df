// Benchmark of the full mini-batch path (blocks + input features + labels)
// through DistDataLoader against in-process sampling and feature gather of
// the same graph in memory, measured in the same run (scripts/bench/sampling.sh).
// Two graph-servers run on loopback, one per partition; the trainer is
// machine 0, rank 0, with its node_split of train_mask as seeds.
//   inprocess:   MultiLayerNeighborSampler over LocalGraphSource on the whole
//                graph rebuilt from the partitions, features gathered from the
//                partition files; `threads` threads each making whole batches.
//   samplers=0:  DistDataLoader, the trainer's own `threads` threads.
//   samplers=1:  DistDataLoader fed by one sampler-worker process with `threads` threads,
//                batches handed over in shared-memory slots (batch_slots.h);
//   socket:      the same with the batches sent through the socket (before the slots).
// Every distributed run first takes a few batches unmeasured (caches, slots).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "client/cluster.h"
#include "client/data_loader.h"
#include "client/dist_graph.h"
#include "common/logging.h"
#include "common/memory.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "common/sampling/multi_layer_sampler.h"
#include "tests/bench/bench_support.h"
#include "tests/support/process.h"

using namespace dgld;
using bench::WholeGraph;
using bench::rebuild;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using Run = bench::LoaderRun;

void print(const Run& r) {
  std::printf("%-12s %8.0f seeds/s  %4lld batches in %6.2f s  | sampling %6.2f s  feature fetch %6.2f s  waiting %6.2f s\n",
              r.name.c_str(), r.seeds_per_s(), static_cast<long long>(r.batches), r.wall_s, r.sample_s, r.fetch_s,
              r.wait_s);
}

nlohmann::json to_json(const Run& r) {
  return {{"seeds_per_s", r.seeds_per_s()}, {"batches", r.batches}, {"seeds", r.seeds}, {"wall_s", r.wall_s},
          {"sample_s", r.sample_s},         {"fetch_s", r.fetch_s}, {"wait_s", r.wait_s}};
}


Run inprocess(const WholeGraph& g, const std::vector<int64_t>& ids, const client::DataLoaderOptions& o,
              int64_t max_batches, int threads) {
  const AdjacencyView view{g.indptr, g.indices, g.eids};
  LocalGraphSource source(view);
  MultiLayerNeighborSampler sampler(o.spec.sampling);
  const auto batches = bench::cut(ids, o.batch_size, max_batches);
  return bench::run_inprocess(batches, threads, [&](int64_t b) -> Result<bench::BatchCost> {
    const auto a = Clock::now();
    DGLD_ASSIGN_OR_RETURN(auto mb, sampler.sample(source, batches[b], client::batch_rng_seed(o.seed, 0, b)));
    const auto c = Clock::now();
    std::vector<float> feats(mb.input_nodes.size() * static_cast<size_t>(g.dim));
    for (size_t k = 0; k < mb.input_nodes.size(); ++k) {
      std::memcpy(&feats[k * g.dim], g.rows[mb.input_nodes[k]], g.dim * sizeof(float));
    }
    return bench::BatchCost{std::chrono::duration<double>(c - a).count(), seconds_since(c), 0};
  });
}

}  // namespace

int main(int argc, char** argv) {
  tune_allocator_for_large_buffers();
  namespace po = boost::program_options;
  LogOptions log;
  log.program = "bench_sampling";
  std::string part_config, ip_config, json_out, fanouts = "10,25";
  int64_t batch = 1000, max_batches = 100;
  int threads = 2, prefetch = 4;
  po::options_description desc("bench_sampling options");
  desc.add_options()("part-config", po::value(&part_config)->required(), "2-partition config")
      ("ip-config", po::value(&ip_config)->required(), "ip_config with two loopback machines")
      ("batch", po::value(&batch)->default_value(batch), "seeds per batch")
      ("batches", po::value(&max_batches)->default_value(max_batches), "batches per measurement (at most an epoch)")
      ("fanouts", po::value(&fanouts)->default_value(fanouts), "fanouts, input layer first")
      ("threads", po::value(&threads)->default_value(threads), "batch-making threads in every configuration")
      ("prefetch", po::value(&prefetch)->default_value(prefetch), "DistDataLoader prefetch depth")
      ("json", po::value(&json_out), "write results here");
  add_log_options(desc, log);
  po::variables_map vm;
  if (auto o = parse_command_line(argc, argv, "bench_sampling", "[options]", desc, vm); o != CliOutcome::run) {
    return o == CliOutcome::exit_ok ? 0 : 2;
  }
  if (!setup_logging(log).is_ok()) return 2;
  client::DataLoaderOptions o;
  o.batch_size = batch;
  o.shuffle = false;  // the in-process run takes the same batches in the same order
  o.seed = 1;
  o.prefetch = prefetch;
  o.spec.sampling.fanouts = bench::parse_fanouts(fanouts);
  auto config = load_part_config(part_config);
  if (!config.is_ok() || config->num_parts != 2) {
    std::cerr << "bench_sampling: need a 2-partition config\n";
    return 2;
  }
  testing::TempDir logs("dgld-bench-sampling");
  auto started = bench::start_two_servers(part_config, ip_config, logs);
  if (!started.is_ok()) {
    std::cerr << started.status().message() << "\n";
    return 1;
  }
  std::vector<testing::Process> procs = std::move(started).value();
  auto cluster = bench::connect_trainer0(part_config, ip_config);
  if (!cluster.is_ok()) {
    std::cerr << cluster.status().to_string() << "\n";
    return 1;
  }
  auto ids = client::DistGraph(**cluster).node_split("train_mask");
  if (!ids.is_ok()) {
    std::cerr << ids.status().to_string() << "\n";
    return 1;
  }

  // In-process baseline on the same graph.
  std::vector<std::unique_ptr<MappedPartition>> parts;
  for (int i = 0; i < 2; ++i) {
    auto p = open_partition(*config, i, false);
    if (!p.is_ok()) {
      std::cerr << p.status().to_string() << "\n";
      return 1;
    }
    parts.push_back(std::move(*p));
  }
  auto whole = rebuild(parts, "_N/" + o.spec.feature);
  if (!whole.is_ok()) {
    std::cerr << whole.status().to_string() << "\n";
    return 1;
  }
  std::printf("sampling benchmark: %lld nodes, %zu training seeds on trainer 0, batch %lld, fanouts %s, %d threads, %lld batches per run\n",
              static_cast<long long>(config->num_nodes), ids->size(), static_cast<long long>(batch), fanouts.c_str(),
              threads, static_cast<long long>(max_batches));
  // Warm the page cache and the shared-memory mappings once, unmeasured.
  (void)inprocess(*whole, *ids, o, 2, 1);
  Run base = inprocess(*whole, *ids, o, max_batches, threads);
  print(base);

  auto local_opt = o;
  local_opt.local_threads = threads;
  auto d0 = bench::measure_loader(**cluster, *ids, local_opt, max_batches, "samplers=0");
  if (!d0.is_ok()) {
    std::cerr << d0.status().to_string() << "\n";
    return 1;
  }
  print(*d0);

  auto endpoint = bench::start_sampler_worker(part_config, ip_config, threads, logs, procs);
  if (!endpoint.is_ok()) {
    std::cerr << endpoint.status().to_string() << "\n";
    return 1;
  }
  auto worker_opt = o;
  worker_opt.samplers = {*endpoint};
  // The same worker with its batches sent through the socket, for comparison.
  auto socket_opt = worker_opt;
  socket_opt.shared_memory_batches = false;
  auto d1s = bench::measure_loader(**cluster, *ids, socket_opt, max_batches, "socket");
  if (!d1s.is_ok()) {
    std::cerr << d1s.status().to_string() << "\n";
    return 1;
  }
  auto d1 = bench::measure_loader(**cluster, *ids, worker_opt, max_batches, "samplers=1");
  if (!d1.is_ok()) {
    std::cerr << d1.status().to_string() << "\n";
    return 1;
  }
  print(*d1s);
  print(*d1);
  // How the worker's batches came back: its last log line counts them.
  procs.back().signal(SIGTERM);  // (the warm-up's batches are counted too)
  (void)procs.back().wait(std::chrono::seconds(30));
  {
    const std::string wl = procs.back().log();
    const auto at = wl.find("batches served");
    if (at != std::string::npos) {
      const auto start = wl.rfind('(', at), end = wl.find(')', at);
      std::printf("sampler-worker: %s\n", wl.substr(start + 1, end - start - 1).c_str());
    }
  }

  nlohmann::json out;
  out["graph"] = config->graph_name;
  out["num_nodes"] = config->num_nodes;
  out["batch_size"] = batch;
  out["fanouts"] = o.spec.sampling.fanouts;
  out["threads"] = threads;
  out["runs"] = {{"inprocess", to_json(base)},
                 {"samplers_0", to_json(*d0)},
                 {"samplers_1", to_json(*d1)},
                 {"samplers_1_socket", to_json(*d1s)}};
  const double r1 = base.seeds_per_s() > 0 ? d1->seeds_per_s() / base.seeds_per_s() : 0;
  const double r0 = base.seeds_per_s() > 0 ? d0->seeds_per_s() / base.seeds_per_s() : 0;
  out["ratios"]["sampling_worker_vs_inprocess"] = {{"value", r1}, {"target", 0.5}, {"met", r1 >= 0.5}};
  out["ratios"]["sampling_distributed_vs_inprocess"] = {{"value", r0}, {"target", 0.5}, {"met", r0 >= 0.5}};
  out["ratios"]["sampling_worker_socket_vs_inprocess"] = {
      {"value", base.seeds_per_s() > 0 ? d1s->seeds_per_s() / base.seeds_per_s() : 0}};
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  cluster->reset();
  for (auto it = procs.rbegin(); it != procs.rend(); ++it) it->signal(SIGTERM);
  for (auto& p : procs) p.wait(std::chrono::seconds(10));
  std::printf("ratio: sampling_worker_vs_inprocess %.3f (target 0.5)\n", r1);
  std::printf("ratio: sampling_distributed_vs_inprocess %.3f (target 0.5)\n", r0);
  const double rs = base.seeds_per_s() > 0 ? d1s->seeds_per_s() / base.seeds_per_s() : 0;
  std::printf("ratio: sampling_worker_socket_vs_inprocess %.3f (for reference: the worker without shared memory)\n", rs);
  return 0;
}
