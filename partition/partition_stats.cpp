// PartitionStats as dgl-partition prints it and as --stats-json writes it.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "partition/partitioner.h"

namespace dgld {

std::string format_stats(const PartitionStats& s) {
  std::string out = fmt::format("partition config: {}\n", s.json_path);
  if (s.ntype_summary.empty()) {
    out += fmt::format("nodes {}  edges {}  feature dim {}\n", s.num_nodes, s.num_edges, s.feat_dim);
  } else {
    out += fmt::format("nodes {}  edges {}\n", s.num_nodes, s.num_edges);
    out += fmt::format("node types: {}\n", fmt::join(s.ntype_summary, ", "));
    out += fmt::format("edge types: {}\n", fmt::join(s.etype_summary, ", "));
  }
  out += fmt::format("edge cut {} ({:.2f}% of edges)\n", s.edge_cut,
                     s.num_edges ? 100.0 * static_cast<double>(s.edge_cut) / static_cast<double>(s.num_edges) : 0.0);
  out += fmt::format("{:>5} {:>12} {:>12} {:>13} {:>13} {:>13} {:>10}\n", "part", "owned", "halo", "owned edges",
                     "local edges", "out edges", "train");
  for (size_t i = 0; i < s.parts.size(); ++i) {
    const auto& p = s.parts[i];
    out += fmt::format("{:>5} {:>12} {:>12} {:>13} {:>13} {:>13} {:>10}\n", i, p.owned_nodes, p.halo_nodes,
                       p.owned_edges, p.local_edges, p.out_edges, p.train_nodes);
  }
  if (s.link_split) {
    out += fmt::format("link split: {} train / {} valid / {} test edges, {} negatives each\n", s.link_train,
                       s.link_valid, s.link_test, s.link_negatives);
  }
  out += fmt::format("balance (max/mean): nodes {:.3f}  edges {:.3f}  train {:.3f}\n", s.node_balance, s.edge_balance,
                     s.train_balance);
  out += fmt::format("time: load {:.2f} s, link split {:.2f} s, assign {:.2f} s (metis {:.2f} s), relabel {:.2f} s, "
                     "features {:.2f} s, write {:.2f} s, total {:.2f} s\n",
                     s.load_s, s.link_split_s, s.assign_s, s.metis_s, s.relabel_s, s.features_s, s.write_s, s.total_s);
  const double mib = 1 << 20;
  out += fmt::format("peak memory {:.1f} MiB: METIS call {:.1f} MiB, everything else {:.1f} MiB "
                     "(input CSR + features {:.1f} MiB)\n",
                     static_cast<double>(s.peak_rss_bytes) / mib, static_cast<double>(s.metis_peak_rss_bytes) / mib,
                     static_cast<double>(s.peak_rss_outside_metis_bytes) / mib, static_cast<double>(s.input_bytes) / mib);
  return out;
}

std::string stats_to_json(const PartitionStats& s) {
  nlohmann::json j;
  j["partition_config"] = s.json_path;
  j["num_nodes"] = s.num_nodes;
  j["num_edges"] = s.num_edges;
  j["feat_dim"] = s.feat_dim;
  j["edge_cut"] = s.edge_cut;
  j["edge_cut_fraction"] = s.num_edges ? static_cast<double>(s.edge_cut) / static_cast<double>(s.num_edges) : 0.0;
  j["parts"] = nlohmann::json::array();
  for (const auto& p : s.parts) {
    j["parts"].push_back({{"owned_nodes", p.owned_nodes}, {"halo_nodes", p.halo_nodes}, {"owned_edges", p.owned_edges},
                          {"local_edges", p.local_edges}, {"out_edges", p.out_edges}, {"train_nodes", p.train_nodes}});
  }
  j["balance"] = {{"nodes", s.node_balance}, {"edges", s.edge_balance}, {"train", s.train_balance}};
  if (s.link_split) {
    j["link_split"] = {{"num_train", s.link_train},
                       {"num_valid", s.link_valid},
                       {"num_test", s.link_test},
                       {"num_negatives", s.link_negatives}};
  }
  j["time_s"] = {{"load", s.load_s},         {"link_split", s.link_split_s}, {"assign", s.assign_s},
                 {"metis", s.metis_s},       {"relabel", s.relabel_s},       {"features", s.features_s},
                 {"write", s.write_s},       {"total", s.total_s}};
  j["peak_rss_bytes"] = s.peak_rss_bytes;
  j["metis_peak_rss_bytes"] = s.metis_peak_rss_bytes;
  j["peak_rss_outside_metis_bytes"] = s.peak_rss_outside_metis_bytes;
  j["input_bytes"] = s.input_bytes;
  return j.dump(2) + "\n";
}

}  // namespace dgld
