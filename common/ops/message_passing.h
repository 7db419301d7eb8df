#pragma once
// Fused message-passing kernels over a block (DGL's g-SpMM / g-SDDMM for the
// cases GraphSAGE, GCN and GAT need), as LibTorch autograd functions.
//
// Each runs in one pass over the block's CSR with no edge-sized [E, F]
// intermediate, parallel over output rows (at::parallel_for: every row is
// written by one thread, no atomics). Backward passes walk the transposed
// CSR (BlockGraph::reverse, built once per block). float32 and float64.
//
// The *_reference functions compute the same with index_select / index_add_
// (one row per edge, scattered back): what dgld used before, kept as the
// reference the tests and benchmarks compare the fused kernels against.
//
// Private to training code (LibTorch).

#include <cstdint>

#include <torch/types.h>

#include "common/ops/block_graph.h"

namespace dgld::ops {

enum class Reduce { sum, mean };

// out[v] = reduce over v's in-edges (u -> v) of h[u], plus h[v] itself when
// self_loop (the block form of dgl.add_self_loop: dst v is src v). Mean
// divides by the number of terms; a dst with none gets 0. h: [num_src, ...]
// (any trailing shape); returns [num_dst, ...].
torch::Tensor copy_u_reduce(const BlockGraphPtr& gp, const torch::Tensor& h, Reduce reduce, bool self_loop = false);
torch::Tensor copy_u_reduce_reference(const BlockGraphPtr& gp, const torch::Tensor& h, Reduce reduce, bool self_loop = false);

// (copy_u_reduce(h) without self loops, h[:num_dst] as a copy): what a layer
// that reads both the dst rows and their neighbours' aggregate (SAGEConv)
// needs, with one gradient buffer for h: the dst rows' gradient is added
// into it by the aggregation's backward kernel, instead of a zero-filled
// num_src-row gradient for the slice and a full-size add.
std::pair<torch::Tensor, torch::Tensor> copy_u_reduce_with_dst(const BlockGraphPtr& gp, const torch::Tensor& h,
                                                               Reduce reduce);

// GAT's attention and aggregation in one op (DGL GATConv's el / er, edge
// softmax and u_mul_e_sum):
//   el[u] = z[u] . attn_l,  er[v] = z[v] . attn_r            per head
//   e_uv = LeakyReLU(el[u] + er[v], negative_slope)
//   alpha_uv = softmax of e over v's in-edges
//   out[v] = sum_u alpha_uv z[u]
// z: [num_src, H, F] (dst v is src v), attn_l / attn_r: H x F values (any
// shape, e.g. DGL's [1, H, F]); returns [num_dst, H, F]; a dst with no
// in-edges gets 0. Keeps alpha ([E, H]) for the backward pass.
torch::Tensor gat_aggregate(const BlockGraphPtr& gp, const torch::Tensor& z, const torch::Tensor& attn_l,
                            const torch::Tensor& attn_r, double negative_slope);
torch::Tensor gat_aggregate_reference(const BlockGraphPtr& gp, const torch::Tensor& z, const torch::Tensor& attn_l,
                                      const torch::Tensor& attn_r, double negative_slope);

// Process-wide: the torch.ops.dgld operators (what every TorchScript model,
// built-in or not, calls) run the *_reference kernels instead of the fused
// ones: trainer-host --kernels reference, and benchmarks that set the two
// side by side. Thread-safe; off by default.
void set_reference_kernels(bool on);
bool reference_kernels();

// Whether a layer that aggregates in_dim-wide rows over `b` and projects them
// to out_dim does less work projecting first (DGL's lin_before_mp) than
// aggregating first, counting the backward passes when grad mode is on and
// the input's gradient only when it needs one: the input layer's features
// need none, so there aggregating first skips the aggregation's backward and
// runs the product over the dst rows only. self_loop: the aggregation adds
// one self edge per dst (GCN's). TorchScript: dgld::project_before_aggregating.
bool project_before_aggregating(const BlockGraph& b, int64_t in_dim, int64_t out_dim, bool input_needs_grad,
                                bool self_loop);
// The same rule from a block's sizes, training or not (the block form reads
// LibTorch's grad mode): what the FLOP accounting of a step uses.
bool project_before_aggregating(int64_t num_src, int64_t num_dst, int64_t num_edges, int64_t in_dim, int64_t out_dim,
                                bool input_needs_grad, bool self_loop, bool training);

}  // namespace dgld::ops
