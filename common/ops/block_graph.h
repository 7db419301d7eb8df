#pragma once
// A block (DGL's message-flow graph, common/sampling/block.h) as LibTorch
// tensors, the one graph type the message-passing kernels (message_passing.h)
// take. The same object is torch.classes.dgld.Block in Python and in
// TorchScript models (torch_library.cpp registers it), so a layer sees one
// block type whoever runs it: trainer-host's built-in models, a scripted
// user model, or the Python package.
//
// Edges are stored dst-major (CSR over dst nodes, as the sampler makes them):
// dst v has in-edges indices[indptr[v] .. indptr[v+1]) (local src indices).
// The src-major transpose, which the backward kernels walk so that every
// output row is written by one thread, is built once on first need and then
// shared by every layer that runs on the block. Src node i and dst node i are
// the same node for i < num_dst (DGL's block convention).
//
// A heterogeneous graph's block (held as one homogeneous graph whose edges
// each have a type id) may carry edge types: set_etypes, then relation(r) is
// the block restricted to the edges of type r (what R-GCN aggregates over).
//
// A general graph's edges have ids in the user's order, not the CSR's: an
// optional edge order (set_edge_order) maps each CSR position to its edge
// id, the row of that edge in edge-feature tensors (what gspmm.h's kernels
// read and gsddmm writes). Sampled blocks have none: edge id = position.
//
// Private to training code (LibTorch). Not thread-safe beyond the lazily
// built parts, which are guarded: one thread runs a model on a block at a time.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <torch/custom_class.h>
#include <torch/types.h>

#include "common/status.h"

namespace dgld {
struct Block;
}

namespace dgld::ops {

class BlockGraph : public torch::CustomClassHolder {
 public:
  // indptr: int64 [num_dst + 1], from 0 to the edge count, non-decreasing;
  // indices: int64 [num_edges] in [0, num_src); num_src >= num_dst. The
  // tensors are made contiguous (not copied when they already are).
  // invalid_argument naming the first inconsistency.
  static Result<c10::intrusive_ptr<BlockGraph>> create(torch::Tensor indptr, torch::Tensor indices,
                                                       int64_t num_src);
  // The same, throwing c10::Error (TORCH_CHECK) instead: the TorchScript
  // constructor.
  BlockGraph(torch::Tensor indptr, torch::Tensor indices, int64_t num_src);

  int64_t num_src_nodes() const { return num_src_; }
  int64_t num_dst_nodes() const { return num_dst_; }
  int64_t num_edges() const { return indices_.size(0); }
  const torch::Tensor& indptr() const { return indptr_; }
  const torch::Tensor& indices() const { return indices_; }  // the src of each edge

  // int64 [num_edges]: the dst of each edge (COO), built on first call.
  const torch::Tensor& edge_dst();
  // int64 [num_dst] / [num_src]: in-edges per dst, out-edges per src.
  torch::Tensor in_degrees() const;
  torch::Tensor out_degrees();

  // The transpose: src u has out-edges at positions rev_indptr[u] ..
  // rev_indptr[u+1] of rev_dst (their dst) and rev_eid (their position in
  // the dst-major order, to find per-edge values). Built on first call.
  struct Reverse {
    torch::Tensor rev_indptr;  // int64 [num_src + 1]
    torch::Tensor rev_dst;     // int64 [num_edges]
    torch::Tensor rev_eid;     // int64 [num_edges]
  };
  const Reverse& reverse();
  bool has_reverse() const;

  // Edge types. etypes: int32 or int64 [num_edges], parallel to indices(),
  // each in [0, num_etypes); num_etypes 0 means max type + 1 (0 when the
  // block has no edges). Kept as given (made contiguous). Replaces earlier
  // types and drops relation graphs built from them. invalid_argument naming
  // the wrong length, dtype or the first type out of range.
  Status set_etypes(torch::Tensor etypes, int64_t num_etypes = 0);
  bool has_etypes() const;
  int64_t num_etypes() const;      // 0 without edge types
  torch::Tensor etypes() const;    // undefined without edge types
  // The block restricted to the edges of type r, 0 <= r < num_etypes(): the
  // same num_src / num_dst and node numbering, dst-major CSR, each dst's
  // edges in their order here. Every relation is built in one pass (a
  // counting sort of the edges by (type, dst)) on the first call, then
  // shared by every layer that runs on the block; a relation graph carries
  // no ids, node data or edge types of its own. Costs num_etypes x
  // (num_dst + 1) indptr entries. Throws c10::Error (TORCH_CHECK) without
  // edge types or with r out of range.
  c10::intrusive_ptr<BlockGraph> relation(int64_t r);
  bool has_relations() const;  // built already

  // Edge ids. eids: int64 [num_edges], a permutation of 0 .. num_edges-1:
  // CSR position p holds the edge whose id is eids[p]. An undefined tensor
  // puts back the identity (id = position), the default. Kept as given (made
  // contiguous). invalid_argument naming the wrong dtype or length, the first
  // id out of range or the first repeated id.
  Status set_edge_order(torch::Tensor eids);
  // The permutation, or an undefined tensor for the identity.
  torch::Tensor edge_order() const;

  // Optional global ids of the block's nodes (the kernels never read them).
  // Undefined tensors when not set.
  torch::Tensor src_ids, dst_ids, edge_ids;
  // Per-node data the data loader attached (input features on the src side,
  // labels on the dst side), as DGL's block.srcdata / dstdata; with the ids
  // under "_ID" (dgl.NID) when set.
  std::map<std::string, torch::Tensor> src_data, dst_data;

 private:
  struct Checked {  // only create() makes one: its arguments were validated
    explicit Checked() = default;
  };

 public:
  BlockGraph(Checked, torch::Tensor indptr, torch::Tensor indices, int64_t num_src);

 private:

  int64_t num_src_ = 0, num_dst_ = 0;
  torch::Tensor indptr_, indices_;
  mutable std::mutex mu_;
  torch::Tensor edge_dst_;
  Reverse reverse_;
  torch::Tensor etypes_;  // int32 / int64 [num_edges], or undefined
  int64_t num_etypes_ = 0;
  torch::Tensor edge_order_;  // int64 [num_edges], or undefined (identity)
  std::vector<c10::intrusive_ptr<BlockGraph>> relations_;  // [num_etypes_] once built
};

using BlockGraphPtr = c10::intrusive_ptr<BlockGraph>;

// A sampled block (common/sampling/block.h) as a BlockGraph: its CSR copied
// into tensors, with `with_ids` its src, dst and edge global ids too, and
// its edge types (Block::etypes, int32) when it has any, with num_etypes
// relations (0: max type + 1; see set_etypes). invalid_argument when the
// block's arrays are inconsistent.
Result<BlockGraphPtr> block_graph_from(const Block& block, bool with_ids = false, int64_t num_etypes = 0);
// The same, taking the block's arrays over instead of copying them.
Result<BlockGraphPtr> block_graph_from(Block&& block, bool with_ids = false, int64_t num_etypes = 0);

// The check behind create(): ok, or invalid_argument naming what is wrong.
Status validate_csr(const torch::Tensor& indptr, const torch::Tensor& indices, int64_t num_src);

}  // namespace dgld::ops
