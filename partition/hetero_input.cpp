#include "partition/hetero_input.h"

#include <algorithm>
#include <climits>
#include <numeric>

#include "common/logging.h"
#include "partition/ogb_csv.h"
#include "partition/text_reader.h"

namespace dgld {
namespace fs = std::filesystem;
namespace {

using ogb_csv::feature_dim;
using ogb_csv::for_each_int;
using ogb_csv::read_single_int;

constexpr int64_t kMaxNodes = INT32_MAX;

// The names of the subdirectories of `dir`, sorted (none when it does not exist).
std::vector<std::string> subdirectories(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code ec2;
    if (entry.is_directory(ec2)) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// raw/num-node-dict.csv: node type names on line 1, their counts on line 2.
Status read_node_dict(const fs::path& path, GraphTypes* t) {
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  std::string_view line;
  DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
  if (!more) {
    return invalid_argument(
        path.string() +
        ": empty file, expected the node type names (line 1) and their counts (line 2)");
  }
  std::string_view rest = line;
  for (;;) {
    const auto comma = rest.find(',');
    std::string name = trim(rest.substr(0, comma));
    const int col = static_cast<int>(t->ntypes.size()) + 1;
    if (name.empty()) return r->error("column " + std::to_string(col) + ": empty node type name");
    if (name.find(':') != std::string::npos || name.find("___") != std::string::npos) {
      return r->error("column " + std::to_string(col) + ": node type name '" + name +
                      "' may not contain ':' or '___'");
    }
    if (std::find(t->ntypes.begin(), t->ntypes.end(), name) != t->ntypes.end()) {
      return r->error("column " + std::to_string(col) + ": node type '" + name +
                      "' is listed twice");
    }
    t->ntypes.push_back(std::move(name));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  DGLD_ASSIGN_OR_RETURN(more, r->next_line(&line));
  if (!more) {
    return invalid_argument(path.string() + ": has no line 2, expected the counts of the " +
                            std::to_string(t->ntypes.size()) + " node types (" + join(t->ntypes) +
                            ")");
  }
  std::vector<int64_t> counts(t->ntypes.size());
  DGLD_RETURN_IF_ERROR(parse_fields(*r, line, counts.data(), counts.size()));
  t->ntype_offset.assign(1, 0);
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0) {
      return r->error("column " + std::to_string(i + 1) + ": negative count " +
                      std::to_string(counts[i]) + " for node type '" + t->ntypes[i] + "'");
    }
    if (t->ntype_offset.back() + counts[i] > kMaxNodes) {
      return r->error("more than 2^31-1 nodes in all are not supported");
    }
    t->ntype_offset.push_back(t->ntype_offset.back() + counts[i]);
  }
  if (t->ntype_offset.back() == 0) return r->error("no nodes (every count is 0)");
  DGLD_ASSIGN_OR_RETURN(more, r->next_line(&line));
  if (more) return r->error("unexpected line, expected 2 lines (node type names, counts)");
  return Status::ok();
}

int32_t find_type(const GraphTypes& t, const std::string& name) {
  for (int i = 0; i < t.num_ntypes(); ++i) {
    if (t.ntypes[i] == name) return i;
  }
  return -1;
}

// Edges "src,dst" of relation `et` in per-type ids, appended in homogeneous ids.
Status read_relation_edges(const fs::path& path, const GraphTypes& t, int32_t etype,
                           TypedEdgeList* out, int64_t* count) {
  const CanonicalEtype& et = t.etypes[etype];
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  std::string_view line;
  int64_t v[2];
  const int32_t types[2] = {et.src_type, et.dst_type};
  const int64_t before = static_cast<int64_t>(out->size());
  for (;;) {
    DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
    if (!more) break;
    DGLD_RETURN_IF_ERROR(parse_fields(*r, line, v, 2));
    for (int k = 0; k < 2; ++k) {
      const int64_t n = t.count(types[k]);
      if (v[k] < 0 || v[k] >= n) {
        return r->error("column " + std::to_string(k + 1) + " (" +
                        (k == 0 ? "source" : "destination") + ", type '" + t.ntypes[types[k]] +
                        "'): node id " + std::to_string(v[k]) + " is out of range [0, " +
                        std::to_string(n) + ") (node type '" + t.ntypes[types[k]] + "' has " +
                        std::to_string(n) + " nodes)");
      }
    }
    out->src.push_back(static_cast<int32_t>(t.ntype_offset[et.src_type] + v[0]));
    out->dst.push_back(static_cast<int32_t>(t.ntype_offset[et.dst_type] + v[1]));
    out->etype.push_back(etype);
  }
  *count = static_cast<int64_t>(out->size()) - before;
  return Status::ok();
}

// n rows of d floats, one per `kind` ("node", "edge") of `of` ("type 'paper'").
Status read_features(const fs::path& path, const std::string& kind, const std::string& of, int64_t n,
                     int64_t d, std::vector<float>* out) {
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  out->assign(static_cast<size_t>(n * d), 0.0f);
  std::string_view line;
  int64_t row = 0;
  for (;;) {
    DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
    if (!more) break;
    if (row == n) {
      return r->error("more feature rows than the " + std::to_string(n) + " " + kind + "s of " + of);
    }
    DGLD_RETURN_IF_ERROR(parse_fields(*r, line, out->data() + row * d, static_cast<size_t>(d)));
    ++row;
  }
  if (row != n) {
    return invalid_argument(path.string() + ": has " + std::to_string(row) +
                            " feature rows, expected " + std::to_string(n) + ", one per " + kind + " of " +
                            of + " (features missing for " + kind + " " + std::to_string(row) + ")");
  }
  return Status::ok();
}

class OgbHeteroSource final : public GraphSource {
 public:
  explicit OgbHeteroSource(HeteroOgbOptions o) : o_(std::move(o)) {}
  std::string describe() const override { return "ogb-hetero:" + o_.dir.string(); }

  Status load_structure(GraphData* g) override {
    auto log = logger("partition");
    const fs::path raw = o_.dir / "raw";
    GraphTypes t;
    DGLD_ASSIGN_OR_RETURN(const fs::path dict, ogb_csv::require(raw, "num-node-dict"));
    DGLD_RETURN_IF_ERROR(read_node_dict(dict, &t));
    auto unknown_type = [&](const fs::path& where, const std::string& name) {
      return invalid_argument(where.string() + ": node type '" + name + "' is not in " +
                              dict.string() + " (known: " + join(t.ntypes) + ")");
    };

    // Relations: names first, so a bad directory is reported before reading edges.
    const fs::path rel_root = raw / "relations";
    const std::vector<std::string> rel_dirs = subdirectories(rel_root);
    if (rel_dirs.empty()) {
      return not_found("no relations: expected directories " +
                       (rel_root / "<src>___<rel>___<dst>").string() + " holding edge.csv[.gz]");
    }
    for (const std::string& name : rel_dirs) {
      const fs::path where = rel_root / name;
      const auto a = name.find("___");
      const auto b = a == std::string::npos ? std::string::npos : name.find("___", a + 3);
      if (a == std::string::npos || b == std::string::npos || a == 0 || b == a + 3 ||
          b + 3 == name.size() || name.find("___", b + 3) != std::string::npos) {
        return invalid_argument(where.string() + ": malformed relation directory name '" + name +
                                "', expected <src>___<rel>___<dst> (e.g. author___writes___paper)");
      }
      CanonicalEtype et;
      et.src = name.substr(0, a);
      et.rel = name.substr(a + 3, b - a - 3);
      et.dst = name.substr(b + 3);
      if (et.rel.find(':') != std::string::npos) {
        return invalid_argument(where.string() + ": relation name '" + et.rel +
                                "' may not contain ':'");
      }
      et.src_type = find_type(t, et.src);
      if (et.src_type < 0) return unknown_type(where, et.src);
      et.dst_type = find_type(t, et.dst);
      if (et.dst_type < 0) return unknown_type(where, et.dst);
      t.etypes.push_back(std::move(et));
    }

    // Features: the first row of each file fixes its type's dimension.
    t.feat_dim.assign(t.ntypes.size(), 0);
    feat_files_.assign(t.ntypes.size(), fs::path());
    const fs::path feat_root = raw / "node-feat";
    for (const std::string& name : subdirectories(feat_root)) {
      const int32_t ty = find_type(t, name);
      if (ty < 0) return unknown_type(feat_root / name, name);
      DGLD_ASSIGN_OR_RETURN(feat_files_[ty], ogb_csv::require(feat_root / name, "node-feat"));
      DGLD_ASSIGN_OR_RETURN(t.feat_dim[ty], feature_dim(feat_files_[ty]));
    }

    // The target type: the one with labels, or --target-ntype.
    const fs::path label_root = raw / "node-label";
    std::vector<fs::path> label_files(t.ntypes.size());
    std::vector<std::string> labelled;
    for (const std::string& name : subdirectories(label_root)) {
      const int32_t ty = find_type(t, name);
      if (ty < 0) return unknown_type(label_root / name, name);
      label_files[ty] = ogb_csv::find(label_root / name, "node-label");
      if (!label_files[ty].empty()) labelled.push_back(name);
    }
    if (!o_.target_ntype.empty()) {
      t.target = find_type(t, o_.target_ntype);
      if (t.target < 0) {
        return invalid_argument("--target-ntype '" + o_.target_ntype + "' is not a node type of " +
                                dict.string() + " (known: " + join(t.ntypes) + ")");
      }
      if (label_files[t.target].empty()) {
        return not_found("missing labels for the target type '" + o_.target_ntype + "': expected " +
                         (label_root / o_.target_ntype / "node-label.csv").string() + "[.gz]" +
                         (labelled.empty() ? std::string(" (no node type has labels)")
                                           : " (node types with labels: " + join(labelled) + ")"));
      }
    } else if (labelled.size() == 1) {
      t.target = find_type(t, labelled[0]);
    } else if (labelled.size() > 1) {
      return invalid_argument(label_root.string() + ": several node types have labels (" +
                              join(labelled) + "); choose the target type with --target-ntype");
    }

    // Edges, in relation order, then the reverse relations; each relation's
    // edge features (edge-feat.csv[.gz], optional) are read with the node features.
    TypedEdgeList edges;
    edge_feat_files_.assign(t.etypes.size(), fs::path());
    relation_edges_.assign(t.etypes.size(), 0);
    t.edge_feat_dim.assign(t.etypes.size(), 0);
    t.edge_feat_of.resize(t.etypes.size());
    std::iota(t.edge_feat_of.begin(), t.edge_feat_of.end(), 0);
    for (int32_t r = 0; r < t.num_etypes(); ++r) {
      const fs::path dir = rel_root / rel_dirs[r];
      DGLD_ASSIGN_OR_RETURN(const fs::path edge_file, ogb_csv::require(dir, "edge"));
      if (fs::path f = ogb_csv::find(dir, "edge-feat"); !f.empty()) {
        DGLD_ASSIGN_OR_RETURN(t.edge_feat_dim[r], feature_dim(f));
        edge_feat_files_[r] = std::move(f);
      }
      t.etype_first_orig.push_back(static_cast<int64_t>(edges.size()));
      int64_t count = 0;
      DGLD_RETURN_IF_ERROR(read_relation_edges(edge_file, t, r, &edges, &count));
      if (const fs::path f = ogb_csv::find(dir, "num-edge-list"); !f.empty()) {
        DGLD_ASSIGN_OR_RETURN(int64_t listed, read_single_int(f));
        if (listed != count) {
          return invalid_argument(f.string() + ":1: " + std::to_string(listed) + " edges, but " +
                                  edge_file.string() + " has " + std::to_string(count) + " edges");
        }
      }
      relation_edges_[r] = count;
      log->info("{}: {} edges of {}", edge_file.string(), count, t.etypes[r].name());
    }
    if (edges.size() == 0)
      return invalid_argument(rel_root.string() + ": no edges in any relation (empty graph)");
    if (o_.add_reverse) DGLD_RETURN_IF_ERROR(add_reverse_relations(&t, &edges));
    const int64_t n = t.ntype_offset.back();
    build_typed_graph(n, &edges, g);
    g->feat_dim = 0;
    g->features.clear();

    if (t.target >= 0) {
      DGLD_RETURN_IF_ERROR(read_labels(label_files[t.target], t, g));
      DGLD_RETURN_IF_ERROR(load_split(t, g));
    }
    g->types = std::move(t);
    return Status::ok();
  }

  Status load_features(GraphData* g) override {
    GraphTypes& t = g->types;
    t.type_features.assign(t.ntypes.size(), {});
    for (int ty = 0; ty < t.num_ntypes(); ++ty) {
      if (feat_files_[ty].empty()) continue;
      DGLD_RETURN_IF_ERROR(read_features(feat_files_[ty], "node", "type '" + t.ntypes[ty] + "'", t.count(ty),
                                         t.feat_dim[ty], &t.type_features[ty]));
    }
    t.edge_features.assign(t.etypes.size(), {});
    for (size_t et = 0; et < edge_feat_files_.size(); ++et) {
      if (edge_feat_files_[et].empty()) continue;
      DGLD_RETURN_IF_ERROR(read_features(edge_feat_files_[et], "edge", "relation " + t.etypes[et].name(),
                                         relation_edges_[et], t.edge_feat_dim[et], &t.edge_features[et]));
    }
    return Status::ok();
  }

 private:
  Status read_labels(const fs::path& path, const GraphTypes& t, GraphData* g) {
    const int64_t n = t.count(t.target), off = t.ntype_offset[t.target];
    const std::string& name = t.ntypes[t.target];
    g->labels.assign(static_cast<size_t>(t.ntype_offset.back()), -1);
    int64_t row = 0;
    DGLD_RETURN_IF_ERROR(for_each_int(path, [&](int64_t v, const TextReader& r) {
      if (row == n)
        return r.error("more labels than the " + std::to_string(n) + " nodes of type '" + name +
                       "'");
      g->labels[off + row++] = v;
      return Status::ok();
    }));
    if (row != n) {
      return invalid_argument(path.string() + ": has " + std::to_string(row) +
                              " labels, expected " + std::to_string(n) +
                              ", one per node of type '" + name + "' (label missing for node " +
                              std::to_string(row) + ")");
    }
    return Status::ok();
  }

  Status load_split(const GraphTypes& t, GraphData* g) {
    const fs::path split_root = o_.dir / "split";
    std::string split = o_.split;
    std::error_code ec;
    if (split.empty()) {
      const std::vector<std::string> names = subdirectories(split_root);
      if (names.empty()) return Status::ok();  // no split: no masks
      if (names.size() > 1) {
        return invalid_argument(split_root.string() + ": several splits (" + join(names) +
                                "); choose one with --split");
      }
      split = names[0];
    }
    const fs::path split_dir = split_root / split;
    if (!fs::is_directory(split_dir, ec))
      return not_found("split directory " + split_dir.string() + " does not exist");
    const std::string& name = t.ntypes[t.target];
    const fs::path dir = split_dir / name;
    if (!fs::is_directory(dir, ec)) {
      const std::vector<std::string> found = subdirectories(split_dir);
      return not_found("split " + split_dir.string() + " has no directory for the target type '" +
                       name + "': expected " + (dir / "{train,valid,test}.csv").string() + "[.gz]" +
                       (found.empty() ? std::string() : " (found: " + join(found) + ")"));
    }
    DGLD_ASSIGN_OR_RETURN(fs::path tr, ogb_csv::require(dir, "train"));
    DGLD_ASSIGN_OR_RETURN(fs::path va, ogb_csv::require(dir, "valid"));
    DGLD_ASSIGN_OR_RETURN(fs::path te, ogb_csv::require(dir, "test"));
    DGLD_RETURN_IF_ERROR(read_id_mask(tr, t, &g->train_mask));
    DGLD_RETURN_IF_ERROR(read_id_mask(va, t, &g->val_mask));
    return read_id_mask(te, t, &g->test_mask);
  }

  // Per-type ids of the target type, one per line, into a mask over all nodes.
  static Status read_id_mask(const fs::path& path, const GraphTypes& t,
                             std::vector<uint8_t>* mask) {
    const int64_t n = t.count(t.target), off = t.ntype_offset[t.target];
    mask->assign(static_cast<size_t>(t.ntype_offset.back()), 0);
    return for_each_int(path, [&](int64_t v, const TextReader& r) {
      if (v < 0 || v >= n) {
        return r.error("node id " + std::to_string(v) + " is out of range [0, " +
                       std::to_string(n) + ") (node type '" + t.ntypes[t.target] + "' has " +
                       std::to_string(n) + " nodes)");
      }
      (*mask)[off + v] = 1;
      return Status::ok();
    });
  }

  HeteroOgbOptions o_;
  std::vector<fs::path> feat_files_;       // per node type; empty: featureless
  std::vector<fs::path> edge_feat_files_;  // per input relation; empty: featureless
  std::vector<int64_t> relation_edges_;    // edges per input relation
};

}  // namespace

int32_t GraphTypes::type_of(int64_t v) const {
  // The last type whose range starts at or before v (empty types are skipped).
  const auto it = std::upper_bound(ntype_offset.begin(), ntype_offset.end(), v);
  return static_cast<int32_t>(it - ntype_offset.begin()) - 1;
}

void build_typed_csc(int64_t num_nodes, const std::vector<int32_t>& src,
                     const std::vector<int32_t>& dst, const std::vector<int32_t>& etype,
                     GraphData* g) {
  const size_t e = src.size();
  g->num_nodes = num_nodes;
  g->indptr.assign(static_cast<size_t>(num_nodes) + 1, 0);
  for (int32_t d : dst) ++g->indptr[d + 1];
  std::partial_sum(g->indptr.begin(), g->indptr.end(), g->indptr.begin());
  std::vector<int64_t> pos(g->indptr.begin(), g->indptr.end() - 1);
  g->src.resize(e);
  g->orig_eid.resize(e);
  g->edge_type.resize(e);
  auto place = [&](size_t i) {
    const int64_t k = pos[dst[i]]++;
    g->src[k] = src[i];
    g->orig_eid[k] = static_cast<int64_t>(i);
    g->edge_type[k] = etype[i];
  };
  if (std::is_sorted(etype.begin(), etype.end())) {
    // Input order is already by type: a counting sort by destination keeps it.
    for (size_t i = 0; i < e; ++i) place(i);
  } else {
    // Stable counting sort by type first, then by destination.
    int32_t num_types = 0;
    for (int32_t t : etype) num_types = std::max(num_types, t + 1);
    std::vector<int64_t> start(static_cast<size_t>(num_types) + 1, 0);
    for (int32_t t : etype) ++start[t + 1];
    std::partial_sum(start.begin(), start.end(), start.begin());
    std::vector<int64_t> order(e);
    for (size_t i = 0; i < e; ++i) order[start[etype[i]]++] = static_cast<int64_t>(i);
    for (int64_t i : order) place(static_cast<size_t>(i));
  }
  g->symmetric_simple = false;
}

std::string reverse_relation_name(const std::string& rel) { return "rev-" + rel; }

Status add_reverse_relations(GraphTypes* types, TypedEdgeList* edges) {
  const int32_t r = types->num_etypes();
  for (int32_t i = 0; i < r; ++i) {
    const CanonicalEtype& et = types->etypes[i];
    CanonicalEtype rev;
    rev.src = et.dst;
    rev.rel = reverse_relation_name(et.rel);
    rev.dst = et.src;
    rev.src_type = et.dst_type;
    rev.dst_type = et.src_type;
    for (int32_t j = 0; j < r; ++j) {
      if (types->etypes[j].name() == rev.name()) {
        return invalid_argument("--add-reverse: the reverse of relation " + et.name() +
                                " would be " + rev.name() + ", which the input already has");
      }
    }
    types->etypes.push_back(std::move(rev));
  }
  // The reverse relations' edges follow all the input's, in the same order,
  // and read their forward relation's edge features.
  const size_t e = edges->size();
  if (!types->etype_first_orig.empty()) {
    for (int32_t i = 0; i < r; ++i) types->etype_first_orig.push_back(static_cast<int64_t>(e) + types->etype_first_orig[i]);
  }
  if (!types->edge_feat_dim.empty()) {
    for (int32_t i = 0; i < r; ++i) {
      types->edge_feat_dim.push_back(types->edge_feat_dim[i]);
      types->edge_feat_of.push_back(types->edge_feat_of[i]);
    }
  }
  edges->src.reserve(2 * e);
  edges->dst.reserve(2 * e);
  edges->etype.reserve(2 * e);
  for (size_t i = 0; i < e; ++i) {
    edges->src.push_back(edges->dst[i]);
    edges->dst.push_back(edges->src[i]);
    edges->etype.push_back(edges->etype[i] + r);
  }
  return Status::ok();
}

void build_typed_graph(int64_t num_nodes, TypedEdgeList* edges, GraphData* g) {
  build_typed_csc(num_nodes, edges->src, edges->dst, edges->etype, g);
  *edges = TypedEdgeList();
}

bool is_ogb_hetero_dir(const fs::path& dir) {
  return !ogb_csv::find(dir / "raw", "num-node-dict").empty();
}

Result<std::unique_ptr<GraphSource>> make_ogb_hetero_source(const HeteroOgbOptions& opts) {
  std::error_code ec;
  if (!fs::is_directory(opts.dir, ec))
    return not_found("OGB dataset directory " + opts.dir.string() + " does not exist");
  if (!is_ogb_hetero_dir(opts.dir)) {
    return not_found("missing " + (opts.dir / "raw" / "num-node-dict.csv").string() +
                     "[.gz] (not a heterogeneous OGB dataset)");
  }
  return std::unique_ptr<GraphSource>(new OgbHeteroSource(opts));
}

}  // namespace dgld
