#pragma once
// The chunked graph layout (docs/formats.md, "Chunked graphs"): DGL's
// chunked-graph format, a graph prepared in pieces so that the machines that
// partition it each read only their own. DIR/metadata.json names everything:
//
//   {
//     "graph_name": "g",
//     "node_type": ["_N"],
//     "num_nodes_per_chunk": [[n0, n1, ...]],       one list per node type
//     "edge_type": ["_N:_E:_N"],
//     "num_edges_per_chunk": [[e0, e1, ...]],       one list per edge type
//     "edges": {"_N:_E:_N": {"format": {"name": "csv", "delimiter": " "},
//                            "data": ["edges/chunk-0.txt", ...]}},
//     "node_data": {"_N": {"features": {"format": {"name": "numpy"},
//                                       "data": ["node_data/features-0.npy", ...]},
//                          "labels": {...}, "train_mask": {...}, ...}},
//     "edge_data": {}
//   }
//
// Node chunk i holds the nodes [sum(n_0..n_{i-1}), + n_i) (global node ids);
// node data chunk i has one row per node of node chunk i. Edge chunk j is a
// text file of "src dst" lines (global node ids, delimiter from "format"); the
// edges of chunk j have the ids [sum(e_0..e_{j-1}), + e_j) in line order.
// Paths are relative to DIR. Only homogeneous graphs (one node type "_N", one
// edge type) are supported; node data arrays are .npy files (little-endian
// float32, int64 or uint8 / bool, C order).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "partition/graph_data.h"
#include "partition/npy.h"

namespace dgld {

// The mask arrays a chunked graph may carry as node data (uint8 or bool).
inline constexpr const char* kChunkedMasks[] = {"train_mask", "val_mask", "test_mask"};

struct ChunkedNodeData {
  std::string name;                // "features", "labels", "train_mask", ...
  std::vector<std::string> files;  // one per node chunk, relative to the directory
};

struct ChunkedGraph {
  std::filesystem::path dir;        // holds metadata.json
  std::string graph_name;
  std::vector<int64_t> node_chunk_sizes;  // nodes per node chunk
  std::vector<int64_t> edge_chunk_sizes;  // edges per edge chunk
  std::vector<std::string> edge_files;    // one per edge chunk, relative to dir
  char delimiter = ' ';
  std::vector<ChunkedNodeData> node_data;

  int64_t num_nodes() const;
  int64_t num_edges() const;
  int num_node_chunks() const { return static_cast<int>(node_chunk_sizes.size()); }
  int num_edge_chunks() const { return static_cast<int>(edge_chunk_sizes.size()); }
  // First global node (edge) id of chunk i.
  int64_t node_chunk_start(int i) const;
  int64_t edge_chunk_start(int i) const;
};

// Reads and checks DIR/metadata.json: every error names the file and the field
// (chunk counts that differ between node data and node chunks, a negative
// size, a missing file entry, a second node type, an unknown format).
Result<ChunkedGraph> read_chunked_metadata(const std::filesystem::path& dir);

// The edges of edge chunk i: src[k] -> dst[k] is edge edge_chunk_start(i) + k.
// Errors name the file and line: a line without two integers, an id outside
// [0, num_nodes), fewer or more lines than num_edges_per_chunk says.
struct EdgeChunk {
  std::vector<int64_t> src, dst;
};
Result<EdgeChunk> read_edge_chunk(const ChunkedGraph& g, int i);
// The same checks, each edge (src, dst) handed to fn in file order instead
// of being kept.
Status for_each_edge_in_chunk(const ChunkedGraph& g, int i, const std::function<void(int64_t, int64_t)>& fn);

// One node data array's rows of node chunk i. dtype is float32, int64 or
// uint8; `cols` values per row (1 for a vector). Errors name the file: not a
// .npy file, another dtype than the other chunks', a row count other than the
// chunk's node count.
Result<NodeDataChunk> read_node_data_chunk(const ChunkedGraph& g, const std::string& name, int i);

// read_node_data_chunk's checks on the file's header only, without the rows.
Result<NpyHeader> check_node_data_chunk(const ChunkedGraph& g, const std::string& name, int i);

// The whole chunked graph as a GraphSource (the single-process partitioner's
// input, --input chunks:DIR): edges as listed (directed), node data
// "features" (float32 matrix), "labels" (int64), "train_mask" / "val_mask" /
// "test_mask" (uint8 or bool); others are ignored with a log line.
Result<std::unique_ptr<GraphSource>> make_chunked_source(const std::filesystem::path& dir);

// dgl-partition --to-chunks N: writes `source`'s graph (homogeneous) to `out` as
// N node chunks and N edge chunks of near-equal sizes (edges in original id
// order, each edge in the direction stored: an OGB input's added reverse edges
// are written too). Atomic: assembled in a hidden sibling directory and
// renamed into place; nothing is left on error. An existing non-empty `out`
// is an error unless `overwrite`.
Status write_chunked(GraphSource& source, const std::filesystem::path& out, int num_chunks, const std::string& graph_name,
                     bool overwrite);

}  // namespace dgld
