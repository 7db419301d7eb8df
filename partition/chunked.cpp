#include "partition/chunked.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>

#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/logging.h"
#include "partition/staging.h"
#include "partition/text_reader.h"

namespace dgld {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

constexpr int64_t kMaxNodes = INT32_MAX;
constexpr const char* kMasks[] = {"train_mask", "val_mask", "test_mask"};

// ------------------------------------------------------------------ metadata.json

std::string key_ref(const std::string& s) { return "[\"" + s + "\"]"; }

// A short rendering of a JSON value for messages.
std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Chunk sizes: root[key] must be [[s0, s1, ...]] (one list, for the one type).
Status parse_sizes(const json& root, const std::string& file, const char* key, const char* what,
                   std::vector<int64_t>* out) {
  auto it = root.find(key);
  if (it == root.end()) return invalid_argument(file + ": missing field '" + key + "'");
  const std::string where = file + ": field '" + key + "'";
  if (!it->is_array()) {
    return invalid_argument(where + ": expected an array with one list of chunk sizes per " + what + " type, got " +
                            shown(*it));
  }
  if (it->size() != 1) {
    return invalid_argument(where + ": expected one list of chunk sizes (one " + what + " type), got " +
                            std::to_string(it->size()));
  }
  const json& sizes = (*it)[0];
  if (!sizes.is_array() || sizes.empty()) {
    return invalid_argument(where + "[0]: expected a non-empty array of chunk sizes, got " + shown(sizes));
  }
  out->clear();
  for (size_t i = 0; i < sizes.size(); ++i) {
    const json& s = sizes[i];
    if (!s.is_number_integer() || (!s.is_number_unsigned() && s.get<int64_t>() < 0) ||
        (s.is_number_unsigned() && s.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      return invalid_argument(where + "[0][" + std::to_string(i) + "]: expected a non-negative integer, got " +
                              shown(s));
    }
    out->push_back(s.get<int64_t>());
  }
  return Status::ok();
}

// A list of `count` file names at obj["data"]; `where` names obj.
Status parse_files(const json& obj, const std::string& where, size_t count, const std::string& per,
                   std::vector<std::string>* out) {
  auto it = obj.find("data");
  if (it == obj.end()) return invalid_argument(where + ": missing field 'data'");
  if (!it->is_array()) return invalid_argument(where + "[\"data\"]: expected an array of file names, got " + shown(*it));
  if (it->size() != count) {
    return invalid_argument(where + "[\"data\"]: expected " + std::to_string(count) + " files (one per " + per +
                            "), got " + std::to_string(it->size()));
  }
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& f = (*it)[i];
    if (!f.is_string() || f.get<std::string>().empty()) {
      return invalid_argument(where + "[\"data\"][" + std::to_string(i) + "]: expected a file name, got " + shown(f));
    }
    out->push_back(f.get<std::string>());
  }
  return Status::ok();
}

// obj["format"]["name"], which must be `expected`.
Status check_format(const json& obj, const std::string& where, const std::string& expected, const json** format) {
  auto it = obj.find("format");
  if (it == obj.end()) return invalid_argument(where + ": missing field 'format'");
  if (!it->is_object()) {
    return invalid_argument(where + "[\"format\"]: expected an object {\"name\": \"" + expected + "\"}, got " +
                            shown(*it));
  }
  auto name = it->find("name");
  if (name == it->end()) return invalid_argument(where + "[\"format\"]: missing field 'name'");
  if (!name->is_string() || name->get<std::string>() != expected) {
    return invalid_argument(where + "[\"format\"][\"name\"]: unsupported format " + shown(*name) +
                            " (dgl-partition reads \"" + expected + "\" here)");
  }
  *format = &*it;
  return Status::ok();
}

// One type name from root[key], which must be an array of one string.
Status parse_single_type(const json& root, const std::string& file, const char* key, std::string* out) {
  auto it = root.find(key);
  if (it == root.end()) return invalid_argument(file + ": missing field '" + key + "'");
  const std::string where = file + ": field '" + key + "'";
  if (!it->is_array() || it->empty()) return invalid_argument(where + ": expected an array of type names, got " + shown(*it));
  if (it->size() > 1) {
    return invalid_argument(where + ": " + std::to_string(it->size()) + " types " + shown(*it) +
                            ": heterogeneous chunked graphs are not supported yet (one node type and one edge type)");
  }
  if (!(*it)[0].is_string()) return invalid_argument(where + "[0]: expected a type name, got " + shown((*it)[0]));
  *out = (*it)[0].get<std::string>();
  return Status::ok();
}

// ------------------------------------------------------------------ .npy

struct NpyDict {
  std::string descr;
  bool fortran = false, has_descr = false, has_order = false, has_shape = false;
  std::vector<int64_t> shape;
};

// Parses the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
bool parse_npy_dict(std::string_view s, NpyDict* d, std::string* why) {
  size_t p = 0;
  auto ws = [&] {
    while (p < s.size() && (s[p] == ' ' || s[p] == '\n' || s[p] == '\t')) ++p;
  };
  auto str = [&](std::string* out) {
    if (p >= s.size() || (s[p] != '\'' && s[p] != '"')) return false;
    const char q = s[p++];
    const size_t end = s.find(q, p);
    if (end == std::string_view::npos) return false;
    *out = std::string(s.substr(p, end - p));
    p = end + 1;
    return true;
  };
  ws();
  if (p >= s.size() || s[p++] != '{') return *why = "expected '{'", false;
  for (;;) {
    ws();
    if (p < s.size() && s[p] == '}') break;
    std::string key;
    if (!str(&key)) return *why = "expected a quoted key", false;
    ws();
    if (p >= s.size() || s[p++] != ':') return *why = "expected ':' after '" + key + "'", false;
    ws();
    if (key == "descr") {
      if (!str(&d->descr)) return *why = "'descr' is not a string (structured dtypes are not supported)", false;
      d->has_descr = true;
    } else if (key == "fortran_order") {
      if (s.substr(p, 4) == "True") {
        d->fortran = true;
        p += 4;
      } else if (s.substr(p, 5) == "False") {
        p += 5;
      } else {
        return *why = "'fortran_order' is not True or False", false;
      }
      d->has_order = true;
    } else if (key == "shape") {
      if (p >= s.size() || s[p++] != '(') return *why = "'shape' is not a tuple", false;
      for (;;) {
        ws();
        if (p < s.size() && s[p] == ')') break;
        int64_t v = 0;
        auto [next, ec] = std::from_chars(s.data() + p, s.data() + s.size(), v);
        if (ec != std::errc() || v < 0) return *why = "'shape' holds something other than sizes", false;
        p = next - s.data();
        if (p < s.size() && s[p] == 'L') ++p;  // Python 2
        d->shape.push_back(v);
        ws();
        if (p < s.size() && s[p] == ',') ++p;
      }
      ++p;
      d->has_shape = true;
    } else {
      return *why = "unknown key '" + key + "'", false;
    }
    ws();
    if (p < s.size() && s[p] == ',') {
      ++p;
      continue;
    }
    ws();
    if (p < s.size() && s[p] == '}') break;
    return *why = "expected ',' or '}' after '" + key + "'", false;
  }
  if (!d->has_descr) return *why = "no 'descr'", false;
  if (!d->has_order) return *why = "no 'fortran_order'", false;
  if (!d->has_shape) return *why = "no 'shape'", false;
  return true;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

bool same_layout(const NpyHeader& a, const NpyHeader& b) { return a.dtype == b.dtype && a.cols == b.cols; }

std::string layout_string(const NpyHeader& h) {
  return std::string(dtype_name(h.dtype)) + " ('" + h.descr + "'), " + std::to_string(h.cols) +
         (h.cols == 1 ? " column" : " columns");
}

const ChunkedNodeData* find_node_data(const ChunkedGraph& g, const std::string& name) {
  for (const auto& d : g.node_data) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::string metadata_file(const ChunkedGraph& g) { return (g.dir / "metadata.json").string(); }

// The header of node data chunk i, checked against its node count and chunk 0.
Result<NpyHeader> checked_header(const ChunkedGraph& g, const ChunkedNodeData& d, int i) {
  const fs::path path = g.dir / d.files[i];
  DGLD_ASSIGN_OR_RETURN(NpyHeader h, read_npy_header(path));
  if (i > 0) {
    DGLD_ASSIGN_OR_RETURN(NpyHeader first, read_npy_header(g.dir / d.files[0]));
    if (!same_layout(h, first)) {
      return invalid_argument(path.string() + ": " + layout_string(h) + ", but " + (g.dir / d.files[0]).string() +
                              " (chunk 0 of node data '" + d.name + "') has " + layout_string(first) +
                              " (every chunk of an array must have the same dtype and columns)");
    }
  }
  if (h.rows != g.node_chunk_sizes[i]) {
    return invalid_argument(path.string() + ": has " + std::to_string(h.rows) + " rows, expected " +
                            std::to_string(g.node_chunk_sizes[i]) + " (one per node of node chunk " +
                            std::to_string(i) + ", num_nodes_per_chunk[0][" + std::to_string(i) + "] in " +
                            metadata_file(g) + ")");
  }
  return h;
}

// ------------------------------------------------------------------ edge lines

// "src<delim>dst": with delimiter ' ' any run of spaces and tabs separates.
bool parse_edge_line(std::string_view line, char delim, int64_t* a, int64_t* b) {
  const char* p = line.data();
  const char* end = p + line.size();
  auto ws = [&] {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
  };
  ws();
  auto r1 = std::from_chars(p, end, *a);
  if (r1.ec != std::errc() || r1.ptr == p) return false;
  p = r1.ptr;
  if (delim == ' ' || delim == '\t') {
    if (p == end || (*p != ' ' && *p != '\t')) return false;
    ws();
  } else {
    ws();
    if (p == end || *p != delim) return false;
    ++p;
    ws();
  }
  auto r2 = std::from_chars(p, end, *b);
  if (r2.ec != std::errc() || r2.ptr == p) return false;
  p = r2.ptr;
  ws();
  return p == end;
}

std::string delimiter_name(char c) {
  if (c == ' ') return "' '";
  if (c == '\t') return "'\\t'";
  return std::string("'") + c + "'";
}

// Sorts every CSC row by source (carrying the original ids) and reports whether the
// graph is symmetric with no self loops and no duplicate edges.
bool sort_rows_check_symmetric_simple(GraphData* g) {
  if (!sort_rows_check_simple(g)) return false;
  // Symmetric: u is in row v (u -> v) exactly when v is in row u.
  for (int64_t v = 0; v < g->num_nodes; ++v) {
    for (int64_t k = g->indptr[v]; k < g->indptr[v + 1]; ++k) {
      const int32_t u = g->src[k];
      const auto first = g->src.begin() + g->indptr[u], last = g->src.begin() + g->indptr[u + 1];
      if (!std::binary_search(first, last, static_cast<int32_t>(v))) return false;
    }
  }
  return true;
}

// ------------------------------------------------------------------ the source

class ChunkedSource final : public GraphSource {
 public:
  explicit ChunkedSource(ChunkedGraph g) : g_(std::move(g)) {}
  std::string describe() const override { return "chunks:" + g_.dir.string(); }

  Status load_structure(GraphData* g) override {
    auto log = logger("partition");
    const std::string meta = metadata_file(g_);
    const int64_t n = g_.num_nodes(), m = g_.num_edges();
    if (n < 1) return invalid_argument(meta + ": no nodes (empty graph)");
    if (n > kMaxNodes) {
      return invalid_argument(meta + ": " + std::to_string(n) +
                              " nodes; dgl-partition supports at most 2^31-1 (METIS's 32-bit node ids)");
    }
    if (m < 1) return invalid_argument(meta + ": no edges (empty graph)");
    std::vector<int32_t> src, dst;
    src.reserve(static_cast<size_t>(m));
    dst.reserve(static_cast<size_t>(m));
    for (int i = 0; i < g_.num_edge_chunks(); ++i) {
      DGLD_ASSIGN_OR_RETURN(EdgeChunk c, read_edge_chunk(g_, i));
      for (size_t k = 0; k < c.src.size(); ++k) {
        src.push_back(static_cast<int32_t>(c.src[k]));
        dst.push_back(static_cast<int32_t>(c.dst[k]));
      }
    }
    build_csc(n, src, dst, g);
    std::vector<int32_t>().swap(src);
    std::vector<int32_t>().swap(dst);
    g->symmetric_simple = sort_rows_check_symmetric_simple(g);

    for (const ChunkedNodeData& d : g_.node_data) {
      if (d.name == "labels") {
        DGLD_RETURN_IF_ERROR(read_column(d, DType::int64, "int64 ('<i8')", &g->labels));
      } else if (std::find(std::begin(kMasks), std::end(kMasks), d.name) != std::end(kMasks)) {
        std::vector<uint8_t>* mask = d.name == "train_mask" ? &g->train_mask
                                     : d.name == "val_mask" ? &g->val_mask
                                                            : &g->test_mask;
        DGLD_RETURN_IF_ERROR(read_column(d, DType::uint8, "uint8 ('|u1') or bool ('|b1')", mask));
        for (uint8_t& x : *mask) x = x != 0;
      } else if (d.name == "features") {
        // Only the headers now (errors before METIS); the rows in load_features.
        for (int i = 0; i < g_.num_node_chunks(); ++i) {
          DGLD_ASSIGN_OR_RETURN(NpyHeader h, checked_header(g_, d, i));
          if (h.dtype != DType::float32) {
            return invalid_argument((g_.dir / d.files[i]).string() + ": node data 'features' must be float32 ('<f4'), got '" +
                                    h.descr + "'");
          }
          g->feat_dim = h.cols;
        }
        features_ = &d;
      } else {
        log->info("{}: ignoring node data '{}' (dgl-partition reads features, labels, train_mask, val_mask, "
                  "test_mask)",
                  meta, d.name);
      }
    }
    return Status::ok();
  }

  Status load_features(GraphData* g) override {
    if (features_ == nullptr) return Status::ok();
    const int64_t d = g->feat_dim;
    g->features.assign(static_cast<size_t>(g_.num_nodes() * d), 0.0f);
    for (int i = 0; i < g_.num_node_chunks(); ++i) {
      DGLD_ASSIGN_OR_RETURN(NodeDataChunk c, read_node_data_chunk(g_, "features", i));
      if (c.dtype != DType::float32 || c.cols != d) {
        return invalid_argument((g_.dir / features_->files[i]).string() + ": changed since it was first read");
      }
      std::memcpy(g->features.data() + g_.node_chunk_start(i) * d, c.data.data(), c.data.size());
    }
    return Status::ok();
  }

 private:
  // A one-column array of `dtype` over all node chunks.
  template <typename T>
  Status read_column(const ChunkedNodeData& d, DType dtype, const char* expected, std::vector<T>* out) {
    out->clear();
    out->reserve(static_cast<size_t>(g_.num_nodes()));
    for (int i = 0; i < g_.num_node_chunks(); ++i) {
      DGLD_ASSIGN_OR_RETURN(NodeDataChunk c, read_node_data_chunk(g_, d.name, i));
      if (c.dtype != dtype || c.cols != 1) {
        return invalid_argument((g_.dir / d.files[i]).string() + ": node data '" + d.name + "' must be " + expected +
                                " with one value per node, got " + dtype_name(c.dtype) + " with " +
                                std::to_string(c.cols) + " columns");
      }
      const T* v = reinterpret_cast<const T*>(c.data.data());
      out->insert(out->end(), v, v + c.rows);
    }
    return Status::ok();
  }

  ChunkedGraph g_;
  const ChunkedNodeData* features_ = nullptr;
};

// ------------------------------------------------------------------ writing


Status write_npy(const fs::path& path, const char* descr, int64_t rows, int64_t cols, bool matrix, const void* data,
                 size_t bytes) {
  std::vector<int64_t> shape{rows};
  if (matrix) shape.push_back(cols);
  AtomicFile f;
  DGLD_RETURN_IF_ERROR(f.open(path));
  DGLD_RETURN_IF_ERROR(f.write(npy_header(descr, shape)));
  DGLD_RETURN_IF_ERROR(f.write(std::string_view(static_cast<const char*>(data), bytes)));
  return f.commit();
}

Status write_edge_file(const fs::path& path, const int32_t* src, const int32_t* dst, int64_t count) {
  AtomicFile f;
  DGLD_RETURN_IF_ERROR(f.open(path));
  std::string buf;
  buf.reserve(8 << 20);
  char num[16];
  for (int64_t k = 0; k < count; ++k) {
    auto r = std::to_chars(num, num + sizeof(num), src[k]);
    buf.append(num, r.ptr);
    buf += ' ';
    r = std::to_chars(num, num + sizeof(num), dst[k]);
    buf.append(num, r.ptr);
    buf += '\n';
    if (buf.size() > (8 << 20) - 32) {
      DGLD_RETURN_IF_ERROR(f.write(buf));
      buf.clear();
    }
  }
  DGLD_RETURN_IF_ERROR(f.write(buf));
  return f.commit();
}

}  // namespace

// ------------------------------------------------------------------ ChunkedGraph

int64_t ChunkedGraph::num_nodes() const {
  return std::accumulate(node_chunk_sizes.begin(), node_chunk_sizes.end(), int64_t{0});
}
int64_t ChunkedGraph::num_edges() const {
  return std::accumulate(edge_chunk_sizes.begin(), edge_chunk_sizes.end(), int64_t{0});
}
int64_t ChunkedGraph::node_chunk_start(int i) const {
  return std::accumulate(node_chunk_sizes.begin(), node_chunk_sizes.begin() + i, int64_t{0});
}
int64_t ChunkedGraph::edge_chunk_start(int i) const {
  return std::accumulate(edge_chunk_sizes.begin(), edge_chunk_sizes.begin() + i, int64_t{0});
}

Result<ChunkedGraph> read_chunked_metadata(const fs::path& dir) {
  ChunkedGraph g;
  g.dir = dir;
  const fs::path path = dir / "metadata.json";
  const std::string file = path.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found("chunked graph directory " + dir.string() + " does not exist");
  if (!fs::exists(path, ec)) return not_found("missing " + file + " (the chunked graph's metadata)");
  DGLD_ASSIGN_OR_RETURN(std::string text, read_file(path));
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    return invalid_argument(file + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return invalid_argument(file + ": expected a JSON object, got " + std::string(root.type_name()));

  auto name = root.find("graph_name");
  if (name == root.end()) return invalid_argument(file + ": missing field 'graph_name'");
  if (!name->is_string()) return invalid_argument(file + ": field 'graph_name': expected a string, got " + shown(*name));
  g.graph_name = name->get<std::string>();

  std::string ntype, etype;
  DGLD_RETURN_IF_ERROR(parse_single_type(root, file, "node_type", &ntype));
  DGLD_RETURN_IF_ERROR(parse_single_type(root, file, "edge_type", &etype));
  {
    const size_t a = etype.find(':'), b = etype.rfind(':');
    if (a == std::string::npos || a == b || etype.substr(0, a) != ntype || etype.substr(b + 1) != ntype) {
      return invalid_argument(file + ": field 'edge_type'[0]: expected \"" + ntype + ":<relation>:" + ntype +
                              "\" (source and destination type '" + ntype + "'), got \"" + etype + "\"");
    }
  }
  DGLD_RETURN_IF_ERROR(parse_sizes(root, file, "num_nodes_per_chunk", "node", &g.node_chunk_sizes));
  DGLD_RETURN_IF_ERROR(parse_sizes(root, file, "num_edges_per_chunk", "edge", &g.edge_chunk_sizes));

  // edges: {"<etype>": {"format": {"name": "csv", "delimiter": " "}, "data": [...]}}
  auto edges = root.find("edges");
  if (edges == root.end()) return invalid_argument(file + ": missing field 'edges'");
  if (!edges->is_object()) {
    return invalid_argument(file + ": field 'edges': expected an object {\"" + etype + "\": {...}}, got " + shown(*edges));
  }
  auto e = edges->find(etype);
  if (e == edges->end()) return invalid_argument(file + ": field 'edges': missing field '" + etype + "'");
  for (auto it = edges->begin(); it != edges->end(); ++it) {
    if (it.key() != etype) {
      return invalid_argument(file + ": field 'edges': edge type '" + it.key() + "' is not in edge_type (heterogeneous "
                              "chunked graphs are not supported yet)");
    }
  }
  const std::string ewhere = file + ": field 'edges'" + key_ref(etype);
  if (!e->is_object()) return invalid_argument(ewhere + ": expected an object, got " + shown(*e));
  const json* format = nullptr;
  DGLD_RETURN_IF_ERROR(check_format(*e, ewhere, "csv", &format));
  if (auto d = format->find("delimiter"); d != format->end()) {
    const std::string s = d->is_string() ? d->get<std::string>() : std::string();
    if (s != " " && s != "," && s != "\t") {
      return invalid_argument(ewhere + "[\"format\"][\"delimiter\"]: expected \" \", \",\" or \"\\t\", got " + shown(*d));
    }
    g.delimiter = s[0];
  }
  DGLD_RETURN_IF_ERROR(parse_files(*e, ewhere, g.edge_chunk_sizes.size(),
                                   "edge chunk, as num_edges_per_chunk[0] lists", &g.edge_files));

  // node_data: {"<ntype>": {"<name>": {"format": {"name": "numpy"}, "data": [...]}}}
  if (auto nd = root.find("node_data"); nd != root.end() && !nd->is_null()) {
    if (!nd->is_object()) {
      return invalid_argument(file + ": field 'node_data': expected an object {\"" + ntype + "\": {...}}, got " +
                              shown(*nd));
    }
    for (auto it = nd->begin(); it != nd->end(); ++it) {
      if (it.key() != ntype) {
        return invalid_argument(file + ": field 'node_data': node type '" + it.key() + "' is not in node_type");
      }
      const std::string twhere = file + ": field 'node_data'" + key_ref(ntype);
      if (!it->is_object()) return invalid_argument(twhere + ": expected an object of arrays, got " + shown(*it));
      for (auto a = it->begin(); a != it->end(); ++a) {
        const std::string awhere = twhere + key_ref(a.key());
        if (!a->is_object()) return invalid_argument(awhere + ": expected an object, got " + shown(*a));
        const json* f = nullptr;
        DGLD_RETURN_IF_ERROR(check_format(*a, awhere, "numpy", &f));
        ChunkedNodeData d;
        d.name = a.key();
        DGLD_RETURN_IF_ERROR(parse_files(*a, awhere, g.node_chunk_sizes.size(),
                                         "node chunk, as num_nodes_per_chunk[0] lists", &d.files));
        g.node_data.push_back(std::move(d));
      }
    }
  }
  if (auto ed = root.find("edge_data"); ed != root.end() && !ed->is_null()) {
    bool any = false;
    if (ed->is_object()) {
      for (const auto& t : *ed) any = any || !(t.is_object() && t.empty());
    } else {
      any = true;
    }
    if (any) logger("partition")->info("{}: ignoring field 'edge_data' (edge data is not read yet)", file);
  }
  return g;
}

Status for_each_edge_in_chunk(const ChunkedGraph& g, int i, const std::function<void(int64_t, int64_t)>& fn) {
  if (i < 0 || i >= g.num_edge_chunks()) {
    return invalid_argument(metadata_file(g) + ": no edge chunk " + std::to_string(i) + " (" +
                            std::to_string(g.num_edge_chunks()) + " chunks)");
  }
  const fs::path path = g.dir / g.edge_files[i];
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return not_found("missing edge chunk " + path.string() + " (edge chunk " + std::to_string(i) + " of " +
                     metadata_file(g) + ")");
  }
  const int64_t n = g.num_nodes(), expected = g.edge_chunk_sizes[i];
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  std::string_view line;
  int64_t v[2];
  int64_t count = 0;
  for (;;) {
    DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
    if (!more) break;
    if (!parse_edge_line(line, g.delimiter, &v[0], &v[1])) {
      std::string text(line.substr(0, 60));
      if (line.size() > 60) text += "...";
      return r->error("expected two node ids separated by " + delimiter_name(g.delimiter) + ", got '" + text + "'");
    }
    if (count == expected) {
      return r->error("more edges than the " + std::to_string(expected) + " that num_edges_per_chunk[0][" +
                      std::to_string(i) + "] in " + metadata_file(g) + " gives");
    }
    for (int k = 0; k < 2; ++k) {
      if (v[k] < 0 || v[k] >= n) {
        return r->error("node id " + std::to_string(v[k]) + " is out of range [0, " + std::to_string(n) + ")");
      }
    }
    fn(v[0], v[1]);
    ++count;
  }
  if (count != expected) {
    return invalid_argument(path.string() + ": has " + std::to_string(count) + " edges, expected " +
                            std::to_string(expected) + " (num_edges_per_chunk[0][" + std::to_string(i) + "] in " +
                            metadata_file(g) + ")");
  }
  return Status::ok();
}

Result<EdgeChunk> read_edge_chunk(const ChunkedGraph& g, int i) {
  EdgeChunk c;
  if (i >= 0 && i < g.num_edge_chunks()) {
    c.src.reserve(static_cast<size_t>(g.edge_chunk_sizes[i]));
    c.dst.reserve(static_cast<size_t>(g.edge_chunk_sizes[i]));
  }
  DGLD_RETURN_IF_ERROR(for_each_edge_in_chunk(g, i, [&](int64_t u, int64_t v) {
    c.src.push_back(u);
    c.dst.push_back(v);
  }));
  return c;
}

Result<NpyHeader> read_npy_header(const fs::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return not_found("missing " + file);
    return io_error("cannot open " + file + ": " + errno_string());
  }
  unsigned char pre[12] = {};
  in.read(reinterpret_cast<char*>(pre), 10);
  if (in.gcount() != 10 || std::memcmp(pre, "\x93NUMPY", 6) != 0) {
    return invalid_argument(file + ": not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3) {
    return invalid_argument(file + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                            " is not supported (1.0, 2.0 and 3.0 are)");
  }
  uint64_t len = 0, offset = 10;
  if (major == 1) {
    len = pre[8] | (static_cast<uint64_t>(pre[9]) << 8);
  } else {
    in.read(reinterpret_cast<char*>(pre + 10), 2);
    if (in.gcount() != 2) return invalid_argument(file + ": truncated .npy header");
    len = pre[8] | (static_cast<uint64_t>(pre[9]) << 8) | (static_cast<uint64_t>(pre[10]) << 16) |
          (static_cast<uint64_t>(pre[11]) << 24);
    offset = 12;
  }
  if (len > (1 << 20)) return invalid_argument(file + ": .npy header of " + std::to_string(len) + " bytes is too long");
  std::string dict(len, '\0');
  in.read(dict.data(), static_cast<std::streamsize>(len));
  if (static_cast<uint64_t>(in.gcount()) != len) return invalid_argument(file + ": truncated .npy header");
  NpyDict d;
  std::string why;
  if (!parse_npy_dict(dict, &d, &why)) return invalid_argument(file + ": bad .npy header: " + why);
  NpyHeader h;
  h.descr = d.descr;
  h.data_offset = offset + len;
  if (d.descr == "<f4") {
    h.dtype = DType::float32;
  } else if (d.descr == "<i8") {
    h.dtype = DType::int64;
  } else if (d.descr == "|u1" || d.descr == "<u1" || d.descr == "u1" || d.descr == "|b1" || d.descr == "b1") {
    h.dtype = DType::uint8;
  } else {
    return invalid_argument(file + ": dtype '" + d.descr +
                            "' is not supported (expected '<f4' float32, '<i8' int64, '|u1' uint8 or '|b1' bool)");
  }
  if (d.fortran) return invalid_argument(file + ": fortran_order True is not supported (save a C-order array)");
  if (d.shape.size() != 1 && d.shape.size() != 2) {
    return invalid_argument(file + ": shape " + shape_string(d.shape) + ": expected 1 or 2 dimensions");
  }
  h.ndim = static_cast<int>(d.shape.size());
  h.rows = d.shape[0];
  h.cols = h.ndim == 2 ? d.shape[1] : 1;
  if (h.cols < 1) return invalid_argument(file + ": shape " + shape_string(d.shape) + " has no columns");
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return io_error("cannot stat " + file + ": " + ec.message());
  const uint64_t bytes = static_cast<uint64_t>(h.rows) * h.cols * dtype_size(h.dtype);
  if (size != h.data_offset + bytes) {
    return invalid_argument(file + ": has " + std::to_string(size - std::min<uint64_t>(size, h.data_offset)) +
                            " bytes of data, the header's shape " + shape_string(d.shape) + " of '" + d.descr +
                            "' needs " + std::to_string(bytes));
  }
  return h;
}

Result<NodeDataChunk> read_npy(const fs::path& path) {
  DGLD_ASSIGN_OR_RETURN(NpyHeader h, read_npy_header(path));
  NodeDataChunk c;
  c.dtype = h.dtype;
  c.rows = h.rows;
  c.cols = h.cols;
  c.data.resize(static_cast<size_t>(h.rows * h.cols) * dtype_size(h.dtype));
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(h.data_offset));
  in.read(reinterpret_cast<char*>(c.data.data()), static_cast<std::streamsize>(c.data.size()));
  if (!in || static_cast<size_t>(in.gcount()) != c.data.size()) return io_error("cannot read " + path.string());
  return c;
}

Result<NpyHeader> check_node_data_chunk(const ChunkedGraph& g, const std::string& name, int i) {
  const ChunkedNodeData* d = find_node_data(g, name);
  if (d == nullptr) return not_found(metadata_file(g) + ": no node data '" + name + "'");
  if (i < 0 || i >= g.num_node_chunks()) {
    return invalid_argument(metadata_file(g) + ": no node chunk " + std::to_string(i) + " (" +
                            std::to_string(g.num_node_chunks()) + " chunks)");
  }
  return checked_header(g, *d, i);
}

Result<NodeDataChunk> read_node_data_chunk(const ChunkedGraph& g, const std::string& name, int i) {
  DGLD_RETURN_IF_ERROR(check_node_data_chunk(g, name, i).status());
  return read_npy(g.dir / find_node_data(g, name)->files[i]);
}

Result<std::unique_ptr<GraphSource>> make_chunked_source(const fs::path& dir) {
  if (dir.empty()) return invalid_argument("--input chunks:DIR needs a directory");
  DGLD_ASSIGN_OR_RETURN(ChunkedGraph g, read_chunked_metadata(dir));
  if (g.num_nodes() > kMaxNodes) {
    return invalid_argument(metadata_file(g) + ": " + std::to_string(g.num_nodes()) +
                            " nodes; dgl-partition supports at most 2^31-1 (METIS's 32-bit node ids)");
  }
  return std::unique_ptr<GraphSource>(new ChunkedSource(std::move(g)));
}

Status write_chunked(GraphSource& source, const fs::path& out, int num_chunks, const std::string& graph_name,
                     bool overwrite) {
  auto log = logger("partition");
  if (num_chunks < 1) return invalid_argument("--to-chunks " + std::to_string(num_chunks) + ": expected at least 1 chunk");
  if (graph_name.empty()) return invalid_argument("--graph-name must not be empty");
  DGLD_ASSIGN_OR_RETURN(auto staging, StagingDir::create(out, overwrite));
  GraphData g;
  DGLD_RETURN_IF_ERROR(source.load_structure(&g));
  if (g.types.present()) {
    return invalid_argument(source.describe() + ": a heterogeneous graph (" + std::to_string(g.types.num_ntypes()) +
                            " node types); --to-chunks writes homogeneous graphs only");
  }
  if (g.edge_split.present) {
    return invalid_argument(source.describe() + ": has an edge split (split/" + g.edge_split.name +
                            "); the chunked layout holds no edge split, so --to-chunks takes node splits only");
  }
  const int64_t n = g.num_nodes, m = g.num_edges();
  if (num_chunks > n) {
    return invalid_argument("--to-chunks " + std::to_string(num_chunks) + ": more chunks than the " +
                            std::to_string(n) + " nodes");
  }
  // The edge list in original id order.
  std::vector<int32_t> src(static_cast<size_t>(m)), dst(static_cast<size_t>(m), -1);
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
      const int64_t id = g.orig_edge_id(k);
      if (id < 0 || id >= m || dst[id] >= 0) {
        return internal_error(source.describe() + ": original edge ids are not a permutation of [0, " +
                              std::to_string(m) + ")");
      }
      src[id] = g.src[k];
      dst[id] = static_cast<int32_t>(v);
    }
  }
  std::vector<int64_t>().swap(g.indptr);
  std::vector<int32_t>().swap(g.src);
  std::vector<int64_t>().swap(g.orig_eid);
  DGLD_RETURN_IF_ERROR(source.load_features(&g));
  if (g.feat_dim > 0 && static_cast<int64_t>(g.features.size()) != n * g.feat_dim) {
    return internal_error(source.describe() + ": features hold " + std::to_string(g.features.size()) +
                          " values, expected " + std::to_string(n * g.feat_dim));
  }

  const fs::path root = staging->path();
  std::error_code ec;
  for (const char* sub : {"edges", "node_data"}) {
    if (!fs::create_directory(root / sub, ec)) return io_error("cannot create " + (root / sub).string() + ": " + ec.message());
  }
  const std::string etype = "_N:_E:_N";
  nlohmann::ordered_json meta;
  meta["graph_name"] = graph_name;
  meta["node_type"] = nlohmann::ordered_json::array({"_N"});
  meta["edge_type"] = nlohmann::ordered_json::array({etype});
  std::vector<int64_t> node_sizes, edge_sizes;
  for (int i = 0; i < num_chunks; ++i) {
    node_sizes.push_back(n * (i + 1) / num_chunks - n * i / num_chunks);
    edge_sizes.push_back(m * (i + 1) / num_chunks - m * i / num_chunks);
  }
  meta["num_nodes_per_chunk"] = nlohmann::ordered_json::array();
  meta["num_nodes_per_chunk"].push_back(node_sizes);
  meta["num_edges_per_chunk"] = nlohmann::ordered_json::array();
  meta["num_edges_per_chunk"].push_back(edge_sizes);

  // Edges.
  nlohmann::ordered_json edge_files = nlohmann::ordered_json::array();
  for (int i = 0; i < num_chunks; ++i) {
    const std::string name = "edges/chunk-" + std::to_string(i) + ".txt";
    const int64_t start = m * i / num_chunks;
    DGLD_RETURN_IF_ERROR(write_edge_file(root / name, src.data() + start, dst.data() + start, edge_sizes[i]));
    edge_files.push_back(name);
  }
  meta["edges"][etype] = {{"format", {{"name", "csv"}, {"delimiter", " "}}}, {"data", edge_files}};
  std::vector<int32_t>().swap(src);
  std::vector<int32_t>().swap(dst);

  // Node data: one .npy per array and node chunk.
  nlohmann::ordered_json node_data = nlohmann::ordered_json::object();
  auto write_array = [&](const std::string& name, const char* descr, const void* base, size_t elem, int64_t cols,
                         bool matrix) -> Status {
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (int i = 0; i < num_chunks; ++i) {
      const std::string file = "node_data/" + name + "-" + std::to_string(i) + ".npy";
      const int64_t start = n * i / num_chunks;
      const auto* p = static_cast<const std::byte*>(base) + static_cast<size_t>(start * cols) * elem;
      DGLD_RETURN_IF_ERROR(write_npy(root / file, descr, node_sizes[i], cols, matrix, p,
                                     static_cast<size_t>(node_sizes[i] * cols) * elem));
      files.push_back(file);
    }
    node_data[name] = {{"format", {{"name", "numpy"}}}, {"data", files}};
    return Status::ok();
  };
  if (g.feat_dim > 0) DGLD_RETURN_IF_ERROR(write_array("features", "<f4", g.features.data(), 4, g.feat_dim, true));
  if (!g.labels.empty()) DGLD_RETURN_IF_ERROR(write_array("labels", "<i8", g.labels.data(), 8, 1, false));
  const std::vector<uint8_t>* masks[] = {&g.train_mask, &g.val_mask, &g.test_mask};
  for (int k = 0; k < 3; ++k) {
    if (!masks[k]->empty()) DGLD_RETURN_IF_ERROR(write_array(kMasks[k], "|u1", masks[k]->data(), 1, 1, false));
  }
  meta["node_data"]["_N"] = node_data;
  meta["edge_data"] = nlohmann::ordered_json::object();
  DGLD_RETURN_IF_ERROR(write_file_atomic(root / "metadata.json", meta.dump(2) + "\n"));
  DGLD_RETURN_IF_ERROR(staging->commit());
  log->info("wrote {} chunks of {} ({} nodes, {} edges) to {}", num_chunks, source.describe(), n, m, out.string());
  return Status::ok();
}

}  // namespace dgld
