#pragma once
// The arithmetic of a model step and the machine's limit for it
// (docs/performance.md, "The model step against the machine's limit"):
// from a batch's blocks and the layers' widths, the FLOPs of the forward and
// backward passes and the dense products they run; and the rate LibTorch's
// BLAS reaches on products of those shapes with the trainer's thread count,
// measured in the run itself, against which the model step's rate is read.
//
// Torch-free header; model_cost.cpp runs the products.

#include <cstdint>
#include <vector>

#include "common/sampling/block.h"

namespace dgld::trainer {

// C[m, n] = op(A) op(B) with op(A) [m, k]; ta / tb: A or B stored
// transposed (a Linear's x W^T has tb; its weight gradient dY^T x has ta).
struct DenseProduct {
  int64_t m = 0, k = 0, n = 0;
  bool ta = false, tb = false;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
  }
};

struct StepWork {
  double dense_flops = 0;      // the products, forward and backward
  double aggregate_flops = 0;  // one add per aggregated element, forward and backward
  std::vector<DenseProduct> products;
  double flops() const { return dense_flops + aggregate_flops; }
};

// The work of one training step of a message-passing model over `blocks`,
// layer l mapping dims[l] to dims[l + 1] wide rows with `maps` dense maps
// per dst row (Model::dense_maps: SAGE 2, self and neighbours; GCN, GAT 1).
// Each layer aggregates first or projects first by the layers' own rule
// (ops::project_before_aggregating); a projected-first layer maps its src
// rows once (and its dst rows for the other maps). Backward: each product's
// weight gradient, and its input gradient for every layer but the first
// unless input_needs_grad (a learnable embedding); the aggregation's
// backward likewise. Attention, activations and the loss are not counted.
StepWork model_step_work(const std::vector<Block>& blocks, const std::vector<int64_t>& dims,
                         int maps, bool input_needs_grad);

// GFLOP/s of float32 products of these shapes through LibTorch (its BLAS,
// the calling thread's intra-op thread count), each long side capped at
// 16384 rows so that the buffers stay small, run for at least min_seconds;
// 0 when there is nothing to run.
double measure_gemm_gflops(const std::vector<DenseProduct>& products, double min_seconds = 0.2);

}  // namespace dgld::trainer
