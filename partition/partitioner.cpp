#include "partition/partitioner.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "common/file_util.h"
#include "common/logging.h"
#include "common/part_config.h"
#include "common/partition/array_file.h"
#include "partition/assign.h"
#include "partition/layout.h"
#include "partition/part_writer.h"
#include "partition/progress.h"
#include "partition/staging.h"

namespace dgld {
namespace {

double balance(const std::vector<PartStats>& parts, int64_t PartStats::*field) {
  int64_t total = 0, mx = 0;
  for (const auto& p : parts) {
    total += p.*field;
    mx = std::max(mx, p.*field);
  }
  if (total == 0) return 1.0;
  return static_cast<double>(mx) * static_cast<double>(parts.size()) / static_cast<double>(total);
}

// Named tensors of `kind` ("node", "edge"): one row per node (edge), a name
// of their own under `prefix` that fits an array file, a type and a shape it
// can hold.
Status check_named_tensors(const std::vector<NamedTensor>& ts, const char* kind, int64_t rows,
                           const std::string& prefix, const std::vector<std::string>& reserved,
                           const std::string& what) {
  std::vector<std::string> seen;
  for (const NamedTensor& t : ts) {
    const std::string w = what + ": " + kind + " data '" + t.name + "'";
    if (t.name.empty()) return invalid_argument(what + ": " + kind + " data with an empty name");
    if (prefix.size() + t.name.size() > kMaxArrayName) {
      return invalid_argument(w + ": the name is too long (a partition file takes at most " +
                              std::to_string(kMaxArrayName - prefix.size()) + " bytes after '" + prefix + "')");
    }
    if (std::find(reserved.begin(), reserved.end(), t.name) != reserved.end()) {
      return invalid_argument(w + ": the name is the partitioner's own (" + prefix + t.name + ")");
    }
    if (std::find(seen.begin(), seen.end(), t.name) != seen.end()) return invalid_argument(w + " is given twice");
    seen.push_back(t.name);
    if (t.shape.empty() || t.shape.size() > kMaxArrayDims) {
      return invalid_argument(w + " has " + std::to_string(t.shape.size()) + " dimensions; partition files take 1 to " +
                              std::to_string(kMaxArrayDims));
    }
    if (t.shape[0] != rows) {
      return invalid_argument(w + " has " + std::to_string(t.shape[0]) + " rows, expected " + std::to_string(rows) +
                              " (one per " + kind + ")");
    }
    for (int64_t d : t.shape) {
      if (d < 0) return invalid_argument(w + " has a negative dimension");
    }
    if (dtype_file_code(t.dtype) == 0) {
      return invalid_argument(w + " has dtype " + dtype_name(t.dtype) +
                              "; partition files hold uint8, int32, int64, float32 and float64");
    }
    if (t.data == nullptr && rows * t.row_bytes() > 0) return invalid_argument(w + " has no data");
  }
  return Status::ok();
}

// Each type's named tensors of a heterogeneous input: `counts[t]` rows of type
// t, names under "<type name>/".
Status check_typed_tensors(const std::vector<NamedTensor>& ts, const char* kind, const std::vector<int64_t>& counts,
                           const std::vector<std::string>& names, const std::string& what) {
  for (size_t t = 0; t < names.size(); ++t) {
    std::vector<NamedTensor> of_type;
    for (const NamedTensor& x : ts) {
      if (x.type == static_cast<int32_t>(t)) of_type.push_back(x);
    }
    DGLD_RETURN_IF_ERROR(check_named_tensors(of_type, kind, counts[t], names[t] + "/", {"trainer_id"}, what));
  }
  for (const NamedTensor& x : ts) {
    if (x.type < 0 || x.type >= static_cast<int32_t>(names.size())) {
      return invalid_argument(what + ": " + kind + " data '" + x.name + "' has type " + std::to_string(x.type) +
                              ", outside [0, " + std::to_string(names.size()) + ")");
    }
  }
  return Status::ok();
}

// The named tensors and balance types of an in-memory input (graph_data.h).
Status check_named_data(const GraphData& g, const PartitionOptions& o, const std::string& what) {
  if (g.types.present()) {
    if (!g.balance_type.empty()) {
      return invalid_argument(what + ": balance types of heterogeneous graphs are not supported yet");
    }
    const GraphTypes& ty = g.types;
    std::vector<int64_t> ncount, ecount(ty.num_etypes(), 0);
    std::vector<std::string> enames;
    for (int t = 0; t < ty.num_ntypes(); ++t) ncount.push_back(ty.count(t));
    for (int32_t e : g.edge_type) ++ecount[e];
    for (const CanonicalEtype& e : ty.etypes) enames.push_back(e.name());
    DGLD_RETURN_IF_ERROR(check_typed_tensors(g.node_tensors, "node", ncount, ty.ntypes, what));
    return check_typed_tensors(g.edge_tensors, "edge", ecount, enames, what);
  }
  if (!g.balance_type.empty()) {
    if (o.balance_train) return invalid_argument(what + ": balance types and --balance-train exclude each other");
    if (static_cast<int64_t>(g.balance_type.size()) != g.num_nodes || g.num_balance_types < 1) {
      return invalid_argument(what + ": " + std::to_string(g.balance_type.size()) + " balance types for " +
                              std::to_string(g.num_nodes) + " nodes");
    }
    for (int64_t v = 0; v < g.num_nodes; ++v) {
      if (g.balance_type[v] < 0 || g.balance_type[v] >= g.num_balance_types) {
        return invalid_argument(what + ": node " + std::to_string(v) + " has balance type " +
                                std::to_string(g.balance_type[v]) + ", outside [0, " +
                                std::to_string(g.num_balance_types) + ")");
      }
    }
  }
  const PartitionConfig names;
  // The partitioner's own arrays: "features" (float32) and the rest only when
  // the input has them, so an in-memory graph's integer features keep their
  // dtype under that name (as DGL's partition_graph keeps them).
  std::vector<std::string> node_reserved{"trainer_id", "orig_id"};
  if (g.feat_dim > 0) node_reserved.push_back("features");
  if (!g.labels.empty()) node_reserved.push_back("labels");
  const std::pair<const char*, const std::vector<uint8_t>*> masks[] = {
      {"train_mask", &g.train_mask}, {"val_mask", &g.val_mask}, {"test_mask", &g.test_mask}};
  for (const auto& [name, m] : masks) {
    if (!m->empty()) node_reserved.push_back(name);
  }
  DGLD_RETURN_IF_ERROR(check_named_tensors(g.node_tensors, "node", g.num_nodes, names.ntype + "/", node_reserved,
                                           what));
  std::vector<std::string> edge_reserved{"trainer_id"};
  if (o.link.random || g.edge_split.present) edge_reserved.push_back("train_mask");
  return check_named_tensors(g.edge_tensors, "edge", g.num_edges(), names.etype + "/", edge_reserved, what);
}

}  // namespace

Status check_partition_options(const PartitionOptions& o) {
  if (o.num_parts < 1) return invalid_argument("--num-parts must be >= 1, got " + std::to_string(o.num_parts));
  if (o.part_method != "metis" && o.part_method != "random") {
    return invalid_argument("--part-method must be metis or random, got '" + o.part_method + "'");
  }
  if (o.num_hops < 1) return invalid_argument("--num-hops must be >= 1, got " + std::to_string(o.num_hops));
  if (o.num_trainers_per_machine < 1) {
    return invalid_argument("--num-trainers-per-machine must be >= 1, got " + std::to_string(o.num_trainers_per_machine));
  }
  if (o.graph_name.empty() || o.graph_name.find('/') != std::string::npos) {
    return invalid_argument("--graph-name must be a non-empty file name, got '" + o.graph_name + "'");
  }
  if (o.output.empty()) return invalid_argument("--output is required");
  for (const std::string& f : o.graph_formats) {
    if (f != "coo" && f != "csr" && f != "csc") {
      return invalid_argument("graph_formats: expected \"coo\", \"csr\" or \"csc\", got \"" + f + "\"");
    }
  }
  return check_link_split_options(o.link);
}

Status partition_graph(GraphSource& source, const PartitionOptions& o, PartitionStats* stats) {
  auto log = logger("partition");
  const auto t_total = PartitionClock::now();
  DGLD_RETURN_IF_ERROR(check_partition_options(o));
  DGLD_ASSIGN_OR_RETURN(auto staging, StagingDir::create(o.output, o.overwrite || o.merge_into_output));

  GraphData g;
  auto t = PartitionClock::now();
  log->info("loading {}", source.describe());
  DGLD_RETURN_IF_ERROR(source.load_structure(&g));
  stats->load_s = seconds_since(t);
  const int64_t n = g.num_nodes;
  if (n < 1) return invalid_argument(source.describe() + ": empty graph (no nodes)");
  if (g.num_edges() < 1) return invalid_argument(source.describe() + ": empty graph (no edges)");
  const int64_t pieces = int64_t{o.num_parts} * o.num_trainers_per_machine;
  if (pieces > n) {
    return invalid_argument("--num-parts " + std::to_string(o.num_parts) + " x --num-trainers-per-machine " +
                            std::to_string(o.num_trainers_per_machine) + " is larger than the node count " +
                            std::to_string(n));
  }
  if (o.balance_train && g.train_mask.empty()) {
    return invalid_argument("--balance-train needs a train mask, and " + source.describe() + " has none");
  }
  DGLD_RETURN_IF_ERROR(check_named_data(g, o, source.describe()));
  log->info("loaded {} nodes, {} edges in {:.2f} s ({})", n, g.num_edges(), stats->load_s, memory_note());
  PartitionOptions opts = o;  // a heterogeneous graph may turn train balancing on
  if (g.types.present()) {
    if (o.link.random || g.edge_split.present) {
      return invalid_argument(source.describe() +
                              ": link prediction splits of heterogeneous graphs are not supported yet");
    }
    // DGL partitions a heterogeneous graph with the target type's train mask as
    // a balance constraint; so does dgld when there is a train mask.
    if (!g.train_mask.empty() && !opts.balance_train && o.part_method == "metis" && pieces > 1) {
      opts.balance_train = true;
      log->info("heterogeneous graph: balancing the partitions' train nodes (as --balance-train)");
    }
  }

  // The link split comes first, so METIS and everything after see the graph
  // without its held-out edges.
  LinkSplitResult link;
  t = PartitionClock::now();
  {
    LinkSplitOptions lo = o.link;
    lo.seed = o.seed;
    DGLD_RETURN_IF_ERROR(apply_link_split(lo, source.describe(), &g, &link));
    g.edge_split = {};
  }
  stats->link_split_s = seconds_since(t);

  Layout L(g);
  L.num_parts = o.num_parts;
  t = PartitionClock::now();
  if (pieces == 1) {
    L.piece.assign(n, 0);
  } else if (o.part_method == "metis") {
    stats->peak_rss_outside_metis_bytes = phase_peak_rss_bytes();
    reset_peak_rss();
    DGLD_RETURN_IF_ERROR(metis_assign(g, opts, &L.piece, &stats->metis_s));
    stats->metis_peak_rss_bytes = phase_peak_rss_bytes();
    reset_peak_rss();
  } else {
    random_assign(n, static_cast<int>(pieces), o.seed, &L.piece);
  }
  stats->assign_s = seconds_since(t);

  t = PartitionClock::now();
  // One partition keeps the input's ids (DGL's); its edges' only when none is held out.
  build_layout(o.num_trainers_per_machine, &L, !link.present);
  LinkBuckets link_buckets(o.num_parts);
  if (link.present) {
    const HeldOutEdges* sets[2] = {&link.valid, &link.test};
    for (int s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < sets[s]->size(); ++i) link_buckets[L.part[sets[s]->dst[i]]][s].push_back(i);
    }
  }
  stats->relabel_s = seconds_since(t);

  t = PartitionClock::now();
  if (g.feat_dim > 0) log->info("loading node features ({} x {})", n, g.feat_dim);
  DGLD_RETURN_IF_ERROR(source.load_features(&g));
  log->info("features loaded ({})", memory_note());
  stats->features_s = seconds_since(t);

  t = PartitionClock::now();
  stats->parts.assign(o.num_parts, {});
  stats->edge_cut = 0;
  PartitionConfig c;
  c.graph_name = o.graph_name;
  c.num_nodes = n;
  c.num_edges = g.num_edges();
  c.part_method = o.part_method;
  c.num_parts = o.num_parts;
  c.halo_hops = o.num_hops;
  c.node_map = L.node_map;
  c.edge_map = L.edge_map;
  c.num_trainers_per_machine = o.num_trainers_per_machine;
  c.graph_formats = o.graph_formats;
  if (g.types.present()) {
    GraphTypeInfo& ti = c.types;
    ti.ntypes = g.types.ntypes;
    ti.ntype_map = L.ntype_map;
    for (int t = 0; t < g.types.num_ntypes(); ++t) ti.ntype_count.push_back(g.types.count(t));
    ti.etype_count.assign(g.types.num_etypes(), 0);
    for (int32_t e : g.edge_type) ++ti.etype_count[e];
    for (const CanonicalEtype& e : g.types.etypes) {
      ti.etypes.push_back(e.name());
      ti.etype_src.push_back(e.src_type);
      ti.etype_dst.push_back(e.dst_type);
    }
    ti.etype_map = L.etype_map;
    if (g.types.target >= 0) ti.target_ntype = g.types.ntypes[g.types.target];
  }
  for (int p = 0; p < o.num_parts; ++p) {
    const std::string dir = "part" + std::to_string(p);
    c.parts.push_back({dir + "/node_feat.dgld", dir + "/edge_feat.dgld", dir + "/graph.dgld",
                       link.present ? dir + "/link_split.dgld" : ""});
  }
  if (link.present) {
    LinkSplitInfo& ls = c.link_split;
    ls.present = true;
    ls.source = link.source;
    ls.fractions = link.fractions;
    ls.seed = link.seed;
    ls.num_negatives = link.num_negatives;
    ls.num_train = link.num_train;
    ls.num_valid = link.valid.size();
    ls.num_test = link.test.size();
    ls.symmetric = link.symmetric;
  }
  {
    // One builder per thread, each taking the next partition; the first error wins.
    const int threads = std::min<int>(o.num_parts, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    std::vector<Status> results(o.num_parts);
    std::vector<int64_t> cuts(o.num_parts, 0);
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    auto work = [&] {
      PartitionWriter builder(L, o, link, link_buckets);
      for (int p; !failed && (p = next.fetch_add(1)) < o.num_parts;) {
        results[p] = builder.write(p, staging->path() / ("part" + std::to_string(p)), &stats->parts[p], &cuts[p]);
        if (!results[p].is_ok()) {
          failed = true;
          break;
        }
        log->info("partition {}: {} owned + {} halo nodes, {} local edges ({})", p, stats->parts[p].owned_nodes,
                  stats->parts[p].halo_nodes, stats->parts[p].local_edges, memory_note());
      }
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
    for (int p = 0; p < o.num_parts; ++p) {
      DGLD_RETURN_IF_ERROR(results[p]);
      stats->edge_cut += cuts[p];
    }
  }
  const std::string json_name = o.graph_name + ".json";
  DGLD_RETURN_IF_ERROR(validate_part_config(c, json_name));
  DGLD_RETURN_IF_ERROR(write_file_atomic(staging->path() / json_name, part_config_to_json(c)));
  DGLD_RETURN_IF_ERROR(o.merge_into_output ? staging->commit_into() : staging->commit());
  stats->write_s = seconds_since(t);

  stats->num_nodes = n;
  stats->num_edges = g.num_edges();
  stats->feat_dim = g.feat_dim;
  stats->node_balance = balance(stats->parts, &PartStats::owned_nodes);
  stats->edge_balance = balance(stats->parts, &PartStats::owned_edges);
  stats->train_balance = balance(stats->parts, &PartStats::train_nodes);
  stats->link_split = link.present;
  stats->link_train = link.num_train;
  stats->link_valid = link.valid.size();
  stats->link_test = link.test.size();
  stats->link_negatives = link.num_negatives;
  stats->input_bytes = (n + 1) * 8 + g.num_edges() * 8 + n * g.feat_dim * 4;
  for (int t = 0; t < g.types.num_ntypes(); ++t) {
    stats->input_bytes += g.types.count(t) * g.types.feat_dim[t] * 4;
    std::string line = fmt::format("{} {}", g.types.ntypes[t], g.types.count(t));
    if (g.types.feat_dim[t] > 0) line += fmt::format(" ({} features)", g.types.feat_dim[t]);
    if (t == g.types.target) line += " [labelled]";
    stats->ntype_summary.push_back(std::move(line));
  }
  for (int e = 0; e < g.types.num_etypes(); ++e) {
    stats->etype_summary.push_back(fmt::format("{} {}", c.types.etypes[e], c.types.etype_count[e]));
  }
  stats->json_path = (staging->final_path() / json_name).string();
  stats->total_s = seconds_since(t_total);
  // Resetting VmHWM resets getrusage's figure too, so the whole-run peak is the max.
  stats->peak_rss_outside_metis_bytes = std::max(stats->peak_rss_outside_metis_bytes, phase_peak_rss_bytes());
  stats->peak_rss_bytes = std::max({peak_rss_bytes(), stats->metis_peak_rss_bytes, stats->peak_rss_outside_metis_bytes});
  return Status::ok();
}

}  // namespace dgld
