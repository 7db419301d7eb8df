#include "tests/bench/bench_support.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

namespace dgld::bench {

Result<WholeGraph> rebuild(const std::vector<std::unique_ptr<MappedPartition>>& parts, const std::string& feature) {
  WholeGraph g;
  for (const auto& p : parts) {
    const auto globals = p->node_global_ids();
    const auto& in = p->in_edges();
    const TensorView* t = feature.empty() ? nullptr : p->node_tensor(feature);
    if (!feature.empty() && (!t || t->dtype != DType::float32)) {
      return invalid_argument("no float32 node tensor " + feature);
    }
    if (t) g.dim = t->num_bytes / sizeof(float) / static_cast<size_t>(std::max<int64_t>(1, t->num_rows()));
    const float* base = t ? reinterpret_cast<const float*>(t->data) : nullptr;
    const auto etypes = p->edge_types();
    for (int64_t v = 0; v < p->num_inner_nodes(); ++v) {
      for (int64_t k = in.indptr[v]; k < in.indptr[v + 1]; ++k) {
        g.indices.push_back(globals[in.indices[k]]);
        g.eids.push_back(in.eids[k]);
        if (!etypes.empty()) g.etypes.push_back(etypes[k]);
      }
      g.indptr.push_back(static_cast<int64_t>(g.indices.size()));
      if (base) g.rows.push_back(base + v * g.dim);
    }
  }
  return g;
}

std::vector<std::span<const int64_t>> cut(const std::vector<int64_t>& ids, int64_t batch, int64_t max_batches) {
  std::vector<std::span<const int64_t>> out;
  for (int64_t b = 0; b * batch < static_cast<int64_t>(ids.size()) && b < max_batches; ++b) {
    const int64_t n = std::min<int64_t>(batch, static_cast<int64_t>(ids.size()) - b * batch);
    out.push_back(std::span<const int64_t>(ids).subspan(static_cast<size_t>(b * batch), static_cast<size_t>(n)));
  }
  return out;
}

Result<LoaderRun> measure_loader(client::Cluster& c, const std::vector<int64_t>& ids,
                                 const client::DataLoaderOptions& o, int64_t max_batches, const std::string& name) {
  using Clock = std::chrono::steady_clock;
  DGLD_ASSIGN_OR_RETURN(auto loader, client::DistDataLoader::create(c, ids, o));
  LoaderRun r{name};
  const int64_t n = std::min(max_batches, loader->num_batches_per_epoch());
  loader->start_epoch(0);
  for (int64_t i = 0; i < std::min<int64_t>(n, 2 * (o.prefetch + 2)); ++i) {
    DGLD_ASSIGN_OR_RETURN(auto b, loader->next());
    if (!b) break;
  }
  const auto t0 = Clock::now();
  loader->start_epoch(1);
  for (int64_t i = 0; i < n; ++i) {
    DGLD_ASSIGN_OR_RETURN(auto b, loader->next());
    if (!b) break;
    ++r.batches;
    r.seeds += static_cast<int64_t>(b->mini_batch.seeds.size());
    for (const Block& blk : b->mini_batch.blocks) r.edges += blk.num_edges();
    r.sample_s += b->timings.sample_s;
    r.fetch_s += b->timings.fetch_s;
    r.wait_s += b->timings.wait_s;
  }
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

LoaderRun run_inprocess(const std::vector<std::span<const int64_t>>& batches, int threads,
                        const std::function<Result<BatchCost>(int64_t b)>& make) {
  using Clock = std::chrono::steady_clock;
  std::atomic<int64_t> next{0};
  std::vector<BatchCost> sums(static_cast<size_t>(threads));
  std::atomic<bool> failed{false};
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int64_t b; !failed && (b = next++) < static_cast<int64_t>(batches.size());) {
        auto cost = make(b);
        if (!cost.is_ok()) {
          std::cerr << cost.status().to_string() << "\n";
          failed = true;
          return;
        }
        auto& s = sums[static_cast<size_t>(t)];
        s.sample_s += cost->sample_s;
        s.fetch_s += cost->fetch_s;
        s.edges += cost->edges;
      }
    });
  }
  for (auto& t : ts) t.join();
  LoaderRun r{"inprocess"};
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.batches = static_cast<int64_t>(batches.size());
  for (const auto& b : batches) r.seeds += static_cast<int64_t>(b.size());
  for (const auto& s : sums) r.sample_s += s.sample_s, r.fetch_s += s.fetch_s, r.edges += s.edges;
  if (failed) r.seeds = 0;
  return r;
}

std::vector<int64_t> parse_fanouts(const std::string& s) {
  std::vector<int64_t> out;
  for (size_t at = 0; at < s.size();) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::stoll(s.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

Result<std::vector<testing::Process>> start_two_servers(const std::string& part_config, const std::string& ip_config,
                                                        const testing::TempDir& logs) {
  std::vector<testing::Process> procs;
  for (int id = 0; id < 2; ++id) {
    procs.push_back(testing::Process::start(
        {(testing::build_root() / "daemons/graph_server/graph-server").string(), "--part-config", part_config,
         "--ip-config", ip_config, "--server-id", std::to_string(id), "--num-server-threads", "2"},
        logs.path() / ("server" + std::to_string(id) + ".log")));
  }
  for (auto& s : procs) {
    if (!s.wait_for_log("listening on", std::chrono::minutes(5))) {
      return internal_error("graph-server failed to start:\n" + s.log());
    }
  }
  return procs;
}

Result<std::string> start_sampler_worker(const std::string& part_config, const std::string& ip_config, int threads,
                                         const testing::TempDir& logs, std::vector<testing::Process>& procs) {
  procs.push_back(testing::Process::start(
      {(testing::build_root() / "daemons/sampler_worker/sampler-worker").string(), "--part-config", part_config,
       "--ip-config", ip_config, "--machine-id", "0", "--group", "0", "--listen-port", "0", "--num-threads",
       std::to_string(threads)},
      logs.path() / "worker.log"));
  if (!procs.back().wait_for_log("listening on", std::chrono::minutes(1))) {
    return internal_error("sampler-worker failed to start:\n" + procs.back().log());
  }
  const std::string log = procs.back().log();
  const std::string key = "listening on 127.0.0.1:";
  const auto at = log.find(key);
  if (at == std::string::npos) return internal_error("sampler-worker log lacks '" + key + "':\n" + log);
  return "127.0.0.1:" + std::to_string(std::stoi(log.substr(at + key.size())));
}

Result<std::unique_ptr<client::Cluster>> connect_trainer0(const std::string& part_config, const std::string& ip_config,
                                                          int num_trainers) {
  client::ClusterOptions co;
  co.ip_config = ip_config;
  co.part_config = part_config;
  co.machine_id = 0;
  co.requested_rank = 0;
  co.num_trainers = num_trainers;
  return client::Cluster::connect(co);
}

}  // namespace dgld::bench
