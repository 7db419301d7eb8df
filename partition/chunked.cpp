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
      } else if (std::find(std::begin(kChunkedMasks), std::end(kChunkedMasks), d.name) != std::end(kChunkedMasks)) {
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

}  // namespace

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

}  // namespace dgld
