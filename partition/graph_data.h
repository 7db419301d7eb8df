#pragma once
// The whole input graph in memory, as dgl-partition holds it while partitioning:
// in-edge CSC over original node ids plus node data. Node ids are int32 (METIS's
// idx_t is 32-bit), edge positions int64.
//
// GraphSource loads a graph in two steps so features (usually the largest part) are
// read only after METIS has run and freed its memory.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace dgld {

// Edges listed in a text file, in original node ids, with the line of each (for errors).
struct ListedEdges {
  std::string path;
  std::vector<int32_t> src, dst;
  std::vector<int64_t> line;
  size_t size() const { return src.size(); }
};

// Negative destinations listed for the valid or test edges: row i (line line[i] of
// `path`) holds k ids for edge i.
struct ListedNegatives {
  std::string path;  // empty: none listed, dgl-partition draws them
  int64_t k = 0;
  std::vector<int32_t> ids;  // [rows * k]
  std::vector<int64_t> line;
};

// An OGB-style edge split read from the input (DIR/split/<name>/{train,valid,test}.csv
// with two columns, optional {valid,test}_neg.csv).
struct EdgeSplitInput {
  bool present = false;
  std::string name;
  ListedEdges train, valid, test;
  ListedNegatives valid_neg, test_neg;
};

// The node and edge types of a heterogeneous input (docs/heterogeneous.md). A
// heterogeneous graph is held as one homogeneous graph, as DGL does: the nodes
// of type t have the original homogeneous ids [ntype_offset[t], ntype_offset[t+1]),
// per-type id = homogeneous id - ntype_offset[t]; every edge has a type.
struct CanonicalEtype {
  std::string src, rel, dst;  // "author", "writes", "paper"
  int32_t src_type = 0, dst_type = 0;
  std::string name() const { return src + ":" + rel + ":" + dst; }  // DGL's "src:rel:dst"
};

struct GraphTypes {
  std::vector<std::string> ntypes;    // empty: a homogeneous graph
  std::vector<int64_t> ntype_offset;  // [ntypes + 1], from 0 to num_nodes
  std::vector<CanonicalEtype> etypes;
  int32_t target = -1;                // the node type with labels and masks, or -1
  // Features per node type: feat_dim[t] floats per node of type t (0: none), in
  // type_features[t] ([count(t) * feat_dim[t]]), loaded last like `features`.
  std::vector<int64_t> feat_dim;
  std::vector<std::vector<float>> type_features;
  // Per edge type: the original id of its first edge (a type's edges are
  // consecutive in input order, so an edge's per-type input index is its
  // original id minus this), and its features: edge_feat_dim[t] floats per edge
  // (0: none), rows by per-type input index, held in edge_features[edge_feat_of[t]]
  // (a reverse relation reads its forward relation's rows), loaded last. Empty
  // vectors: no edge features.
  std::vector<int64_t> etype_first_orig;
  std::vector<int64_t> edge_feat_dim;
  std::vector<int32_t> edge_feat_of;
  std::vector<std::vector<float>> edge_features;

  bool present() const { return !ntypes.empty(); }
  int num_ntypes() const { return static_cast<int>(ntypes.size()); }
  int num_etypes() const { return static_cast<int>(etypes.size()); }
  int64_t count(int t) const { return ntype_offset[t + 1] - ntype_offset[t]; }
  // Type of an original homogeneous id (a binary search over the offsets).
  int32_t type_of(int64_t v) const;
};

// A node or edge tensor carried into the partitions under its own name (any
// data of an in-memory graph besides features, labels and masks): one row per
// node (edge), by original id; on a heterogeneous graph one row per node (edge)
// of its type. Each partition's node (edge) tensor file holds it as
// "<type>/<name>" with the rows of its inner nodes (inner edges) in local order
// (docs/partition-format.md).
struct NamedTensor {
  std::string name;                  // without the type prefix: "year"
  DType dtype = DType::float32;      // one a partition file can hold (not int8)
  std::vector<int64_t> shape;        // [rows, ...], 1 to 4 dims
  const std::byte* data = nullptr;   // row-major; borrowed, the source keeps it alive
  // Heterogeneous graphs: the node (edge) type whose rows it holds, by per-type
  // original id (original id minus the type's first); -1 on a homogeneous graph.
  int32_t type = -1;
  int64_t row_bytes() const {
    int64_t b = static_cast<int64_t>(dtype_size(dtype));
    for (size_t i = 1; i < shape.size(); ++i) b *= shape[i];
    return b;
  }
};

struct GraphData {
  int64_t num_nodes = 0;
  // In-edges: the sources of node v are src[indptr[v] .. indptr[v+1]).
  std::vector<int64_t> indptr;
  std::vector<int32_t> src;
  // Original id of each CSC entry; empty means the original id is the CSC position.
  std::vector<int64_t> orig_eid;
  // True when the CSC is symmetric with no self loops or duplicates, so it is also
  // the out-edge CSR and METIS's adjacency as it is.
  bool symmetric_simple = false;

  std::vector<int64_t> labels;                        // [num_nodes] or empty
  std::vector<uint8_t> train_mask, val_mask, test_mask;  // [num_nodes] each, or empty
  int64_t feat_dim = 0;
  std::vector<float> features;                        // [num_nodes * feat_dim], loaded last

  // Heterogeneous inputs only (types.present()). For such a graph `features` and
  // `feat_dim` stay empty (features are per type, in types), labels and masks have
  // num_nodes entries that are meaningful for the target type only (labels -1 and
  // masks 0 elsewhere), and edge_type has the type of each CSC entry; within a
  // row the entries are sorted by edge type, then in input order.
  GraphTypes types;
  std::vector<int32_t> edge_type;

  // More node and edge data, carried as they are (in-memory inputs only).
  std::vector<NamedTensor> node_tensors, edge_tensors;
  // METIS balance constraints (DGL's balance_ntypes): the type of each node,
  // in [0, num_balance_types), one constraint column per type; or empty.
  std::vector<int32_t> balance_type;
  int32_t num_balance_types = 0;

  // An edge split found in the input (OGB layout); applied by the partitioner.
  EdgeSplitInput edge_split;
  // Link split: 1 for each CSC entry that is a training edge, or empty.
  std::vector<uint8_t> edge_train_mask;

  int64_t num_edges() const { return static_cast<int64_t>(src.size()); }
  int64_t orig_edge_id(int64_t pos) const { return orig_eid.empty() ? pos : orig_eid[pos]; }
};

class GraphSource {
 public:
  virtual ~GraphSource() = default;
  // "ogb:DIR", "generate:sbm", ... for messages.
  virtual std::string describe() const = 0;
  // Edges, labels and masks; sets feat_dim when features will follow.
  virtual Status load_structure(GraphData* g) = 0;
  // Fills g->features (called after load_structure).
  virtual Status load_features(GraphData* g) = 0;
};

// Builds the CSC from an edge list (edge i is src[i] -> dst[i], original id i).
// Ids must already be checked to lie in [0, num_nodes).
void build_csc(int64_t num_nodes, const std::vector<int32_t>& src, const std::vector<int32_t>& dst,
               GraphData* g);
// Sorts every CSC row by source (carrying the original ids) and reports whether the
// graph has no self loops and no duplicate edges.
bool sort_rows_check_simple(GraphData* g);
// The same for a typed edge list: edge i has type etype[i]; each CSC row is sorted
// by edge type, then by input order, and g->edge_type is filled.
void build_typed_csc(int64_t num_nodes, const std::vector<int32_t>& src, const std::vector<int32_t>& dst,
                     const std::vector<int32_t>& etype, GraphData* g);

}  // namespace dgld
