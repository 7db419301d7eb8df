#include "common/ops/dropout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>
#include <torch/autograd.h>

#include "common/ops/vector_clones.h"

namespace dgld::ops {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// Elements per task: enough to pay for a thread hand-off.
constexpr int64_t kGrain = int64_t{1} << 16;

// The per-call constants of the keep bits: element i is kept when the top
// 24 bits of mix(mix(i + s0) ^ s1) are at least `threshold` (p * 2^24).
struct KeepRule {
  uint32_t s0 = 0, s1 = 0, threshold = 0;
};

// A 32-bit integer hash with good avalanche (Wellons' "lowbias32").
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

KeepRule keep_rule(uint64_t seed, double p) {
  KeepRule r;
  r.s0 = static_cast<uint32_t>(seed);
  r.s1 = static_cast<uint32_t>(seed >> 32);
  const double t = std::nearbyint(std::clamp(p, 0.0, 1.0) * double(1 << 24));
  r.threshold = static_cast<uint32_t>(t);
  return r;
}

// Elements [begin, end) never cross a multiple of 2^32 (split_by_high):
// within one run the high half of the index is folded into s1.
inline uint32_t high_salt(const KeepRule& r, int64_t begin) {
  return r.s1 ^ mix32(static_cast<uint32_t>(static_cast<uint64_t>(begin) >> 32) * 0x9e3779b9U);
}

template <typename F>
void split_by_high(int64_t begin, int64_t end, const F& run) {
  while (begin < end) {
    const int64_t next =
        std::min(end, static_cast<int64_t>((static_cast<uint64_t>(begin) | 0xffffffffULL) + 1));
    run(begin, next);
    begin = next;
  }
}

// relu on the bits (a negative's sign bit spread over the word clears it):
// plain vector integer ops, where a compare-and-select became a masked
// reload of x that took most of the pass.
inline float relu_by_bits(float v) {
  int32_t b;
  std::memcpy(&b, &v, sizeof b);
  b &= ~(b >> 31);
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// v where `keep`, else +0, by masking its bits: a select GCC vectorises in
// every clone (a conditional product, `keep ? g * scale : 0`, it did not
// vectorise where it was stored and read again), and a NaN or infinite v is
// 0 where dropped, as with a select.
inline float keep_or_zero(float v, bool keep) {
  int32_t b;
  std::memcpy(&b, &v, sizeof b);
  b &= -static_cast<int32_t>(keep);
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// The float32 passes, compiled for the machine's widest vectors (the loops
// are 32-bit integer hashes and selects, which baseline x86-64 cannot
// vectorise).

// One function per loop: GCC vectorises only one of two loops in a clone.
DGLD_VECTOR_CLONES
void forward_relu_f32(const float* __restrict x, float* __restrict y, int64_t n, uint32_t lo0,
                      uint32_t s0, uint32_t s1, uint32_t threshold, float scale) {
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t h = mix32(mix32(lo0 + static_cast<uint32_t>(k) + s0) ^ s1);
    y[k] = relu_by_bits(x[k]) * ((h >> 8) >= threshold ? scale : 0.f);
  }
}

DGLD_VECTOR_CLONES
void forward_f32(const float* __restrict x, float* __restrict y, int64_t n, uint32_t lo0,
                 uint32_t s0, uint32_t s1, uint32_t threshold, float scale) {
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t h = mix32(mix32(lo0 + static_cast<uint32_t>(k) + s0) ^ s1);
    y[k] = x[k] * ((h >> 8) >= threshold ? scale : 0.f);
  }
}

DGLD_VECTOR_CLONES
void backward_from_mask_f32(const float* __restrict g, float* __restrict gx, int64_t n,
                            uint32_t lo0, uint32_t s0, uint32_t s1, uint32_t threshold,
                            float scale) {
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t h = mix32(mix32(lo0 + static_cast<uint32_t>(k) + s0) ^ s1);
    gx[k] = keep_or_zero(g[k] * scale, (h >> 8) >= threshold);
  }
}

DGLD_VECTOR_CLONES
void bernoulli_f32(float* __restrict y, int64_t n, uint32_t lo0, uint32_t s0, uint32_t s1, uint32_t below) {
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t h = mix32(mix32(lo0 + static_cast<uint32_t>(k) + s0) ^ s1);
    y[k] = h < below ? 1.f : 0.f;
  }
}

DGLD_VECTOR_CLONES
void backward_from_output_f32(const float* __restrict g, const float* __restrict y,
                              float* __restrict gx, int64_t n, float scale) {
  for (int64_t k = 0; k < n; ++k) gx[k] = keep_or_zero(g[k] * scale, y[k] > 0.f);
}

// With a bias added first (one row of `bias` per call: n <= its width):
// y = dropout(relu(x + bias)), and in the backward pass the bias's gradient
// summed into `acc` (double, per thread) while the input's is written.
DGLD_VECTOR_CLONES
void forward_bias_relu_f32(const float* __restrict x, const float* __restrict bias, float* __restrict y,
                           int64_t n, uint32_t lo0, uint32_t s0, uint32_t s1, uint32_t threshold, float scale) {
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t h = mix32(mix32(lo0 + static_cast<uint32_t>(k) + s0) ^ s1);
    y[k] = relu_by_bits(x[k] + bias[k]) * ((h >> 8) >= threshold ? scale : 0.f);
  }
}

DGLD_VECTOR_CLONES
void forward_bias_f32(const float* __restrict x, const float* __restrict bias, float* __restrict y, int64_t n,
                      uint32_t lo0, uint32_t s0, uint32_t s1, uint32_t threshold, float scale) {
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t h = mix32(mix32(lo0 + static_cast<uint32_t>(k) + s0) ^ s1);
    y[k] = (x[k] + bias[k]) * ((h >> 8) >= threshold ? scale : 0.f);
  }
}

DGLD_VECTOR_CLONES
void backward_bias_from_output_f32(const float* __restrict g, const float* __restrict y, float* __restrict gx,
                                   double* __restrict acc, int64_t n, float scale) {
  for (int64_t k = 0; k < n; ++k) {
    const float v = keep_or_zero(g[k] * scale, y[k] > 0.f);
    gx[k] = v;
    acc[k] += v;
  }
}

DGLD_VECTOR_CLONES
void backward_bias_from_mask_f32(const float* __restrict g, float* __restrict gx, double* __restrict acc,
                                 int64_t n, uint32_t lo0, uint32_t s0, uint32_t s1, uint32_t threshold,
                                 float scale) {
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t h = mix32(mix32(lo0 + static_cast<uint32_t>(k) + s0) ^ s1);
    const float v = keep_or_zero(g[k] * scale, (h >> 8) >= threshold);
    gx[k] = v;
    acc[k] += v;
  }
}

// The same for other floating types (plain loops); the overloads below pick
// the float32 passes. `bias` (nullptr: none) holds n elements matching x's;
// `acc` (nullptr: none) gets the input's gradient added element by element.
template <typename T>
void forward_run(const T* x, const T* bias, T* y, int64_t n, uint32_t lo0, const KeepRule& r, uint32_t s1,
                 T scale, bool relu) {
  for (int64_t k = 0; k < n; ++k) {
    const bool kept =
        (mix32(mix32(lo0 + static_cast<uint32_t>(k) + r.s0) ^ s1) >> 8) >= r.threshold;
    const T v = bias ? x[k] + bias[k] : x[k];
    y[k] = (kept && (!relu || v > T(0))) ? v * scale : T(0);
  }
}

void forward_run(const float* x, const float* bias, float* y, int64_t n, uint32_t lo0, const KeepRule& r,
                 uint32_t s1, float scale, bool relu) {
  if (bias) {
    (relu ? forward_bias_relu_f32 : forward_bias_f32)(x, bias, y, n, lo0, r.s0, s1, r.threshold, scale);
  } else {
    (relu ? forward_relu_f32 : forward_f32)(x, y, n, lo0, r.s0, s1, r.threshold, scale);
  }
}

template <typename T>
void backward_run(const T* g, const T* y, T* gx, double* acc, int64_t n, uint32_t lo0, const KeepRule& r,
                  uint32_t s1, T scale, bool relu) {
  for (int64_t k = 0; k < n; ++k) {
    const bool kept =
        relu ? y[k] > T(0)
             : (mix32(mix32(lo0 + static_cast<uint32_t>(k) + r.s0) ^ s1) >> 8) >= r.threshold;
    gx[k] = kept ? g[k] * scale : T(0);
    if (acc) acc[k] += static_cast<double>(gx[k]);
  }
}

void backward_run(const float* g, const float* y, float* gx, double* acc, int64_t n, uint32_t lo0,
                  const KeepRule& r, uint32_t s1, float scale, bool relu) {
  if (acc && relu) {
    backward_bias_from_output_f32(g, y, gx, acc, n, scale);
  } else if (acc) {
    backward_bias_from_mask_f32(g, gx, acc, n, lo0, r.s0, s1, r.threshold, scale);
  } else if (relu) {
    backward_from_output_f32(g, y, gx, n, scale);
  } else {
    backward_from_mask_f32(g, gx, n, lo0, r.s0, s1, r.threshold, scale);
  }
}

double scale_for(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }

// Calls run(lo, hi, col) over the n elements in parallel, each [lo, hi) within
// one block of 2^32 elements (split_by_high) and, when width > 0, within one
// row of `width` elements, starting at column `col` of that row.
template <typename F>
void parallel_runs(int64_t n, int64_t width, const F& run) {
  if (width <= 0) {
    at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
      split_by_high(b, e, [&](int64_t lo, int64_t hi) { run(lo, hi, int64_t{0}); });
    });
    return;
  }
  at::parallel_for(0, n / width, std::max<int64_t>(1, kGrain / width), [&](int64_t rb, int64_t re) {
    for (int64_t row = rb; row < re; ++row) {
      const int64_t base = row * width;
      split_by_high(base, base + width, [&](int64_t lo, int64_t hi) { run(lo, hi, lo - base); });
    }
  });
}

// bias: empty (none), or one element per column of x (x's last dimension).
Tensor run_forward(const Tensor& x, const Tensor& bias, double p, bool relu, uint64_t seed) {
  const Tensor xc = x.contiguous();
  Tensor y = at::empty_like(xc);
  const KeepRule r = keep_rule(seed, p);
  const int64_t width = bias.defined() ? bias.numel() : 0;
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "dgld.dropout", [&] {
    const scalar_t* xp = xc.data_ptr<scalar_t>();
    const scalar_t* bp = width > 0 ? bias.data_ptr<scalar_t>() : nullptr;
    scalar_t* yp = y.data_ptr<scalar_t>();
    const auto scale = static_cast<scalar_t>(scale_for(p));
    parallel_runs(xc.numel(), width, [&](int64_t lo, int64_t hi, int64_t col) {
      forward_run(xp + lo, bp ? bp + col : nullptr, yp + lo, hi - lo, static_cast<uint32_t>(lo), r,
                  high_salt(r, lo), scale, relu);
    });
  });
  return y;
}

// The input's gradient, and the bias's (its column sums) when width > 0.
std::pair<Tensor, Tensor> run_backward(const Tensor& grad, const Tensor& y, int64_t width, double p, bool relu,
                                       uint64_t seed) {
  const Tensor gc = grad.contiguous();
  Tensor gx = at::empty_like(gc);
  const KeepRule r = keep_rule(seed, p);
  // One row of column sums per thread of LibTorch's pool, added up after.
  Tensor acc = width > 0 ? torch::zeros({at::get_num_threads(), width}, torch::kFloat64) : Tensor();
  AT_DISPATCH_FLOATING_TYPES(gc.scalar_type(), "dgld.dropout_backward", [&] {
    const scalar_t* gp = gc.data_ptr<scalar_t>();
    const scalar_t* yp = relu ? y.data_ptr<scalar_t>() : nullptr;
    scalar_t* gxp = gx.data_ptr<scalar_t>();
    double* ap = acc.defined() ? acc.data_ptr<double>() : nullptr;
    const auto scale = static_cast<scalar_t>(scale_for(p));
    parallel_runs(gc.numel(), width, [&](int64_t lo, int64_t hi, int64_t col) {
      double* a = ap ? ap + at::get_thread_num() * width + col : nullptr;
      backward_run(gp + lo, relu ? yp + lo : nullptr, gxp + lo, a, hi - lo, static_cast<uint32_t>(lo), r,
                   high_salt(r, lo), scale, relu);
    });
  });
  Tensor gbias = acc.defined() ? acc.sum(0).to(gc.scalar_type()) : Tensor();
  return {gx, gbias};
}

class DropoutFn : public torch::autograd::Function<DropoutFn> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double p, bool relu, int64_t seed,
                        const Tensor& bias) {
    Tensor y = run_forward(x, bias, p, relu, static_cast<uint64_t>(seed));
    ctx->saved_data["p"] = p;
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["bias_shape"] = bias.sizes().vec();  // [0]: no bias
    // relu: the output says which elements passed (y > 0 exactly when
    // x (+ bias) > 0 and the element was kept, as the scale is at least 1).
    if (relu) ctx->save_for_backward({y});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const bool relu = ctx->saved_data["relu"].toBool();
    const Tensor y = relu ? ctx->get_saved_variables()[0] : Tensor();
    const std::vector<int64_t> bias_shape = ctx->saved_data["bias_shape"].toIntVector();
    auto [gx, gbias] = run_backward(grads[0], y, c10::multiply_integers(bias_shape), ctx->saved_data["p"].toDouble(),
                                    relu, static_cast<uint64_t>(ctx->saved_data["seed"].toInt()));
    if (gbias.defined()) gbias = gbias.reshape(bias_shape);
    return {gx, Tensor(), Tensor(), Tensor(), gbias};
  }
};

}  // namespace

uint64_t draw_seed(c10::optional<at::Generator> given) {
  at::Generator gen = given.has_value() && given->defined() ? *given : at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

void fill_bernoulli(Tensor& self, double p, uint64_t seed) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_: p must be in [0, 1], got ", p);
  TORCH_CHECK(self.is_contiguous() && (self.scalar_type() == torch::kFloat32 || self.scalar_type() == torch::kFloat64),
              "dgld fill_bernoulli: a contiguous float32 or float64 tensor is needed");
  if (p == 0.0 || p == 1.0) {
    self.fill_(p);
    return;
  }
  const KeepRule r = keep_rule(seed, 0.0);
  const auto below = static_cast<uint32_t>(std::min(std::nearbyint(p * 4294967296.0), 4294967295.0));
  const int64_t n = self.numel();
  const bool f32 = self.scalar_type() == torch::kFloat32;
  void* data = self.data_ptr();
  at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    split_by_high(b, e, [&](int64_t lo, int64_t hi) {
      const uint32_t s1 = high_salt(r, lo), lo0 = static_cast<uint32_t>(lo);
      if (f32) {
        bernoulli_f32(static_cast<float*>(data) + lo, hi - lo, lo0, r.s0, s1, below);
      } else {
        double* y = static_cast<double*>(data) + lo;
        for (int64_t k = 0; k < hi - lo; ++k) {
          y[k] = mix32(mix32(lo0 + static_cast<uint32_t>(k) + r.s0) ^ s1) < below ? 1.0 : 0.0;
        }
      }
    });
  });
}

Tensor dropout(const Tensor& x, double p, bool training, bool relu, const c10::optional<Tensor>& bias) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "dgld.dropout: p must be in [0, 1], got ", p);
  TORCH_CHECK(at::isFloatingType(x.scalar_type()),
              "dgld.dropout: a floating-point tensor is needed, got ", x.scalar_type());
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) {
    TORCH_CHECK(x.dim() >= 1 && bias->numel() == x.size(-1) && (bias->dim() == 1 || bias->dim() == 0),
                "dgld.dropout: the bias must have one element per column of x (", x.dim() >= 1 ? x.size(-1) : 0,
                "), got shape ", bias->sizes());
    TORCH_CHECK(bias->scalar_type() == x.scalar_type(), "dgld.dropout: the bias is ", bias->scalar_type(),
                " but x is ", x.scalar_type());
  }
  if (!training || p == 0.0) {
    const Tensor v = has_bias ? x + *bias : x;
    return relu ? torch::relu(v) : v;
  }
  // No bias: an empty tensor (autograd's inputs must be defined).
  return DropoutFn::apply(x, p, relu, static_cast<int64_t>(draw_seed()),
                          has_bias ? bias->contiguous() : x.new_empty({0}));
}

Tensor dropout_keep_mask(uint64_t seed, int64_t n, double p) {
  const Tensor ones = torch::ones({n}, torch::kFloat32);
  return run_forward(ones, Tensor(), p, /*relu=*/false, seed).gt(0).to(torch::kUInt8);
}

}  // namespace dgld::ops
