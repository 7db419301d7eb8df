#pragma once
// Graph sources read from files:
//   ogb:DIR    OGB raw layout: DIR/raw/{edge,node-feat,node-label,num-node-list}.csv[.gz]
//              and DIR/split/<split>/{train,valid,test}.csv[.gz]. Each undirected edge is
//              listed once; the reverse direction is added (edge i+E is the reverse of i).
//   edges:FILE "src,dst" lines, directed as written, plus optional files below.

#include <memory>
#include <string>

#include "partition/graph_data.h"

namespace dgld {

struct FileInputOptions {
  std::string spec;        // "ogb:DIR" or "edges:FILE"
  std::string split;       // OGB split name; empty = the only one under split/
  std::string node_feats;  // edges: CSV, one row of floats per node
  std::string labels;      // edges: one integer per line
  std::string train_ids, val_ids, test_ids;  // edges: one node id per line
  int64_t num_nodes = 0;   // edges: 0 = from the features/labels or max id + 1
};

Result<std::unique_ptr<GraphSource>> make_file_source(const FileInputOptions& opts);

}  // namespace dgld
