#include "partition/file_input.h"

#include <algorithm>
#include <climits>
#include <filesystem>
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

// Edge list "src,dst" per line. num_nodes < 0: unknown (ids only bounded by int32).
Status read_edges(const fs::path& path, int64_t num_nodes, std::vector<int32_t>* src, std::vector<int32_t>* dst,
                  int64_t* max_id) {
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  std::string_view line;
  int64_t v[2];
  const int64_t bound = num_nodes >= 0 ? num_nodes : kMaxNodes;
  for (;;) {
    DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
    if (!more) break;
    DGLD_RETURN_IF_ERROR(parse_fields(*r, line, v, 2));
    for (int k = 0; k < 2; ++k) {
      if (v[k] < 0 || v[k] >= bound) {
        return r->error("node id " + std::to_string(v[k]) + " is out of range [0, " + std::to_string(bound) + ")" +
                        (num_nodes >= 0 ? "" : " (at most 2^31-1 nodes are supported)"));
      }
      *max_id = std::max(*max_id, v[k]);
    }
    src->push_back(static_cast<int32_t>(v[0]));
    dst->push_back(static_cast<int32_t>(v[1]));
  }
  if (src->empty()) return invalid_argument(path.string() + ": no edges (empty graph)");
  return Status::ok();
}

// One integer per line; exactly `n` lines when n >= 0.
Status read_labels(const fs::path& path, int64_t n, std::vector<int64_t>* labels) {
  labels->clear();
  if (n >= 0) labels->reserve(static_cast<size_t>(n));
  DGLD_RETURN_IF_ERROR(for_each_int(path, [&](int64_t v, const TextReader& r) {
    if (n >= 0 && static_cast<int64_t>(labels->size()) == n) {
      return r.error("more labels than the " + std::to_string(n) + " nodes");
    }
    labels->push_back(v);
    return Status::ok();
  }));
  if (n >= 0 && static_cast<int64_t>(labels->size()) != n) {
    return invalid_argument(path.string() + ": has " + std::to_string(labels->size()) + " labels, expected " +
                            std::to_string(n) + " (label missing for node " + std::to_string(labels->size()) + ")");
  }
  if (labels->empty()) return invalid_argument(path.string() + ": no labels");
  return Status::ok();
}

// Node ids, one per line, into a 0/1 mask.
Status read_id_mask(const fs::path& path, int64_t n, std::vector<uint8_t>* mask) {
  mask->assign(static_cast<size_t>(n), 0);
  return for_each_int(path, [&](int64_t v, const TextReader& r) {
    if (v < 0 || v >= n) return r.error("node id " + std::to_string(v) + " is out of range [0, " + std::to_string(n) + ")");
    (*mask)[v] = 1;
    return Status::ok();
  });
}

// Number of comma-separated columns of the first non-blank line (0 for an empty file).
Result<size_t> first_line_columns(const fs::path& path) {
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  std::string_view line;
  DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
  if (!more) return size_t{0};
  const size_t c = count_fields(line);
  if (c > 2) {
    return r->error("expected 1 column (a node split: node ids) or 2 (an edge split: src,dst), got " +
                    std::to_string(c));
  }
  return c;
}

// "src,dst" per line, ids in [0, n), with the line of each.
Status read_listed_edges(const fs::path& path, int64_t n, ListedEdges* out) {
  out->path = path.string();
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  std::string_view line;
  int64_t v[2];
  for (;;) {
    DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
    if (!more) return Status::ok();
    DGLD_RETURN_IF_ERROR(parse_fields(*r, line, v, 2));
    for (int k = 0; k < 2; ++k) {
      if (v[k] < 0 || v[k] >= n) {
        return r->error("node id " + std::to_string(v[k]) + " is out of range [0, " + std::to_string(n) + ")");
      }
    }
    out->src.push_back(static_cast<int32_t>(v[0]));
    out->dst.push_back(static_cast<int32_t>(v[1]));
    out->line.push_back(r->line_number());
  }
}

// K comma-separated node ids per line, one line per edge of `edges`, every line
// the same K (the first line's).
Status read_negatives(const fs::path& path, int64_t n, const ListedEdges& edges, ListedNegatives* out) {
  out->path = path.string();
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  std::string_view line;
  std::vector<int64_t> row;
  const size_t rows = edges.size();
  for (;;) {
    DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
    if (!more) break;
    if (out->line.size() == rows) {
      return r->error("more lines than the " + std::to_string(rows) + " edges of " + edges.path +
                      " (one line of negatives per edge)");
    }
    if (out->line.empty()) {
      out->k = static_cast<int64_t>(count_fields(line));
      row.resize(static_cast<size_t>(out->k));
      out->ids.reserve(rows * row.size());
    }
    DGLD_RETURN_IF_ERROR(parse_fields(*r, line, row.data(), row.size()));
    for (size_t k = 0; k < row.size(); ++k) {
      if (row[k] < 0 || row[k] >= n) {
        return r->error("column " + std::to_string(k + 1) + ": node id " + std::to_string(row[k]) +
                        " is out of range [0, " + std::to_string(n) + ")");
      }
      out->ids.push_back(static_cast<int32_t>(row[k]));
    }
    out->line.push_back(r->line_number());
  }
  if (out->line.size() != rows) {
    return invalid_argument(out->path + ": has " + std::to_string(out->line.size()) + " lines, expected " +
                            std::to_string(rows) + ", one per edge of " + edges.path + " (the negatives of " +
                            edges.path + ":" + std::to_string(edges.line[out->line.size()]) + " are missing)");
  }
  return Status::ok();
}

Status read_features(const fs::path& path, int64_t n, int64_t d, std::vector<float>* out) {
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  out->assign(static_cast<size_t>(n * d), 0.0f);
  std::string_view line;
  int64_t row = 0;
  for (;;) {
    DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
    if (!more) break;
    if (row == n) return r->error("more feature rows than the " + std::to_string(n) + " nodes");
    DGLD_RETURN_IF_ERROR(parse_fields(*r, line, out->data() + row * d, static_cast<size_t>(d)));
    ++row;
  }
  if (row != n) {
    return invalid_argument(path.string() + ": has " + std::to_string(row) + " feature rows, expected " +
                            std::to_string(n) + " (features missing for node " + std::to_string(row) + ")");
  }
  return Status::ok();
}


class OgbSource final : public GraphSource {
 public:
  OgbSource(fs::path dir, std::string split) : dir_(std::move(dir)), split_(std::move(split)) {}
  std::string describe() const override { return "ogb:" + dir_.string(); }

  Status load_structure(GraphData* g) override {
    const fs::path raw = dir_ / "raw";
    DGLD_ASSIGN_OR_RETURN(fs::path nodes_file, ogb_csv::require(raw, "num-node-list"));
    DGLD_ASSIGN_OR_RETURN(int64_t n, read_single_int(nodes_file));
    if (n < 1) return invalid_argument(nodes_file.string() + ":1: num_nodes " + std::to_string(n) + " (empty graph)");
    if (n > kMaxNodes) return invalid_argument(nodes_file.string() + ":1: more than 2^31-1 nodes are not supported");
    DGLD_ASSIGN_OR_RETURN(fs::path edge_file, ogb_csv::require(raw, "edge"));
    std::vector<int32_t> src, dst;
    int64_t max_id = 0;
    DGLD_RETURN_IF_ERROR(read_edges(edge_file, n, &src, &dst, &max_id));
    // Undirected: edge i + E is the reverse of edge i (OGB's add_inverse_edge).
    const size_t e = src.size();
    src.insert(src.end(), dst.begin(), dst.begin() + e);
    dst.insert(dst.end(), src.begin(), src.begin() + e);
    build_csc(n, src, dst, g);
    std::vector<int32_t>().swap(src);
    std::vector<int32_t>().swap(dst);
    g->symmetric_simple = sort_rows_check_simple(g);
    if (fs::path f = ogb_csv::find(raw, "node-label"); !f.empty()) DGLD_RETURN_IF_ERROR(read_labels(f, n, &g->labels));
    if (fs::path f = ogb_csv::find(raw, "node-feat"); !f.empty()) {
      feat_file_ = f;
      DGLD_ASSIGN_OR_RETURN(g->feat_dim, feature_dim(f));
    }
    return load_split(n, g);
  }

  Status load_features(GraphData* g) override {
    if (feat_file_.empty()) return Status::ok();
    return read_features(feat_file_, g->num_nodes, g->feat_dim, &g->features);
  }

 private:
  Status load_split(int64_t n, GraphData* g) {
    const fs::path split_root = dir_ / "split";
    std::string split = split_;
    std::error_code ec;
    if (split.empty()) {
      if (!fs::is_directory(split_root, ec)) return Status::ok();  // no split: no masks
      std::vector<std::string> names;
      for (const auto& entry : fs::directory_iterator(split_root, ec)) {
        if (entry.is_directory()) names.push_back(entry.path().filename().string());
      }
      if (names.empty()) return Status::ok();
      if (names.size() > 1) {
        std::sort(names.begin(), names.end());
        std::string all;
        for (const auto& s : names) all += (all.empty() ? "" : ", ") + s;
        return invalid_argument(split_root.string() + ": several splits (" + all + "); choose one with --split");
      }
      split = names[0];
    }
    const fs::path dir = split_root / split;
    if (!fs::is_directory(dir, ec)) return not_found("split directory " + dir.string() + " does not exist");
    DGLD_ASSIGN_OR_RETURN(fs::path tr, ogb_csv::require(dir, "train"));
    DGLD_ASSIGN_OR_RETURN(fs::path va, ogb_csv::require(dir, "valid"));
    DGLD_ASSIGN_OR_RETURN(fs::path te, ogb_csv::require(dir, "test"));
    // One column: node ids (a node split); two: src,dst (an edge split).
    DGLD_ASSIGN_OR_RETURN(size_t columns, first_line_columns(tr));
    if (columns == 2) return load_edge_split(n, split, dir, tr, va, te, g);
    DGLD_RETURN_IF_ERROR(read_id_mask(tr, n, &g->train_mask));
    DGLD_RETURN_IF_ERROR(read_id_mask(va, n, &g->val_mask));
    return read_id_mask(te, n, &g->test_mask);
  }

  Status load_edge_split(int64_t n, const std::string& name, const fs::path& dir, const fs::path& tr,
                         const fs::path& va, const fs::path& te, GraphData* g) {
    EdgeSplitInput& es = g->edge_split;
    es.present = true;
    es.name = name;
    DGLD_RETURN_IF_ERROR(read_listed_edges(tr, n, &es.train));
    DGLD_RETURN_IF_ERROR(read_listed_edges(va, n, &es.valid));
    DGLD_RETURN_IF_ERROR(read_listed_edges(te, n, &es.test));
    if (fs::path f = ogb_csv::find(dir, "valid_neg"); !f.empty()) {
      DGLD_RETURN_IF_ERROR(read_negatives(f, n, es.valid, &es.valid_neg));
    }
    if (fs::path f = ogb_csv::find(dir, "test_neg"); !f.empty()) {
      DGLD_RETURN_IF_ERROR(read_negatives(f, n, es.test, &es.test_neg));
    }
    const ListedNegatives &a = es.valid_neg, &b = es.test_neg;
    if (!a.line.empty() && !b.line.empty() && a.k != b.k) {
      return invalid_argument(b.path + ":" + std::to_string(b.line[0]) + ": " +
                              std::to_string(b.k) + " negatives per line, but " + a.path + " has " +
                              std::to_string(a.k) + " (both files must list the same number)");
    }
    return Status::ok();
  }

  fs::path dir_;
  std::string split_;
  fs::path feat_file_;
};

class EdgeListSource final : public GraphSource {
 public:
  explicit EdgeListSource(FileInputOptions o) : o_(std::move(o)) {}
  std::string describe() const override { return o_.spec; }

  Status load_structure(GraphData* g) override {
    const fs::path edge_file = o_.spec.substr(std::string("edges:").size());
    std::vector<int32_t> src, dst;
    int64_t max_id = 0;
    int64_t n = o_.num_nodes > 0 ? o_.num_nodes : -1;
    DGLD_RETURN_IF_ERROR(read_edges(edge_file, n, &src, &dst, &max_id));
    if (!o_.labels.empty()) {
      DGLD_RETURN_IF_ERROR(read_labels(o_.labels, n, &g->labels));
      if (n < 0) {
        n = static_cast<int64_t>(g->labels.size());
        if (max_id >= n) {
          return invalid_argument(o_.labels + ": has " + std::to_string(n) + " labels, but " +
                                  edge_file.string() + " uses node id " + std::to_string(max_id) +
                                  " (label missing for node " + std::to_string(n) + ")");
        }
      }
    }
    if (n < 0) n = max_id + 1;
    build_csc(n, src, dst, g);
    if (!o_.node_feats.empty()) {
      DGLD_ASSIGN_OR_RETURN(g->feat_dim, feature_dim(o_.node_feats));
    }
    if (!o_.train_ids.empty()) DGLD_RETURN_IF_ERROR(read_id_mask(o_.train_ids, n, &g->train_mask));
    if (!o_.val_ids.empty()) DGLD_RETURN_IF_ERROR(read_id_mask(o_.val_ids, n, &g->val_mask));
    if (!o_.test_ids.empty()) DGLD_RETURN_IF_ERROR(read_id_mask(o_.test_ids, n, &g->test_mask));
    return Status::ok();
  }

  Status load_features(GraphData* g) override {
    if (o_.node_feats.empty()) return Status::ok();
    return read_features(o_.node_feats, g->num_nodes, g->feat_dim, &g->features);
  }

 private:
  FileInputOptions o_;
};

}  // namespace

bool sort_rows_check_simple(GraphData* g) {
  bool simple = true;
  std::vector<std::pair<int32_t, int64_t>> row;
  for (int64_t v = 0; v < g->num_nodes; ++v) {
    const int64_t b = g->indptr[v], e = g->indptr[v + 1];
    row.clear();
    for (int64_t k = b; k < e; ++k) row.emplace_back(g->src[k], g->orig_eid[k]);
    std::sort(row.begin(), row.end());
    for (int64_t k = b; k < e; ++k) {
      g->src[k] = row[k - b].first;
      g->orig_eid[k] = row[k - b].second;
      if (g->src[k] == v || (k > b && g->src[k] == g->src[k - 1])) simple = false;
    }
  }
  return simple;
}

void build_csc(int64_t num_nodes, const std::vector<int32_t>& src, const std::vector<int32_t>& dst, GraphData* g) {
  g->num_nodes = num_nodes;
  g->indptr.assign(static_cast<size_t>(num_nodes) + 1, 0);
  for (int32_t d : dst) ++g->indptr[d + 1];
  std::partial_sum(g->indptr.begin(), g->indptr.end(), g->indptr.begin());
  std::vector<int64_t> pos(g->indptr.begin(), g->indptr.end() - 1);
  g->src.resize(src.size());
  g->orig_eid.resize(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const int64_t k = pos[dst[i]]++;
    g->src[k] = src[i];
    g->orig_eid[k] = static_cast<int64_t>(i);
  }
  g->symmetric_simple = false;
}

Result<std::unique_ptr<GraphSource>> make_file_source(const FileInputOptions& opts) {
  const std::string& s = opts.spec;
  if (s.rfind("ogb:", 0) == 0) {
    if (!opts.node_feats.empty() || !opts.labels.empty() || !opts.train_ids.empty()) {
      return invalid_argument("--node-feats/--labels/--train-ids apply to --input edges:FILE only");
    }
    fs::path dir = s.substr(4);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return not_found("OGB dataset directory " + dir.string() + " does not exist");
    return std::unique_ptr<GraphSource>(new OgbSource(dir, opts.split));
  }
  if (s.rfind("edges:", 0) == 0) {
    if (s.size() == 6) return invalid_argument("--input edges:FILE needs a file name");
    return std::unique_ptr<GraphSource>(new EdgeListSource(opts));
  }
  return invalid_argument("--input '" + s + "': expected ogb:DIR or edges:FILE");
}

}  // namespace dgld
