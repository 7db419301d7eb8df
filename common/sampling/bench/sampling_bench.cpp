// sampling-bench: throughput of the in-process sampler (the baseline every
// distributed run is compared with). Builds a random power-law-ish graph
// (default 1M nodes, ~20M edges), then samples GraphSAGE-style mini-batches
// (fanout 10,25, batch 1000) and prints seeds/s single-threaded, with a
// 2-thread pool inside each batch, and with 2 batches sampled concurrently.
//
// Usage: sampling-bench [--nodes=N] [--avg-degree=D] [--batch=B] [--batches=K] [--threads=T]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/sampling/multi_layer_sampler.h"
#include "common/random.h"
#include "common/sampling/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Graph {
  std::vector<int64_t> indptr, indices, eids;
  dgld::AdjacencyView view() const { return {indptr, indices, eids}; }
};

// In-degrees ~ Pareto(alpha 2, mean ~avg_degree) capped at n/50; sources drawn
// with a popularity skew (u^2 over a random permutation of the nodes).
Graph power_law_graph(int64_t n, double avg_degree, uint64_t seed) {
  dgld::StreamRng rng(seed, 0);
  Graph g;
  g.indptr.assign(n + 1, 0);
  const double x_min = avg_degree / 2.0;
  const auto cap = static_cast<double>(std::max<int64_t>(1, n / 50));
  for (int64_t v = 0; v < n; ++v) {
    const double d = std::min(cap, x_min / std::sqrt(1.0 - rng.uniform()));
    g.indptr[v + 1] = g.indptr[v] + static_cast<int64_t>(d);
  }
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  const int64_t m = g.indptr[n];
  g.indices.resize(m);
  g.eids.resize(m);
  for (int64_t e = 0; e < m; ++e) {
    const double u = rng.uniform();
    g.indices[e] = perm[std::min<int64_t>(n - 1, static_cast<int64_t>(u * u * n))];
    g.eids[e] = e;
  }
  return g;
}

struct Totals {
  int64_t seeds = 0, edges = 0, inputs = 0;
};

// Samples `batches` consecutive batches starting at batch `first`.
Totals run_batches(const dgld::MultiLayerNeighborSampler& sampler, dgld::NeighborSource& source,
                   const std::vector<int64_t>& order, int64_t batch, int64_t first,
                   int64_t batches) {
  Totals t;
  for (int64_t b = first; b < first + batches; ++b) {
    const int64_t begin = (b * batch) % static_cast<int64_t>(order.size() - batch);
    const std::span<const int64_t> seeds(order.data() + begin, batch);
    auto mb = sampler.sample(source, seeds, static_cast<uint64_t>(b));
    if (!mb.is_ok()) {
      std::fprintf(stderr, "sampling failed: %s\n", mb.status().to_string().c_str());
      std::exit(1);
    }
    t.seeds += batch;
    for (const dgld::Block& blk : mb->blocks) t.edges += blk.num_edges();
    t.inputs += static_cast<int64_t>(mb->input_nodes.size());
  }
  return t;
}

void report(const char* mode, const Totals& t, int64_t batches, double secs) {
  std::printf("%-34s %9.0f seeds/s  %7.1f batches/s  %8.2f ms/batch  edges/batch %8.0f  inputs/batch %8.0f\n",
              mode, t.seeds / secs, batches / secs, 1000.0 * secs / batches,
              double(t.edges) / batches, double(t.inputs) / batches);
}

int64_t flag(int argc, char** argv, const char* name, int64_t fallback) {
  const size_t len = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') return std::atoll(argv[i] + len + 1);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = flag(argc, argv, "--nodes", 1'000'000);
  const int64_t avg_degree = flag(argc, argv, "--avg-degree", 20);
  const int64_t batch = flag(argc, argv, "--batch", 1000);
  const int64_t batches = flag(argc, argv, "--batches", 100);
  const int threads = static_cast<int>(flag(argc, argv, "--threads", 2));

  auto t0 = Clock::now();
  const Graph g = power_law_graph(n, double(avg_degree), 42);
  int64_t max_degree = 0;
  for (int64_t v = 0; v < n; ++v) max_degree = std::max(max_degree, g.indptr[v + 1] - g.indptr[v]);
  std::printf("graph: %lld nodes, %lld edges, max in-degree %lld, built in %.2f s\n",
              (long long)n, (long long)g.indptr[n], (long long)max_degree, seconds_since(t0));

  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  dgld::StreamRng rng(7, 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);

  const dgld::MultiLayerNeighborSampler sampler({10, 25});
  std::printf("fanout 10,25 (input layer first), batch %lld, %lld batches per mode\n",
              (long long)batch, (long long)batches);

  dgld::LocalGraphSource serial(g.view());
  run_batches(sampler, serial, order, batch, 0, 5);  // warm caches and allocator
  t0 = Clock::now();
  Totals t = run_batches(sampler, serial, order, batch, 0, batches);
  report("1 thread", t, batches, seconds_since(t0));

  dgld::ThreadPool pool(threads);
  dgld::LocalGraphSource pooled(g.view(), {.pool = &pool});
  t0 = Clock::now();
  t = run_batches(sampler, pooled, order, batch, 0, batches);
  report(("pool of " + std::to_string(threads) + " inside each batch").c_str(), t, batches,
         seconds_since(t0));

  std::vector<Totals> per(threads);
  std::vector<std::thread> workers;
  const int64_t share = batches / threads;
  t0 = Clock::now();
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] { per[i] = run_batches(sampler, serial, order, batch, i * share, share); });
  }
  for (std::thread& w : workers) w.join();
  const double secs = seconds_since(t0);
  Totals sum;
  for (const Totals& p : per) {
    sum.seeds += p.seeds;
    sum.edges += p.edges;
    sum.inputs += p.inputs;
  }
  report((std::to_string(threads) + " batches concurrently").c_str(), sum, share * threads, secs);
  return 0;
}
