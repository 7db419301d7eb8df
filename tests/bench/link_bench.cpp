// Benchmark of the link-prediction mini-batch path (positive edges, uniform
// negatives, blocks over every endpoint with the positives excluded, input
// features) through DistEdgeDataLoader against in-process sampling and feature
// gather of the same graph in memory, measured in the same run
// (scripts/bench/link.sh). Two graph-servers run on loopback, one per
// partition; the trainer is machine 0, rank 0 of 2, with its edge_split of
// train_mask as positive edges. Rates are positive (training) edges per second.
//   inprocess:      the whole graph rebuilt from the partitions; each batch made
//                   as DistEdgeDataLoader::Impl::make makes it (k uniform
//                   negatives per positive from the batch's own stream, the
//                   unique endpoints, the positives as an EdgePairSet
//                   exclusion, MultiLayerNeighborSampler over LocalGraphSource,
//                   feature rows gathered with memcpy); `threads` threads each
//                   making whole batches.
//   loader:         DistEdgeDataLoader, uniform negatives, `threads` threads.
//   local-uniform:  the same with negatives drawn over this machine's nodes
//                   (for information: no remote feature rows for negatives).
// Both take the same edges in the same order (shuffle off) and the same
// epoch's batch seeds, so uniform batches are the same batches.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>
#include <unordered_map>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "client/cluster.h"
#include "client/data_loader.h"
#include "client/dist_graph.h"
#include "client/link_loader.h"
#include "common/logging.h"
#include "common/memory.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "common/sampling/multi_layer_sampler.h"
#include "common/random.h"
#include "tests/bench/bench_support.h"
#include "tests/support/process.h"

using namespace dgld;
using bench::WholeGraph;
using bench::rebuild;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kEpoch = 1;  // the measured epoch (the loader's warm-up takes epoch 0)

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Run {
  std::string name;
  int64_t batches = 0, edges = 0, nodes = 0;  // positive edges; unique endpoints (the batches' seeds)
  double wall_s = 0, sample_s = 0, fetch_s = 0, wait_s = 0;
  double edges_per_s() const { return wall_s > 0 ? static_cast<double>(edges) / wall_s : 0; }
};

void print(const Run& r) {
  std::printf("%-14s %8.0f edges/s  %4lld batches in %6.2f s  (%6.0f endpoints/batch)  | sampling %6.2f s  feature fetch %6.2f s  waiting %6.2f s\n",
              r.name.c_str(), r.edges_per_s(), static_cast<long long>(r.batches), r.wall_s,
              r.batches > 0 ? static_cast<double>(r.nodes) / static_cast<double>(r.batches) : 0.0, r.sample_s,
              r.fetch_s, r.wait_s);
}

nlohmann::json to_json(const Run& r) {
  return {{"edges_per_s", r.edges_per_s()}, {"batches", r.batches}, {"edges", r.edges},
          {"endpoints", r.nodes},           {"wall_s", r.wall_s},   {"sample_s", r.sample_s},
          {"fetch_s", r.fetch_s},           {"wait_s", r.wait_s}};
}


// Endpoints (src, dst) of `eids`, looked up in the whole graph.
Result<std::pair<std::vector<int64_t>, std::vector<int64_t>>> endpoints(const WholeGraph& g,
                                                                       std::span<const int64_t> eids) {
  std::unordered_map<int64_t, std::vector<size_t>> at;
  at.reserve(eids.size());
  for (size_t i = 0; i < eids.size(); ++i) at[eids[i]].push_back(i);
  std::vector<int64_t> src(eids.size(), -1), dst(eids.size(), -1);
  size_t found = 0;
  for (int64_t v = 0; v + 1 < static_cast<int64_t>(g.indptr.size()); ++v) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
      auto it = at.find(g.eids[k]);
      if (it == at.end()) continue;
      for (size_t i : it->second) src[i] = g.indices[k], dst[i] = v, ++found;
    }
  }
  if (found != eids.size()) {
    return invalid_argument("only " + std::to_string(found) + " of " + std::to_string(eids.size()) +
                            " training edges are in the rebuilt graph");
  }
  return std::pair{std::move(src), std::move(dst)};
}

// One batch made as DistEdgeDataLoader::Impl::make makes it (uniform
// negatives over [0, num_nodes), no redraws), sampled in process.
struct InprocessBatch {
  MiniBatch mb;
  std::vector<int64_t> pos_u, pos_v, neg_v;
};

Result<InprocessBatch> make_batch(const MultiLayerNeighborSampler& sampler, LocalGraphSource& source,
                                  const std::vector<int64_t>& src, const std::vector<int64_t>& dst, int64_t start,
                                  int64_t end, int k, int64_t num_nodes, uint64_t rng_seed) {
  StreamRng rng(rng_seed, 0x4e6567ull);  // the negatives' own stream, as the loader's
  InprocessBatch out;
  std::vector<int64_t> nodes;
  std::unordered_map<int64_t, int64_t> row;
  auto row_of = [&](int64_t v) {
    auto [it, fresh] = row.emplace(v, static_cast<int64_t>(nodes.size()));
    if (fresh) nodes.push_back(v);
    return it->second;
  };
  EdgePairSet positives;
  positives.reserve(static_cast<size_t>(end - start));
  for (int64_t i = start; i < end; ++i) {
    const int64_t u = src[static_cast<size_t>(i)], v = dst[static_cast<size_t>(i)];
    positives.add(u, v);
    out.pos_u.push_back(row_of(u));
    out.pos_v.push_back(row_of(v));
  }
  out.neg_v.reserve(static_cast<size_t>((end - start) * k));
  for (int64_t i = start; i < end; ++i) {
    for (int j = 0; j < k; ++j) out.neg_v.push_back(row_of(static_cast<int64_t>(rng.below(static_cast<uint64_t>(num_nodes)))));
  }
  DGLD_ASSIGN_OR_RETURN(out.mb, sampler.sample(source, nodes, rng_seed, &positives));
  return out;
}

Run inprocess(const WholeGraph& g, const std::vector<int64_t>& src, const std::vector<int64_t>& dst,
              const client::LinkLoaderOptions& o, int64_t num_nodes, int64_t max_batches, int threads) {
  const AdjacencyView view{g.indptr, g.indices, g.eids};
  LocalGraphSource source(view);
  MultiLayerNeighborSampler sampler(o.sampling);
  const int64_t n = static_cast<int64_t>(src.size());
  const int64_t num_batches = std::min(max_batches, (n + o.batch_size - 1) / o.batch_size);
  std::atomic<int64_t> next{0}, nodes{0};
  std::vector<double> sample(threads), fetch(threads);
  std::atomic<bool> failed{false};
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int64_t b; (b = next++) < num_batches;) {
        const auto a = Clock::now();
        const int64_t start = b * o.batch_size, end = std::min(n, start + o.batch_size);
        auto lb = make_batch(sampler, source, src, dst, start, end, o.num_negatives, num_nodes,
                             client::batch_rng_seed(o.seed, kEpoch, b));
        if (!lb.is_ok()) {
          std::cerr << lb.status().to_string() << "\n";
          failed = true;
          return;
        }
        const auto c = Clock::now();
        const auto& in = lb->mb.input_nodes;
        std::vector<float> feats(in.size() * static_cast<size_t>(g.dim));
        for (size_t k = 0; k < in.size(); ++k) {
          std::memcpy(&feats[k * g.dim], g.rows[in[k]], g.dim * sizeof(float));
        }
        sample[t] += std::chrono::duration<double>(c - a).count();
        fetch[t] += seconds_since(c);
        nodes += static_cast<int64_t>(lb->mb.seeds.size());
      }
    });
  }
  for (auto& t : ts) t.join();
  Run r{"inprocess"};
  r.wall_s = seconds_since(t0);
  r.batches = num_batches;
  r.edges = std::min(n, num_batches * o.batch_size);
  r.nodes = nodes;
  for (int t = 0; t < threads; ++t) r.sample_s += sample[t], r.fetch_s += fetch[t];
  if (failed) r.edges = 0;
  return r;
}

Result<Run> distributed(client::Cluster& c, const std::vector<int64_t>& eids, client::LinkLoaderOptions o,
                        int64_t max_batches, const std::string& name) {
  DGLD_ASSIGN_OR_RETURN(auto loader, client::DistEdgeDataLoader::create(c, eids, o));
  Run r{name};
  const int64_t n = std::min(max_batches, loader->num_batches_per_epoch());
  // Unmeasured warm-up (feature rows and partition pages touched, threads started).
  loader->start_epoch(0);
  for (int64_t i = 0; i < std::min<int64_t>(n, 2 * (o.prefetch + 2)); ++i) {
    DGLD_ASSIGN_OR_RETURN(auto b, loader->next());
    if (!b) break;
  }
  const auto t0 = Clock::now();
  loader->start_epoch(kEpoch);
  for (int64_t i = 0; i < n; ++i) {
    DGLD_ASSIGN_OR_RETURN(auto b, loader->next());
    if (!b) break;
    ++r.batches;
    r.edges += static_cast<int64_t>(b->pos_u.size());
    r.nodes += static_cast<int64_t>(b->batch.mini_batch.seeds.size());
    r.sample_s += b->batch.timings.sample_s;
    r.fetch_s += b->batch.timings.fetch_s;
    r.wait_s += b->batch.timings.wait_s;
  }
  r.wall_s = seconds_since(t0);
  return r;
}


}  // namespace

int main(int argc, char** argv) {
  tune_allocator_for_large_buffers();
  namespace po = boost::program_options;
  LogOptions log;
  log.program = "bench_link";
  std::string part_config, ip_config, json_out, fanouts = "10,25";
  int64_t batch = 1000, max_batches = 100;
  int threads = 2, prefetch = 4, negatives = 1;
  po::options_description desc("bench_link options");
  desc.add_options()("part-config", po::value(&part_config)->required(), "2-partition config with a link split")
      ("ip-config", po::value(&ip_config)->required(), "ip_config with two loopback machines")
      ("batch", po::value(&batch)->default_value(batch), "positive edges per batch")
      ("batches", po::value(&max_batches)->default_value(max_batches), "batches per measurement (at most an epoch)")
      ("fanouts", po::value(&fanouts)->default_value(fanouts), "fanouts, input layer first")
      ("negatives", po::value(&negatives)->default_value(negatives), "negative destinations per positive edge")
      ("threads", po::value(&threads)->default_value(threads), "batch-making threads in every configuration")
      ("prefetch", po::value(&prefetch)->default_value(prefetch), "DistEdgeDataLoader prefetch depth")
      ("json", po::value(&json_out), "write results here");
  add_log_options(desc, log);
  po::variables_map vm;
  if (auto o = parse_command_line(argc, argv, "bench_link", "[options]", desc, vm); o != CliOutcome::run) {
    return o == CliOutcome::exit_ok ? 0 : 2;
  }
  if (!setup_logging(log).is_ok()) return 2;
  if (batch < 1 || max_batches < 1 || threads < 1 || negatives < 1) {
    std::cerr << "bench_link: --batch, --batches, --threads and --negatives must be >= 1\n";
    return 2;
  }
  client::LinkLoaderOptions o;
  o.batch_size = batch;
  o.shuffle = false;  // the in-process run takes the same edges in the same order
  o.seed = 1;
  o.sampling.fanouts = bench::parse_fanouts(fanouts);
  o.num_negatives = negatives;
  o.negative_sampler = client::NegativeSampler::uniform;
  o.threads = threads;
  o.prefetch = prefetch;
  auto config = load_part_config(part_config);
  if (!config.is_ok() || config->num_parts != 2) {
    std::cerr << "bench_link: need a 2-partition config\n";
    return 2;
  }
  testing::TempDir logs("dgld-bench-link");
  auto started = bench::start_two_servers(part_config, ip_config, logs);
  if (!started.is_ok()) {
    std::cerr << started.status().message() << "\n";
    return 1;
  }
  std::vector<testing::Process> procs = std::move(started).value();
  auto cluster = bench::connect_trainer0(part_config, ip_config, 2);
  if (!cluster.is_ok()) {
    std::cerr << cluster.status().to_string() << "\n";
    return 1;
  }
  auto eids = client::DistGraph(**cluster).edge_split("train_mask");
  if (!eids.is_ok()) {
    std::cerr << eids.status().to_string() << "\n";
    return 1;
  }
  if (eids->empty()) {
    std::cerr << "bench_link: trainer 0 has no training edges\n";
    return 1;
  }

  // In-process baseline on the same graph and the same training edges.
  std::vector<std::unique_ptr<MappedPartition>> parts;
  for (int i = 0; i < 2; ++i) {
    auto p = open_partition(*config, i, false);
    if (!p.is_ok()) {
      std::cerr << p.status().to_string() << "\n";
      return 1;
    }
    parts.push_back(std::move(*p));
  }
  auto whole = rebuild(parts, "_N/" + o.feature);
  if (!whole.is_ok()) {
    std::cerr << whole.status().to_string() << "\n";
    return 1;
  }
  // Only the measured batches' edges are needed (unshuffled: the first ones).
  const size_t used = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(eids->size()), max_batches * batch));
  auto ends = endpoints(*whole, std::span<const int64_t>(*eids).first(used));
  if (!ends.is_ok()) {
    std::cerr << ends.status().to_string() << "\n";
    return 1;
  }
  const auto& [src, dst] = *ends;
  const int64_t num_nodes = config->num_nodes;
  std::printf("link benchmark: %lld nodes, %zu training edges on trainer 0, batch %lld, %d negative(s) per edge, fanouts %s, %d threads, %lld batches per run\n",
              static_cast<long long>(num_nodes), eids->size(), static_cast<long long>(batch), negatives,
              fanouts.c_str(), threads, static_cast<long long>(max_batches));

  // The two runs' first batch is the same batch: same positives, negatives and blocks.
  {
    auto dl = client::DistEdgeDataLoader::create(**cluster, *eids, o);
    if (!dl.is_ok()) {
      std::cerr << dl.status().to_string() << "\n";
      return 1;
    }
    auto d = (*dl)->make(kEpoch, 0);
    const AdjacencyView view{whole->indptr, whole->indices, whole->eids};
    LocalGraphSource source(view);
    MultiLayerNeighborSampler sampler(o.sampling);
    auto l = make_batch(sampler, source, src, dst, 0, std::min<int64_t>(batch, static_cast<int64_t>(used)), negatives,
                        num_nodes, client::batch_rng_seed(o.seed, kEpoch, 0));
    if (!d.is_ok() || !l.is_ok()) {
      std::cerr << (d.is_ok() ? l.status() : d.status()).to_string() << "\n";
      return 1;
    }
    const bool same = d->batch.mini_batch.seeds == l->mb.seeds && d->pos_u == l->pos_u && d->pos_v == l->pos_v &&
                      d->neg_v == l->neg_v && d->batch.mini_batch.input_nodes == l->mb.input_nodes;
    std::printf("first batch identical in both runs: %s (%zu endpoints, %zu input nodes)\n", same ? "yes" : "NO",
                l->mb.seeds.size(), l->mb.input_nodes.size());
  }

  // Warm the page cache once, unmeasured.
  (void)inprocess(*whole, src, dst, o, num_nodes, 2, 1);
  Run base = inprocess(*whole, src, dst, o, num_nodes, max_batches, threads);
  print(base);

  auto d = distributed(**cluster, *eids, o, max_batches, "loader");
  if (!d.is_ok()) {
    std::cerr << d.status().to_string() << "\n";
    return 1;
  }
  print(*d);
  auto local_opt = o;
  local_opt.negative_sampler = client::NegativeSampler::local_uniform;
  auto dl = distributed(**cluster, *eids, local_opt, max_batches, "local-uniform");
  if (!dl.is_ok()) {
    std::cerr << dl.status().to_string() << "\n";
    return 1;
  }
  print(*dl);

  const double r = base.edges_per_s() > 0 ? d->edges_per_s() / base.edges_per_s() : 0;
  const double rl = base.edges_per_s() > 0 ? dl->edges_per_s() / base.edges_per_s() : 0;
  nlohmann::json out;
  out["graph"] = config->graph_name;
  out["num_nodes"] = num_nodes;
  out["train_edges_trainer0"] = eids->size();
  out["batch_size"] = batch;
  out["num_negatives"] = negatives;
  out["fanouts"] = o.sampling.fanouts;
  out["threads"] = threads;
  out["prefetch"] = prefetch;
  out["runs"] = {{"inprocess", to_json(base)}, {"loader_uniform", to_json(*d)}, {"loader_local_uniform", to_json(*dl)}};
  out["ratios"]["link_loader_vs_inprocess_edges_per_s"] = {{"value", r}, {"target", 0.5}, {"met", r >= 0.5}};
  out["ratios"]["link_loader_local_uniform_vs_inprocess_edges_per_s"] = {{"value", rl}};
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  cluster->reset();
  for (auto it = procs.rbegin(); it != procs.rend(); ++it) it->signal(SIGTERM);
  for (auto& p : procs) p.wait(std::chrono::seconds(10));
  std::printf("ratio: link_loader_vs_inprocess_edges_per_s %.3f (target >= 0.5)\n", r);
  std::printf("ratio: link_loader_local_uniform_vs_inprocess_edges_per_s %.3f (for reference: negatives drawn over this machine's nodes)\n",
              rl);
  return 0;
}
