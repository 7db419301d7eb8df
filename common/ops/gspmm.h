#pragma once
// DGL's generalized message-passing kernels over a BlockGraph, as LibTorch
// autograd functions (torch.ops.dgld.gspmm / gsddmm, torch_library.cpp):
//
//   gsddmm: out[e] = op(lhs[target(e)], rhs[target(e)])        every edge e
//   gspmm:  out[v] = reduce over v's in-edges e of the same message
//
// An operand's target says where its rows live: u = src nodes
// ([num_src, *shape]), v = dst nodes ([num_dst, *shape]), e = edges
// ([num_edges, *shape], the row of an edge is its edge id:
// BlockGraph::set_edge_order). Feature shapes (all but the first dimension)
// broadcast as DGL's do: the shorter padded with leading 1s, then numpy's
// rule per dimension. dot sums lhs * rhs over the last dimension (equal in
// both), keeping it as size 1, and broadcasts the others. copy_lhs ignores
// rhs (it may be undefined), copy_rhs lhs.
//
// gspmm's reducers are sum, mean, max and min; a dst with no in-edges gets 0.
// Both ops run in one pass over the CSR with no [E, F] intermediate, every
// output row written by one thread (at::parallel_for, no atomics), and so do
// their backward passes: gradients to a u operand walk the transposed CSR
// (BlockGraph::reverse), to v the CSR, to e each edge once. Gradients to a
// broadcast operand are summed back to its own shape; max / min send each
// output element's gradient through the edge that won it only. float32 and
// float64, CPU; inputs need not be contiguous.
//
// Wrong names, targets, row counts, shapes or dtypes throw c10::Error
// (TORCH_CHECK) naming the op and what is wrong.
//
// The *_reference functions compute the same with index_select / index_add_
// and dense LibTorch ops (autograd through them): what the tests and the
// benchmark (scripts/bench/kernels.sh) compare the fused kernels against.
//
// Private to training code (LibTorch).

#include <string_view>

#include <torch/types.h>

#include "common/ops/block_graph.h"
#include "common/status.h"

namespace dgld::ops {

// How an edge's message is made of its two operands.
enum class BinaryOp { copy_lhs, copy_rhs, add, sub, mul, div, dot };
// How gspmm combines the messages of a dst's in-edges.
enum class SpmmReduce { sum, mean, max, min };
// Where an operand's rows live.
enum class Target { u, v, e };

// "copy_lhs", ..., "dot" / "sum", ... / "u", "v", "e". invalid_argument
// naming the wrong name ("unknown <what> '<name>'") and listing the valid
// ones.
Result<BinaryOp> parse_binary_op(std::string_view name);
Result<SpmmReduce> parse_spmm_reduce(std::string_view name);
Result<Target> parse_target(std::string_view name, std::string_view what = "target");
const char* binary_op_name(BinaryOp op);
const char* spmm_reduce_name(SpmmReduce reduce);
const char* target_name(Target target);

// [num_dst, *out_shape].
torch::Tensor gspmm(const BlockGraphPtr& g, BinaryOp op, SpmmReduce reduce, const torch::Tensor& lhs,
                    const torch::Tensor& rhs, Target lhs_target = Target::u, Target rhs_target = Target::e);
// [num_edges, *out_shape], in edge-id order.
torch::Tensor gsddmm(const BlockGraphPtr& g, BinaryOp op, const torch::Tensor& lhs, const torch::Tensor& rhs,
                     Target lhs_target = Target::u, Target rhs_target = Target::v);

torch::Tensor gspmm_reference(const BlockGraphPtr& g, BinaryOp op, SpmmReduce reduce, const torch::Tensor& lhs,
                              const torch::Tensor& rhs, Target lhs_target = Target::u,
                              Target rhs_target = Target::e);
torch::Tensor gsddmm_reference(const BlockGraphPtr& g, BinaryOp op, const torch::Tensor& lhs,
                               const torch::Tensor& rhs, Target lhs_target = Target::u,
                               Target rhs_target = Target::v);

}  // namespace dgld::ops
