// Benchmark of typed mini-batches (docs/heterogeneous.md): a fanout per edge
// type and layer, blocks that keep each edge's type, per-type feature rows
// and the target type's labels, made by DistDataLoader through two
// graph-servers on loopback against in-process sampling and feature gather
// of the same graph in memory, measured in the same run
// (scripts/bench/hetero.sh). The trainer is machine 0, rank 0 of 2, with its
// node_split of "<target>/train_mask" as seeds; both sides take the same
// batches (shuffle off, the same batch seeds). Rates are seeds per second.
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
#include "common/partition/partition_book.h"
#include "common/sampling/multi_layer_sampler.h"
#include "tests/bench/bench_support.h"
#include "tests/support/process.h"

using namespace dgld;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using Run = bench::LoaderRun;

void print(const Run& r) {
  std::printf("%-10s %8.0f seeds/s  %4lld batches (%lld sampled edges) in %6.2f s  | sampling %6.2f s  "
              "feature fetch %6.2f s  waiting %6.2f s\n",
              r.name.c_str(), r.seeds_per_s(), static_cast<long long>(r.batches), static_cast<long long>(r.edges),
              r.wall_s, r.sample_s, r.fetch_s, r.wait_s);
}

nlohmann::json to_json(const Run& r) {
  return {{"seeds_per_s", r.seeds_per_s()}, {"batches", r.batches}, {"seeds", r.seeds}, {"edges", r.edges},
          {"wall_s", r.wall_s}, {"sample_s", r.sample_s}, {"fetch_s", r.fetch_s}, {"wait_s", r.wait_s}};
}

// Every node type's feature rows, copied into this process's memory (as an
// in-process trainer holds them; reading the mapped partition files instead
// would charge the baseline with their first-touch page faults), by per-type id.
struct TypedRows {
  std::vector<std::vector<float>> rows;  // [type]: count(type) x dim(type), empty without features
  std::vector<int64_t> dim;              // by type
};

TypedRows typed_rows(const PartitionConfig& c, const std::vector<std::unique_ptr<MappedPartition>>& parts,
                     const std::string& feature) {
  TypedRows out;
  const int T = c.types.num_ntypes();
  out.dim.assign(static_cast<size_t>(T), 0);
  out.rows.resize(static_cast<size_t>(T));
  for (const auto& p : parts) {  // partitions in order: per-type ids are partition-major
    for (int t = 0; t < T; ++t) {
      const TensorView* tv = p->node_tensor(c.types.ntypes[t] + "/" + feature);
      if (!tv || tv->shape.size() != 2) continue;
      out.dim[t] = tv->shape[1];
      const auto data = tv->as<float>();
      out.rows[t].insert(out.rows[t].end(), data.begin(), data.end());
    }
  }
  return out;
}

// In-process: the whole graph in memory, the same sampler, the typed rows
// gathered per type as pull_typed_rows groups them.
Run inprocess(const bench::WholeGraph& g, const TypedRows& rows, const RangePartitionBook& book,
              const std::vector<int64_t>& ids, const client::DataLoaderOptions& o, int64_t max_batches, int threads) {
  const AdjacencyView view{g.indptr, g.indices, g.eids};
  LocalSourceOptions so;
  so.etypes = g.etypes;
  LocalGraphSource source(view, so);
  MultiLayerNeighborSampler sampler(o.spec.sampling);
  const auto batches = bench::cut(ids, o.batch_size, max_batches);
  return bench::run_inprocess(batches, threads, [&](int64_t b) -> Result<bench::BatchCost> {
    const auto a = Clock::now();
    DGLD_ASSIGN_OR_RETURN(auto mb, sampler.sample(source, batches[b], client::batch_rng_seed(o.seed, 1, b)));
    const auto c = Clock::now();
    // As pull_typed_rows: the input nodes grouped by type, each type's rows
    // into a buffer of its size.
    std::vector<std::vector<int64_t>> of_type(rows.dim.size());  // per-type ids
    for (int64_t v : mb.input_nodes) {
      int type = -1;
      const int64_t tw = book.to_type_wise(v, &type);
      if (rows.dim[type] > 0) of_type[type].push_back(tw);
    }
    // Per-thread buffers kept across batches: the best an in-process
    // trainer can do (fresh ~100 MB buffers cost their page faults).
    thread_local std::vector<std::vector<float>> bufs;
    bufs.resize(of_type.size());
    for (size_t t = 0; t < of_type.size(); ++t) {
      const auto d = static_cast<size_t>(rows.dim[t]);
      std::vector<float>& buf = bufs[t];
      if (buf.size() < of_type[t].size() * d) buf.resize(of_type[t].size() * d);
      for (size_t i = 0; i < of_type[t].size(); ++i) {
        std::memcpy(&buf[i * d], &rows.rows[t][static_cast<size_t>(of_type[t][i]) * d], d * sizeof(float));
      }
    }
    bench::BatchCost cost{std::chrono::duration<double>(c - a).count(), seconds_since(c), 0};
    for (const Block& blk : mb.blocks) cost.edges += blk.num_edges();
    return cost;
  });
}

int fail(const Status& st) {
  std::cerr << "bench_hetero: " << st.to_string() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  tune_allocator_for_large_buffers();
  namespace po = boost::program_options;
  LogOptions log;
  log.program = "bench_hetero";
  std::string part_config, ip_config, json_out, fanouts = "10,10";
  int64_t batch = 1000, max_batches = 100;
  int threads = 2;
  po::options_description desc("bench_hetero options");
  desc.add_options()("part-config", po::value(&part_config)->required(), "2-partition heterogeneous config")
      ("ip-config", po::value(&ip_config)->required(), "ip_config with two loopback machines")
      ("batch", po::value(&batch)->default_value(batch), "seeds per batch")
      ("batches", po::value(&max_batches)->default_value(max_batches), "batches per measurement (at most an epoch)")
      ("fanouts", po::value(&fanouts)->default_value(fanouts), "fanout per edge type of each layer, input layer first")
      ("threads", po::value(&threads)->default_value(threads), "batch-making threads on both sides")
      ("json", po::value(&json_out), "write results here");
  add_log_options(desc, log);
  po::variables_map vm;
  if (auto o = parse_command_line(argc, argv, "bench_hetero", "[options]", desc, vm); o != CliOutcome::run) {
    return o == CliOutcome::exit_ok ? 0 : 2;
  }
  if (!setup_logging(log).is_ok()) return 2;
  auto config = load_part_config(part_config);
  if (!config.is_ok()) return fail(config.status());
  if (config->num_parts != 2 || !config->types.present() || config->types.target_ntype.empty()) {
    std::cerr << "bench_hetero: need a 2-partition heterogeneous config with a target type\n";
    return 2;
  }
  const std::string target = config->types.target_ntype;
  client::DataLoaderOptions o;
  o.batch_size = batch;
  o.shuffle = false;  // the in-process run takes the same batches in the same order
  o.seed = 1;
  o.local_threads = threads;
  o.spec.sampling.fanouts = bench::parse_fanouts(fanouts);
  for (int64_t f : o.spec.sampling.fanouts) o.spec.sampling.etype_fanouts.emplace_back(config->types.num_etypes(), f);
  o.spec.feature = "features";
  o.spec.label = target + "/labels";

  testing::TempDir logs("dgld-bench-hetero");
  auto started = bench::start_two_servers(part_config, ip_config, logs);
  if (!started.is_ok()) return fail(started.status());
  std::vector<testing::Process> procs = std::move(started).value();
  auto cluster = bench::connect_trainer0(part_config, ip_config);
  if (!cluster.is_ok()) return fail(cluster.status());
  auto ids = client::DistGraph(**cluster).node_split(target + "/train_mask");
  if (!ids.is_ok()) return fail(ids.status());

  std::vector<std::unique_ptr<MappedPartition>> parts;
  for (int i = 0; i < 2; ++i) {
    auto p = open_partition(*config, i, false);
    if (!p.is_ok()) return fail(p.status());
    parts.push_back(std::move(*p));
  }
  auto whole = bench::rebuild(parts, "");
  if (!whole.is_ok()) return fail(whole.status());
  auto book = RangePartitionBook::from_config(*config);
  if (!book.is_ok()) return fail(book.status());
  const TypedRows rows = typed_rows(*config, parts, o.spec.feature);
  std::printf("heterogeneous sampling benchmark: %lld nodes of %d types, %lld edges of %d types, %zu %s training "
              "seeds on trainer 0, batch %lld, fanouts %s per edge type, %d threads, %lld batches per run\n",
              static_cast<long long>(config->num_nodes), config->types.num_ntypes(),
              static_cast<long long>(config->num_edges), config->types.num_etypes(), ids->size(), target.c_str(),
              static_cast<long long>(batch), fanouts.c_str(), threads, static_cast<long long>(max_batches));
  (void)inprocess(*whole, rows, *book, *ids, o, 2, 1);  // warm the pages, unmeasured
  const Run base = inprocess(*whole, rows, *book, *ids, o, max_batches, threads);
  print(base);
  auto dist = bench::measure_loader(**cluster, *ids, o, max_batches, "servers");
  if (!dist.is_ok()) return fail(dist.status());
  print(*dist);
  if (dist->edges != base.edges) {
    std::printf("note: the runs sampled %lld and %lld edges (different batches?)\n", static_cast<long long>(dist->edges),
                static_cast<long long>(base.edges));
  }
  // The same typed batches made by a sampler-worker (edge types and typed
  // rows in its replies).
  auto endpoint = bench::start_sampler_worker(part_config, ip_config, threads, logs, procs);
  if (!endpoint.is_ok()) return fail(endpoint.status());
  auto worker_opt = o;
  worker_opt.samplers = {*endpoint};
  auto worker = bench::measure_loader(**cluster, *ids, worker_opt, max_batches, "sampler-worker");
  if (!worker.is_ok()) return fail(worker.status());
  print(*worker);
  if (worker->edges != base.edges) {
    std::printf("note: the worker's batches sampled %lld edges, in-process %lld\n",
                static_cast<long long>(worker->edges), static_cast<long long>(base.edges));
  }
  const double ratio = base.seeds_per_s() > 0 ? dist->seeds_per_s() / base.seeds_per_s() : 0;
  const double worker_ratio = base.seeds_per_s() > 0 ? worker->seeds_per_s() / base.seeds_per_s() : 0;
  nlohmann::json out;
  out["graph"] = config->graph_name;
  out["num_nodes"] = config->num_nodes;
  out["num_edges"] = config->num_edges;
  out["batch_size"] = batch;
  out["fanouts_per_etype"] = o.spec.sampling.fanouts;
  out["threads"] = threads;
  out["runs"] = {{"inprocess", to_json(base)}, {"servers", to_json(*dist)}, {"sampler_worker", to_json(*worker)}};
  out["ratios"]["hetero_distributed_vs_inprocess"] = {{"value", ratio}, {"target", 0.5}, {"met", ratio >= 0.5}};
  out["ratios"]["hetero_sampler_worker_vs_inprocess"] = {
      {"value", worker_ratio}, {"target", 0.5}, {"met", worker_ratio >= 0.5}};
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  cluster->reset();
  for (auto it = procs.rbegin(); it != procs.rend(); ++it) it->signal(SIGTERM);
  for (auto& p : procs) p.wait(std::chrono::seconds(10));
  std::printf("ratio: hetero_distributed_vs_inprocess %.3f (target 0.5, as for homogeneous mini-batches)\n", ratio);
  std::printf("ratio: hetero_sampler_worker_vs_inprocess %.3f (target 0.5)\n", worker_ratio);
  return 0;
}
