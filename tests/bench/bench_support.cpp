#include "tests/bench/bench_support.h"

#include <algorithm>
#include <chrono>

namespace dgld::bench {

Result<WholeGraph> rebuild(const std::vector<std::unique_ptr<MappedPartition>>& parts, const std::string& feature) {
  WholeGraph g;
  for (const auto& p : parts) {
    const auto globals = p->node_global_ids();
    const auto& in = p->in_edges();
    const TensorView* t = p->node_tensor(feature);
    if (!t || t->dtype != DType::float32) return invalid_argument("no float32 node tensor " + feature);
    g.dim = t->num_bytes / sizeof(float) / static_cast<size_t>(std::max<int64_t>(1, t->num_rows()));
    const float* base = reinterpret_cast<const float*>(t->data);
    for (int64_t v = 0; v < p->num_inner_nodes(); ++v) {
      for (int64_t k = in.indptr[v]; k < in.indptr[v + 1]; ++k) {
        g.indices.push_back(globals[in.indices[k]]);
        g.eids.push_back(in.eids[k]);
      }
      g.indptr.push_back(static_cast<int64_t>(g.indices.size()));
      g.rows.push_back(base + v * g.dim);
    }
  }
  return g;
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
