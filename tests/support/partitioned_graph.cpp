#include "tests/support/partitioned_graph.h"

#include <stdexcept>

namespace dgld::testing {

std::filesystem::path graph_server_bin() { return build_root() / "daemons/graph_server/graph-server"; }
std::filesystem::path partition_bin() { return build_root() / "partition/dgl-partition"; }
std::filesystem::path trainer_host_bin() { return build_root() / "daemons/trainer_host/trainer-host"; }

PartitionedGraph::PartitionedGraph(const std::string& spec, int num_parts, const std::string& dir_prefix,
                                   const std::vector<std::string>& extra_flags)
    : dir(dir_prefix) {
  json = dir.path() / "parts/g.json";
  std::vector<std::string> argv{partition_bin().string(), "--generate", spec, "--num-parts", std::to_string(num_parts),
                                "--graph-name", "g", "--output", (dir.path() / "parts").string()};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  auto p = Process::start(argv, dir.path() / "partition.log");
  if (p.wait(std::chrono::minutes(2)) != 0) throw std::runtime_error("dgl-partition failed: " + p.log());
  auto c = load_part_config(json);
  if (!c.is_ok()) throw std::runtime_error(c.status().message());
  config = *c;
  for (int i = 0; i < num_parts; ++i) {
    auto mp = open_partition(config, i, true);
    if (!mp.is_ok()) throw std::runtime_error(mp.status().message());
    parts.push_back(std::move(*mp));
    const auto& P = *parts.back();
    const auto g = P.node_global_ids();
    const auto& in = P.in_edges();
    const auto& out = P.out_edges();
    for (int64_t v = 0; v < P.num_inner_nodes(); ++v) {
      for (int64_t k = in.indptr[v]; k < in.indptr[v + 1]; ++k) {
        edges[in.eids[k]] = {g[in.indices[k]], g[v]};
        in_indices.push_back(g[in.indices[k]]);
        in_eids.push_back(in.eids[k]);
      }
      in_indptr.push_back(static_cast<int64_t>(in_indices.size()));
      for (int64_t k = out.indptr[v]; k < out.indptr[v + 1]; ++k) {
        out_indices.push_back(g[out.indices[k]]);
        out_eids.push_back(out.eids[k]);
      }
      out_indptr.push_back(static_cast<int64_t>(out_indices.size()));
    }
  }
}

int PartitionedGraph::owner(int64_t v) const {
  for (int m = 0; m < config.num_parts; ++m) {
    if (v >= config.node_map[m].start && v < config.node_map[m].end) return m;
  }
  return -1;
}

const std::byte* PartitionedGraph::node_row(const std::string& name, int64_t v) const {
  const int m = owner(v);
  const TensorView* t = parts[m]->node_tensor(name);
  const size_t row_bytes = t->num_bytes / static_cast<size_t>(t->num_rows());
  return t->data + static_cast<size_t>(v - config.node_map[m].start) * row_bytes;
}

}  // namespace dgld::testing
