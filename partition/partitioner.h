#pragma once
// dgl-partition's core: assign nodes to partitions (METIS or random), relabel so
// every partition owns one contiguous range of node and edge ids, and write the
// partition config plus one graph file and two feature files per partition.
// The output is assembled in a hidden sibling directory and renamed into place at
// the end; on any error nothing is left behind.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "partition/graph_data.h"
#include "partition/link_splitter.h"

namespace dgld {

struct PartitionOptions {
  int num_parts = 1;
  std::string part_method = "metis";  // "metis" or "random"
  bool balance_train = false;         // METIS constraint columns from the train mask
  bool balance_edges = false;         // METIS constraint column of in-degrees
  int num_hops = 1;                   // halo depth
  int num_trainers_per_machine = 1;
  std::string graph_name = "graph";
  std::filesystem::path output;
  uint64_t seed = 0;
  bool overwrite = false;             // replace an existing non-empty output directory
  // Write into an existing directory, replacing only the entries written
  // (<graph_name>.json, part<i>) and keeping its other files: DGL's
  // partition_graph (the Python package's).
  bool merge_into_output = false;
  // DGL's graph_formats ("coo", "csr", "csc"): recorded in the config for
  // load_partition (the files hold the same arrays whatever it names).
  std::vector<std::string> graph_formats;
  // Link-prediction split (--link-split, --link-negatives); its seed is `seed`.
  LinkSplitOptions link;
};

struct PartStats {
  int64_t owned_nodes = 0, halo_nodes = 0;
  int64_t owned_edges = 0, local_edges = 0, out_edges = 0;
  int64_t train_nodes = 0;
};

struct PartitionStats {
  int64_t num_nodes = 0, num_edges = 0, feat_dim = 0;
  int64_t edge_cut = 0;  // directed edges whose ends are in different partitions
  std::vector<PartStats> parts;
  // max / mean over partitions.
  double node_balance = 0, edge_balance = 0, train_balance = 0;
  // Seconds per phase; "metis" is the METIS call alone.
  double load_s = 0, assign_s = 0, metis_s = 0, relabel_s = 0, features_s = 0, write_s = 0, total_s = 0;
  // Link split (when link_split): training edges marked, held-out edges, negatives each.
  bool link_split = false;
  int64_t link_train = 0, link_valid = 0, link_test = 0, link_negatives = 0;
  double link_split_s = 0;
  int64_t peak_rss_bytes = 0;                // whole run (getrusage)
  int64_t metis_peak_rss_bytes = 0;          // during the METIS call (0 without METIS)
  int64_t peak_rss_outside_metis_bytes = 0;  // every other phase
  int64_t input_bytes = 0;  // int64 CSR (indptr + indices) plus float32 features
  // Heterogeneous graphs: "paper 20000 (32 features)" per node type, and
  // "author:writes:paper 59963" per edge type.
  std::vector<std::string> ntype_summary, etype_summary;
  std::string json_path;
};

// Checks options that do not depend on the graph (before any loading).
Status check_partition_options(const PartitionOptions& opts);

// Loads the graph from `source` and writes the partitions.
Status partition_graph(GraphSource& source, const PartitionOptions& opts, PartitionStats* stats);

// Human-readable summary and the same as JSON (for --stats-json).
std::string format_stats(const PartitionStats& s);
std::string stats_to_json(const PartitionStats& s);

}  // namespace dgld
