#pragma once
// The loops behind gspmm.h (gspmm_kernels.cpp): no checks here, gspmm.cpp
// validates and normalizes the operands first. Internal to common/ops.

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "common/ops/block_graph.h"
#include "common/ops/gspmm.h"

namespace dgld::ops::detail {

// How an edge's message row is made of its operands' rows (DGL's BcastOff).
struct Bcast {
  // same: equal feature shapes, element i (dot: product i) reads element i
  // (dot: elements i*k ..) of both rows; lhs_scalar / rhs_scalar: that
  // operand has one element, read by every output element; table: lhs_off /
  // rhs_off give each output element's first element in each row.
  enum class Mode { same, lhs_scalar, rhs_scalar, table };
  Mode mode = Mode::same;
  int64_t n = 0;  // output elements per row (dot: products)
  int64_t k = 1;  // elements per product (dot), 1 otherwise
  int64_t lhs_len = 0, rhs_len = 0;  // operand row widths
  std::vector<int64_t> lhs_off, rhs_off;  // [n] when mode == table
  std::vector<int64_t> out_shape;         // the output's feature shape
};

// A normalized message: copy_rhs became copy_lhs of rhs; for copy_lhs, rhs
// is lhs again (so every kernel reads two rows) and the Bcast is `same`.
// lhs / rhs are contiguous.
struct Operands {
  BinaryOp op = BinaryOp::copy_lhs;  // never copy_rhs
  torch::Tensor lhs, rhs;
  Target lhs_target = Target::u, rhs_target = Target::u;
};

// out: [num_dst, n] (any shape of that size), written whole; arg: int64 of
// out's size for max / min (the winning CSR position, -1 for no in-edges),
// undefined otherwise.
void spmm_forward(BlockGraph& g, const Operands& x, const Bcast& bc, SpmmReduce reduce, torch::Tensor& out,
                  torch::Tensor& arg);
// out: [num_edges, n], written whole, rows in edge-id order.
void sddmm_forward(BlockGraph& g, const Operands& x, const Bcast& bc, torch::Tensor& out);

// What flows back into the messages: gspmm's gradient ([num_dst, n], with
// the reducer and arg of its forward) or gsddmm's ([num_edges, n]).
struct Upstream {
  torch::Tensor grad;  // contiguous
  bool per_edge = false;  // gsddmm
  SpmmReduce reduce = SpmmReduce::sum;
  torch::Tensor arg;  // max / min
};

// The gradient of lhs (lhs_side) or rhs, the shape of that operand.
torch::Tensor operand_grad(BlockGraph& g, const Operands& x, const Bcast& bc, const Upstream& up, bool lhs_side);

}  // namespace dgld::ops::detail
