#pragma once
// Heterogeneous graph sources (several node and edge types, held as one homogeneous
// graph plus GraphTypes, see graph_data.h):
//
//   ogb:DIR with DIR/raw/num-node-dict.csv[.gz]: the OGB heterogeneous raw layout
//   (ogbn-mag):
//     raw/num-node-dict.csv                 line 1: node type names, line 2: their counts
//     raw/relations/<src>___<rel>___<dst>/edge.csv[.gz]
//                                           "src,dst" per line in per-type ids; optional
//                                           num-edge-list.csv[.gz] (checked when present)
//     raw/node-feat/<type>/node-feat.csv[.gz]    one row of floats per node of the type
//     raw/node-label/<type>/node-label.csv[.gz]  one integer per node: the target type
//     split/<name>/<target type>/{train,valid,test}.csv[.gz]  per-type node ids
//   Node types keep the order of num-node-dict.csv; relations (edge types) are sorted
//   by directory name and their edges concatenated in that order for the original
//   edge ids.
//
//   --generate hsbm:key=value,...: a typed stochastic block model (hetero_generator.h).
//
// --add-reverse adds, after the input's relations and in their order, the relation
// "dst:rev-<rel>:src" for every relation "src:rel:dst", with every edge reversed; the
// reverse of input edge i has the original id E + i (E input edges).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "partition/graph_data.h"

namespace dgld {

// A typed edge list in homogeneous node ids: edge i is src[i] -> dst[i] of type
// etype[i]; its original id is i.
struct TypedEdgeList {
  std::vector<int32_t> src, dst, etype;
  size_t size() const { return src.size(); }
};

// The name of the relation added by --add-reverse for `rel`: "rev-<rel>".
std::string reverse_relation_name(const std::string& rel);

// --add-reverse: appends to types->etypes the reverse of every relation (in order) and
// to `edges` the reverse of every edge (in order). An error when a reverse relation's
// canonical name is already one of the input's relations.
Status add_reverse_relations(GraphTypes* types, TypedEdgeList* edges);

// Builds g's typed CSC (build_typed_csc), moving out and freeing `edges`.
void build_typed_graph(int64_t num_nodes, TypedEdgeList* edges, GraphData* g);

struct HeteroOgbOptions {
  std::filesystem::path dir;  // the dataset directory (ogb:DIR)
  std::string split;          // split name; empty = the only one under DIR/split
  std::string target_ntype;   // empty = the only node type with labels
  bool add_reverse = false;
};

// True when DIR is in the heterogeneous OGB layout (DIR/raw/num-node-dict.csv[.gz]).
bool is_ogb_hetero_dir(const std::filesystem::path& dir);

// describe(): "ogb-hetero:DIR".
Result<std::unique_ptr<GraphSource>> make_ogb_hetero_source(const HeteroOgbOptions& opts);

}  // namespace dgld
