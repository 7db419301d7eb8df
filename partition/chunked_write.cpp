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
    if (!masks[k]->empty()) DGLD_RETURN_IF_ERROR(write_array(kChunkedMasks[k], "|u1", masks[k]->data(), 1, 1, false));
  }
  meta["node_data"]["_N"] = node_data;
  meta["edge_data"] = nlohmann::ordered_json::object();
  DGLD_RETURN_IF_ERROR(write_file_atomic(root / "metadata.json", meta.dump(2) + "\n"));
  DGLD_RETURN_IF_ERROR(staging->commit());
  log->info("wrote {} chunks of {} ({} nodes, {} edges) to {}", num_chunks, source.describe(), n, m, out.string());
  return Status::ok();
}

}  // namespace dgld
