#pragma once
// Dropout (optionally fused with the ReLU before it) as one pass over the
// tensor, for the built-in models' activations between layers
// (python/dgld/models: torch.ops.dgld.dropout).
//
// LibTorch's CPU dropout draws each element's keep bit with a serial
// Bernoulli sampler and keeps a float mask as large as the input: on a
// [40 k, 256] activation that was 200 ms of a 980 ms model step
// (docs/performance.md, "The model step by operator"). Here the keep bit of
// element i is a hash of (seed, i): counter-based, so the pass is parallel
// and vectorised, the result does not depend on the thread count, and the
// backward pass needs no mask (relu: the output says which elements passed;
// otherwise the bits are drawn again from the seed). The seed is drawn from
// LibTorch's default generator, so torch::manual_seed makes runs
// reproducible. An element is dropped with probability p (to within 2^-24)
// and a kept one scaled by 1 / (1 - p), as torch.nn.functional.dropout.
//
// Private to training code (LibTorch).

#include <cstdint>

#include <torch/types.h>

namespace dgld::ops {

// relu(x) when `relu`, then dropout with probability p when `training`
// (p in [0, 1]; p == 1 gives zeros). Not training or p == 0: relu(x) or x
// itself. float32 and float64; any shape. Differentiable.
// With `bias` (one element per column of x: x's last dimension), x + bias
// in place of x, added in the same pass, and the bias's gradient (the
// column sums of x's) summed in the backward pass: a layer's bias, its
// broadcast and its gradient's reduction without passes of their own
// (python/dgld/models/sage.py).
torch::Tensor dropout(const torch::Tensor& x, double p, bool training, bool relu,
                      const c10::optional<torch::Tensor>& bias = c10::nullopt);

// The keep bits of `n` elements for `seed` and p, as uint8 (1: kept): what
// dropout uses, for tests.
torch::Tensor dropout_keep_mask(uint64_t seed, int64_t n, double p);

// Fills `self` (float32 or float64, contiguous) with 1 where a 32-bit hash of
// (seed, element) falls below p * 2^32, else 0: Bernoulli(p) draws to within
// 2^-32, in one parallel vectorised pass (Tensor.bernoulli_(p) for the
// Python package, python/src/torch_kernels.cpp). p in [0, 1].
void fill_bernoulli(torch::Tensor& self, double p, uint64_t seed);

// A seed from LibTorch's default CPU generator (torch::manual_seed sets it),
// or from `gen` when given.
uint64_t draw_seed(c10::optional<at::Generator> gen = c10::nullopt);

}  // namespace dgld::ops
