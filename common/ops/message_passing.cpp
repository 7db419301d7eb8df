#include "common/ops/message_passing.h"

#include <atomic>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include "common/ops/vector_clones.h"

namespace dgld::ops {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// How far ahead the gathers prefetch the rows they will read next.
constexpr int64_t kPrefetchDistance = 8;

// Rows per task so that a task does about 64 k element operations: enough
// to pay for a thread hand-off, small enough to balance skewed degrees.
int64_t grain_for(int64_t rows, int64_t work) {
  if (rows <= 0) return 1;
  const int64_t per_row = std::max<int64_t>(1, work / rows);
  return std::max<int64_t>(1, (int64_t{1} << 16) / per_row);
}

template <typename T>
inline void prefetch_row(const T* row, int64_t n) {
  const char* p = reinterpret_cast<const char*>(row);
  const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
}

template <typename T>
inline void add_row(T* __restrict o, const T* __restrict x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) o[j] += x[j];
}

template <typename T>
inline void axpy_row(T* __restrict o, const T* __restrict x, T a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) o[j] += a * x[j];
}

template <typename T>
inline T dot_row(const T* __restrict a, const T* __restrict b, int64_t n) {
  T s = 0;
  for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

template <typename T>
inline T leaky(T x, T slope) {
  return x > 0 ? x : x * slope;
}

// ------------------------------------------------------------ copy_u_reduce

// The scale each dst's sum is multiplied by: 1/(terms) for mean, 1 for sum.
template <typename T>
std::vector<T> dst_scale(const int64_t* indptr, int64_t nd, Reduce reduce, bool self_loop) {
  std::vector<T> s(static_cast<size_t>(nd), T(1));
  if (reduce == Reduce::mean) {
    for (int64_t v = 0; v < nd; ++v) {
      const int64_t n = indptr[v + 1] - indptr[v] + (self_loop ? 1 : 0);
      s[static_cast<size_t>(v)] = n > 0 ? T(1) / static_cast<T>(n) : T(0);
    }
  }
  return s;
}

// Dst rows [begin, end) of copy_u's forward.
template <typename T>
DGLD_ALWAYS_INLINE void copy_u_forward_rows(const int64_t* indptr, const int64_t* idx, int64_t begin, int64_t end,
                                            const T* h, int64_t f, const T* scale, bool self_loop, T* out) {
  const int64_t stop = indptr[end];
  for (int64_t v = begin; v < end; ++v) {
    T* o = out + v * f;
    if (self_loop) {
      std::copy(h + v * f, h + (v + 1) * f, o);
    } else {
      std::fill(o, o + f, T(0));
    }
    for (int64_t k = indptr[v]; k < indptr[v + 1]; ++k) {
      if (k + kPrefetchDistance < stop) prefetch_row(h + idx[k + kPrefetchDistance] * f, f);
      add_row(o, h + idx[k] * f, f);
    }
    const T s = scale[v];
    if (s != T(1)) {
      for (int64_t j = 0; j < f; ++j) o[j] *= s;
    }
  }
}

// Src rows [begin, end) of its backward: grad_h[u] = sum over u's out-edges
// (u -> v) of scale[v] grad_out[v], plus scale[u] grad_out[u] for u < nd when
// self_loop, plus g_dst[u] for u < nd when g_dst is given (the gradient of
// h's dst rows used elsewhere).
template <typename T>
DGLD_ALWAYS_INLINE void copy_u_backward_rows(const int64_t* rev_indptr, const int64_t* rev_dst, int64_t begin,
                                             int64_t end, int64_t nd, const T* g, int64_t f, const T* scale,
                                             bool self_loop, const T* g_dst, T* grad_h) {
  const int64_t stop = rev_indptr[end];
  for (int64_t u = begin; u < end; ++u) {
    T* o = grad_h + u * f;
    if (g_dst && u < nd) {
      std::copy(g_dst + u * f, g_dst + (u + 1) * f, o);
    } else {
      std::fill(o, o + f, T(0));
    }
    if (self_loop && u < nd) axpy_row(o, g + u * f, scale[u], f);
    for (int64_t r = rev_indptr[u]; r < rev_indptr[u + 1]; ++r) {
      if (r + kPrefetchDistance < stop) prefetch_row(g + rev_dst[r + kPrefetchDistance] * f, f);
      const int64_t v = rev_dst[r];
      axpy_row(o, g + v * f, scale[v], f);
    }
  }
}

// float32, the models' type, for the widest vectors the machine has.
DGLD_VECTOR_CLONES
void copy_u_forward_rows_f32(const int64_t* indptr, const int64_t* idx, int64_t begin, int64_t end, const float* h,
                             int64_t f, const float* scale, bool self_loop, float* out) {
  copy_u_forward_rows<float>(indptr, idx, begin, end, h, f, scale, self_loop, out);
}

DGLD_VECTOR_CLONES
void copy_u_backward_rows_f32(const int64_t* rev_indptr, const int64_t* rev_dst, int64_t begin, int64_t end,
                              int64_t nd, const float* g, int64_t f, const float* scale, bool self_loop,
                              const float* g_dst, float* grad_h) {
  copy_u_backward_rows<float>(rev_indptr, rev_dst, begin, end, nd, g, f, scale, self_loop, g_dst, grad_h);
}

template <typename T>
void copy_u_forward_kernel(const int64_t* indptr, const int64_t* idx, int64_t nd, const T* h, int64_t f,
                           const T* scale, bool self_loop, T* out) {
  const int64_t ne = indptr[nd];
  at::parallel_for(0, nd, grain_for(nd, (ne + nd) * f), [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      copy_u_forward_rows_f32(indptr, idx, begin, end, h, f, scale, self_loop, out);
    } else {
      copy_u_forward_rows<T>(indptr, idx, begin, end, h, f, scale, self_loop, out);
    }
  });
}

template <typename T>
void copy_u_backward_kernel(const int64_t* rev_indptr, const int64_t* rev_dst, int64_t ns, int64_t nd, const T* g,
                            int64_t f, const T* scale, bool self_loop, const T* g_dst, T* grad_h) {
  const int64_t ne = rev_indptr[ns];
  at::parallel_for(0, ns, grain_for(ns, (ne + ns) * f), [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      copy_u_backward_rows_f32(rev_indptr, rev_dst, begin, end, nd, g, f, scale, self_loop, g_dst, grad_h);
    } else {
      copy_u_backward_rows<T>(rev_indptr, rev_dst, begin, end, nd, g, f, scale, self_loop, g_dst, grad_h);
    }
  });
}

std::vector<int64_t> shape_with_rows(const Tensor& t, int64_t rows) {
  auto s = t.sizes().vec();
  s[0] = rows;
  return s;
}

int64_t row_width(const Tensor& t) { return t.size(0) > 0 ? t.numel() / t.size(0) : t.numel(); }

Tensor copy_u_forward(BlockGraph& g, const Tensor& h_in, Reduce reduce, bool self_loop) {
  const Tensor h = h_in.contiguous();
  const int64_t nd = g.num_dst_nodes(), f = row_width(h);
  Tensor out = torch::empty(shape_with_rows(h, nd), h.options());
  const int64_t* indptr = g.indptr().data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "dgld::copy_u_reduce", [&] {
    const auto scale = dst_scale<scalar_t>(indptr, nd, reduce, self_loop);
    copy_u_forward_kernel<scalar_t>(indptr, g.indices().data_ptr<int64_t>(), nd, h.data_ptr<scalar_t>(), f,
                                    scale.data(), self_loop, out.data_ptr<scalar_t>());
  });
  return out;
}

Tensor copy_u_backward(BlockGraph& g, const Tensor& grad_in, const std::vector<int64_t>& h_shape, Reduce reduce,
                       bool self_loop, const Tensor& grad_dst_in = Tensor()) {
  const Tensor grad = grad_in.defined() ? grad_in.contiguous() : torch::zeros(shape_with_rows(grad_dst_in, g.num_dst_nodes()), grad_dst_in.options());
  const Tensor grad_dst = grad_dst_in.defined() ? grad_dst_in.contiguous() : Tensor();
  const int64_t ns = g.num_src_nodes(), nd = g.num_dst_nodes(), f = row_width(grad);
  Tensor grad_h = torch::empty(h_shape, grad.options());
  const auto& rev = g.reverse();
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "dgld::copy_u_reduce_backward", [&] {
    const auto scale = dst_scale<scalar_t>(g.indptr().data_ptr<int64_t>(), nd, reduce, self_loop);
    copy_u_backward_kernel<scalar_t>(rev.rev_indptr.data_ptr<int64_t>(), rev.rev_dst.data_ptr<int64_t>(), ns, nd,
                                     grad.data_ptr<scalar_t>(), f, scale.data(), self_loop,
                                     grad_dst.defined() ? grad_dst.data_ptr<scalar_t>() : nullptr,
                                     grad_h.data_ptr<scalar_t>());
  });
  return grad_h;
}

// The block travels through autograd in a capsule: it must outlive the
// backward pass, and the capsule holds a reference.
BlockGraph& block_of(AutogradContext* ctx) {
  return *static_cast<BlockGraph*>(ctx->saved_data["block"].toCapsule().get());
}

class CopyUReduceFunction : public torch::autograd::Function<CopyUReduceFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& h, BlockGraphPtr g, int64_t reduce, bool self_loop) {
    ctx->saved_data["block"] = c10::IValue::make_capsule(g);
    ctx->saved_data["reduce"] = reduce;
    ctx->saved_data["self_loop"] = self_loop;
    ctx->saved_data["h_shape"] = h.sizes().vec();
    return copy_u_forward(*g, h, static_cast<Reduce>(reduce), self_loop);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Tensor grad_h;
    if (ctx->needs_input_grad(0)) {
      grad_h = copy_u_backward(block_of(ctx), grads[0], ctx->saved_data["h_shape"].toIntVector(),
                               static_cast<Reduce>(ctx->saved_data["reduce"].toInt()),
                               ctx->saved_data["self_loop"].toBool());
    }
    return {grad_h, Tensor(), Tensor(), Tensor()};
  }
};

// The same with h's dst rows as a second output (a copy), whose gradient is
// added into grad_h's first rows by the backward kernel itself: what a layer
// that reads both h[:num_dst] and the aggregation would otherwise pay as a
// zero-filled [num_src, F] gradient for the slice and a full-size add.
class CopyUReduceWithDstFunction : public torch::autograd::Function<CopyUReduceWithDstFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& h, BlockGraphPtr g, int64_t reduce) {
    ctx->saved_data["block"] = c10::IValue::make_capsule(g);
    ctx->saved_data["reduce"] = reduce;
    ctx->saved_data["h_shape"] = h.sizes().vec();
    Tensor agg = copy_u_forward(*g, h, static_cast<Reduce>(reduce), /*self_loop=*/false);
    return {agg, h.narrow(0, 0, g->num_dst_nodes()).clone(at::MemoryFormat::Contiguous)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Tensor grad_h;
    if (ctx->needs_input_grad(0) && (grads[0].defined() || grads[1].defined())) {
      grad_h = copy_u_backward(block_of(ctx), grads[0], ctx->saved_data["h_shape"].toIntVector(),
                               static_cast<Reduce>(ctx->saved_data["reduce"].toInt()), /*self_loop=*/false, grads[1]);
    }
    return {grad_h, Tensor(), Tensor()};
  }
};

// ------------------------------------------------------------ gat_aggregate

// el[u, h] = z[u, h, :] . attn[h, :] for the first `rows` rows of z.
template <typename T>
void attention_scores(const T* z, const T* attn, int64_t rows, int64_t heads, int64_t f, T* out) {
  at::parallel_for(0, rows, grain_for(rows, rows * heads * f), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      for (int64_t hd = 0; hd < heads; ++hd) out[u * heads + hd] = dot_row(z + (u * heads + hd) * f, attn + hd * f, f);
    }
  });
}

template <typename T>
void gat_forward_kernel(const int64_t* indptr, const int64_t* idx, int64_t nd, const T* el, const T* er, const T* z,
                        int64_t heads, int64_t f, T slope, T* alpha, T* out) {
  const int64_t ne = indptr[nd];
  const int64_t row = heads * f;
  at::parallel_for(0, nd, grain_for(nd, (ne + nd) * row), [&](int64_t begin, int64_t end) {
    const int64_t stop = indptr[end];
    for (int64_t v = begin; v < end; ++v) {
      T* o = out + v * row;
      std::fill(o, o + row, T(0));
      const int64_t s = indptr[v], t = indptr[v + 1];
      if (s == t) continue;
      // Edge softmax, per head, shifted by the max for stability.
      for (int64_t hd = 0; hd < heads; ++hd) {
        const T r = er[v * heads + hd];
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t k = s; k < t; ++k) {
          const T x = leaky(el[idx[k] * heads + hd] + r, slope);
          alpha[k * heads + hd] = x;
          m = std::max(m, x);
        }
        T sum = 0;
        for (int64_t k = s; k < t; ++k) {
          const T a = std::exp(alpha[k * heads + hd] - m);
          alpha[k * heads + hd] = a;
          sum += a;
        }
        const T inv = T(1) / sum;
        for (int64_t k = s; k < t; ++k) alpha[k * heads + hd] *= inv;
      }
      for (int64_t k = s; k < t; ++k) {
        if (k + kPrefetchDistance < stop) prefetch_row(z + idx[k + kPrefetchDistance] * row, row);
        const T* zu = z + idx[k] * row;
        for (int64_t hd = 0; hd < heads; ++hd) axpy_row(o + hd * f, zu + hd * f, alpha[k * heads + hd], f);
      }
    }
  });
}

struct GatBackward {
  Tensor grad_z, grad_attn_l, grad_attn_r;
};

// Pass one, over dst nodes: the gradient of each edge's pre-activation score
// (into gs, [E, H]) and of er. Pass two, over src nodes (the transpose): the
// gradients of el and z, z's including what flows back through el and er,
// and the attention vectors' (summed per thread, then over threads).
template <typename T>
void gat_backward_kernel(BlockGraph& g, const T* el, const T* er, const T* z, const T* attn_l, const T* attn_r,
                         const T* alpha, const T* grad, int64_t heads, int64_t f, T slope, T* gs, T* grad_er,
                         T* grad_z, T* grad_attn_l, T* grad_attn_r) {
  const int64_t nd = g.num_dst_nodes(), ns = g.num_src_nodes();
  const int64_t* indptr = g.indptr().data_ptr<int64_t>();
  const int64_t* idx = g.indices().data_ptr<int64_t>();
  const int64_t ne = indptr[nd], row = heads * f;
  at::parallel_for(0, nd, grain_for(nd, (ne + nd) * row), [&](int64_t begin, int64_t end) {
    std::vector<T> weighted(static_cast<size_t>(heads));
    for (int64_t v = begin; v < end; ++v) {
      const int64_t s = indptr[v], t = indptr[v + 1];
      const T* gv = grad + v * row;
      std::fill(weighted.begin(), weighted.end(), T(0));
      for (int64_t k = s; k < t; ++k) {
        const T* zu = z + idx[k] * row;
        for (int64_t hd = 0; hd < heads; ++hd) {
          const T ga = dot_row(zu + hd * f, gv + hd * f, f);  // d loss / d alpha
          gs[k * heads + hd] = ga;
          weighted[static_cast<size_t>(hd)] += alpha[k * heads + hd] * ga;
        }
      }
      for (int64_t hd = 0; hd < heads; ++hd) {
        const T r = er[v * heads + hd];
        T sum = 0;
        for (int64_t k = s; k < t; ++k) {
          const T ge = alpha[k * heads + hd] * (gs[k * heads + hd] - weighted[static_cast<size_t>(hd)]);
          const T x = el[idx[k] * heads + hd] + r;
          const T gx = x > 0 ? ge : ge * slope;
          gs[k * heads + hd] = gx;
          sum += gx;
        }
        grad_er[v * heads + hd] = sum;
      }
    }
  });
  const auto& rev = g.reverse();
  const int64_t* rp = rev.rev_indptr.data_ptr<int64_t>();
  const int64_t* rd = rev.rev_dst.data_ptr<int64_t>();
  const int64_t* re = rev.rev_eid.data_ptr<int64_t>();
  // One row of attention-vector gradients per thread.
  const int64_t threads = at::get_num_threads();
  std::vector<T> attn_acc(static_cast<size_t>(threads * 2 * row), T(0));
  at::parallel_for(0, ns, grain_for(ns, (ne + ns) * row), [&](int64_t begin, int64_t end) {
    const int64_t stop = rp[end];
    T* acc_l = attn_acc.data() + at::get_thread_num() * 2 * row;
    T* acc_r = acc_l + row;
    std::vector<T> gel(static_cast<size_t>(heads));
    for (int64_t u = begin; u < end; ++u) {
      T* o = grad_z + u * row;
      std::fill(o, o + row, T(0));
      std::fill(gel.begin(), gel.end(), T(0));
      for (int64_t r = rp[u]; r < rp[u + 1]; ++r) {
        if (r + kPrefetchDistance < stop) prefetch_row(grad + rd[r + kPrefetchDistance] * row, row);
        const int64_t k = re[r];
        const T* gv = grad + rd[r] * row;
        for (int64_t hd = 0; hd < heads; ++hd) {
          gel[static_cast<size_t>(hd)] += gs[k * heads + hd];
          axpy_row(o + hd * f, gv + hd * f, alpha[k * heads + hd], f);
        }
      }
      const T* zu = z + u * row;
      for (int64_t hd = 0; hd < heads; ++hd) {
        const T gl = gel[static_cast<size_t>(hd)];
        axpy_row(o + hd * f, attn_l + hd * f, gl, f);
        axpy_row(acc_l + hd * f, zu + hd * f, gl, f);
        if (u < nd) {
          const T gr = grad_er[u * heads + hd];
          axpy_row(o + hd * f, attn_r + hd * f, gr, f);
          axpy_row(acc_r + hd * f, zu + hd * f, gr, f);
        }
      }
    }
  });
  std::fill(grad_attn_l, grad_attn_l + row, T(0));
  std::fill(grad_attn_r, grad_attn_r + row, T(0));
  for (int64_t t = 0; t < threads; ++t) {
    add_row(grad_attn_l, attn_acc.data() + t * 2 * row, row);
    add_row(grad_attn_r, attn_acc.data() + t * 2 * row + row, row);
  }
}

void check_gat_shapes(const BlockGraph& g, const Tensor& z, const Tensor& attn_l, const Tensor& attn_r) {
  TORCH_CHECK(z.dim() == 3 && z.size(0) == g.num_src_nodes(), "gat_aggregate: z must be [num_src=",
              g.num_src_nodes(), ", heads, F], got ", z.sizes());
  TORCH_CHECK(g.num_dst_nodes() <= g.num_src_nodes(), "gat_aggregate: the dst nodes' attention reads z's first "
              "num_dst rows as theirs, so the block needs at least as many src nodes as dst nodes, but it has ",
              g.num_src_nodes(), " src and ", g.num_dst_nodes(), " dst nodes");
  for (const Tensor* a : {&attn_l, &attn_r}) {
    TORCH_CHECK(a->numel() == z.size(1) * z.size(2), "gat_aggregate: attention vectors must hold heads x F = ",
                z.size(1), " x ", z.size(2), " values, got ", a->sizes());
    TORCH_CHECK(a->scalar_type() == z.scalar_type(), "gat_aggregate: z and the attention vectors must have one dtype");
  }
}

class GatAggregateFunction : public torch::autograd::Function<GatAggregateFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& z_in, const Tensor& attn_l_in, const Tensor& attn_r_in,
                        BlockGraphPtr g, double slope) {
    const Tensor z = z_in.contiguous();
    const int64_t heads = z.size(1), f = z.size(2);
    const Tensor attn_l = attn_l_in.reshape({heads, f}).contiguous();
    const Tensor attn_r = attn_r_in.reshape({heads, f}).contiguous();
    const int64_t ns = g->num_src_nodes(), nd = g->num_dst_nodes();
    Tensor out = torch::empty({nd, heads, f}, z.options());
    Tensor alpha = torch::empty({g->num_edges(), heads}, z.options());
    Tensor el = torch::empty({ns, heads}, z.options()), er = torch::empty({nd, heads}, z.options());
    AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "dgld::gat_aggregate", [&] {
      attention_scores<scalar_t>(z.data_ptr<scalar_t>(), attn_l.data_ptr<scalar_t>(), ns, heads, f,
                                 el.data_ptr<scalar_t>());
      attention_scores<scalar_t>(z.data_ptr<scalar_t>(), attn_r.data_ptr<scalar_t>(), nd, heads, f,
                                 er.data_ptr<scalar_t>());
      gat_forward_kernel<scalar_t>(g->indptr().data_ptr<int64_t>(), g->indices().data_ptr<int64_t>(), nd,
                                   el.data_ptr<scalar_t>(), er.data_ptr<scalar_t>(), z.data_ptr<scalar_t>(), heads,
                                   f, static_cast<scalar_t>(slope), alpha.data_ptr<scalar_t>(),
                                   out.data_ptr<scalar_t>());
    });
    ctx->saved_data["block"] = c10::IValue::make_capsule(g);
    ctx->saved_data["slope"] = slope;
    ctx->saved_data["attn_l_shape"] = attn_l_in.sizes().vec();
    ctx->saved_data["attn_r_shape"] = attn_r_in.sizes().vec();
    ctx->save_for_backward({z, attn_l, attn_r, el, er, alpha});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &z = saved[0], &attn_l = saved[1], &attn_r = saved[2], &el = saved[3], &er = saved[4],
                 &alpha = saved[5];
    const Tensor grad = grads[0].contiguous();
    const double slope = ctx->saved_data["slope"].toDouble();
    BlockGraph& g = block_of(ctx);
    const int64_t heads = z.size(1), f = z.size(2);
    Tensor grad_z = torch::empty_like(z), grad_er = torch::empty_like(er);
    Tensor grad_attn_l = torch::empty_like(attn_l), grad_attn_r = torch::empty_like(attn_r);
    Tensor gs = torch::empty({g.num_edges(), heads}, z.options());
    AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "dgld::gat_aggregate_backward", [&] {
      gat_backward_kernel<scalar_t>(g, el.data_ptr<scalar_t>(), er.data_ptr<scalar_t>(), z.data_ptr<scalar_t>(),
                                    attn_l.data_ptr<scalar_t>(), attn_r.data_ptr<scalar_t>(),
                                    alpha.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), heads, f,
                                    static_cast<scalar_t>(slope), gs.data_ptr<scalar_t>(),
                                    grad_er.data_ptr<scalar_t>(), grad_z.data_ptr<scalar_t>(),
                                    grad_attn_l.data_ptr<scalar_t>(), grad_attn_r.data_ptr<scalar_t>());
    });
    return {grad_z, grad_attn_l.view(ctx->saved_data["attn_l_shape"].toIntVector()),
            grad_attn_r.view(ctx->saved_data["attn_r_shape"].toIntVector()), Tensor(), Tensor()};
  }
};

// Per-dst, per-head maximum of edge values `e` ([E, H]), for the reference
// edge softmax: a plain loop (scatter_reduce is beta in LibTorch 1.13).
Tensor segment_max(BlockGraph& g, const Tensor& e) {
  const auto ec = e.contiguous();
  const int64_t h = ec.size(1);
  auto out = torch::zeros({g.num_dst_nodes(), h}, ec.options());
  const int64_t* indptr = g.indptr().data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(ec.scalar_type(), "dgld::segment_max", [&] {
    scalar_t* o = out.data_ptr<scalar_t>();
    const scalar_t* x = ec.data_ptr<scalar_t>();
    for (int64_t v = 0; v < g.num_dst_nodes(); ++v) {
      for (int64_t k = indptr[v]; k < indptr[v + 1]; ++k) {
        for (int64_t j = 0; j < h; ++j) o[v * h + j] = k == indptr[v] ? x[k * h + j] : std::max(o[v * h + j], x[k * h + j]);
      }
    }
  });
  return out;
}

void check_rows(const BlockGraph& g, const Tensor& h, const char* what) {
  TORCH_CHECK(h.dim() >= 1 && h.size(0) == g.num_src_nodes(), what, ": h must have one row per src node (",
              g.num_src_nodes(), "), got ", h.sizes());
}

// The self loop adds dst v's own row, read as src row v: it needs the
// block's first num_dst src nodes to be its dst nodes.
void check_self_loop(const BlockGraph& g, bool self_loop, const char* what) {
  TORCH_CHECK(!self_loop || g.num_dst_nodes() <= g.num_src_nodes(), what,
              ": self_loop reads each dst node's own row as a src row, so the block needs at least as many src "
              "nodes as dst nodes, but it has ", g.num_src_nodes(), " src and ", g.num_dst_nodes(), " dst nodes");
}

}  // namespace

Tensor copy_u_reduce(const BlockGraphPtr& gp, const Tensor& h, Reduce reduce, bool self_loop) {
  BlockGraph& g = *gp;
  check_rows(g, h, "copy_u_reduce");
  check_self_loop(g, self_loop, "copy_u_reduce");
  return CopyUReduceFunction::apply(h, gp, static_cast<int64_t>(reduce), self_loop);
}

std::pair<Tensor, Tensor> copy_u_reduce_with_dst(const BlockGraphPtr& gp, const Tensor& h, Reduce reduce) {
  check_rows(*gp, h, "copy_u_reduce_with_dst");
  TORCH_CHECK(gp->num_dst_nodes() <= h.size(0), "copy_u_reduce_with_dst: the dst nodes are the first src nodes, so "
              "the block needs at least as many src nodes as dst nodes, but it has ", gp->num_src_nodes(), " src and ",
              gp->num_dst_nodes(), " dst nodes");
  auto out = CopyUReduceWithDstFunction::apply(h, gp, static_cast<int64_t>(reduce));
  return {out[0], out[1]};
}

Tensor copy_u_reduce_reference(const BlockGraphPtr& gp, const Tensor& h, Reduce reduce, bool self_loop) {
  BlockGraph& g = *gp;
  check_rows(g, h, "copy_u_reduce_reference");
  check_self_loop(g, self_loop, "copy_u_reduce_reference");
  Tensor src = g.indices(), dst = g.edge_dst();
  if (self_loop) {
    const auto self = torch::arange(g.num_dst_nodes(), torch::kInt64);
    src = torch::cat({src, self});
    dst = torch::cat({dst, self});
  }
  auto out = torch::zeros(shape_with_rows(h, g.num_dst_nodes()), h.options());
  if (src.size(0) > 0) out = out.index_add_(0, dst, h.index_select(0, src));
  if (reduce == Reduce::sum) return out;
  std::vector<int64_t> shape(static_cast<size_t>(h.dim()), 1);
  shape[0] = g.num_dst_nodes();
  const auto n = g.in_degrees() + (self_loop ? 1 : 0);
  return out / n.clamp_min(1).to(h.scalar_type()).view(shape);
}

Tensor gat_aggregate(const BlockGraphPtr& gp, const Tensor& z, const Tensor& attn_l, const Tensor& attn_r,
                     double negative_slope) {
  check_gat_shapes(*gp, z, attn_l, attn_r);
  return GatAggregateFunction::apply(z, attn_l, attn_r, gp, negative_slope);
}

Tensor gat_aggregate_reference(const BlockGraphPtr& gp, const Tensor& z, const Tensor& attn_l, const Tensor& attn_r,
                               double negative_slope) {
  BlockGraph& g = *gp;
  check_gat_shapes(g, z, attn_l, attn_r);
  const int64_t heads = z.size(1), f = z.size(2);
  const auto el = (z * attn_l.view({1, heads, f})).sum(-1);                              // [Ns, H]
  const auto er = (z.narrow(0, 0, g.num_dst_nodes()) * attn_r.view({1, heads, f})).sum(-1);  // [Nd, H]
  auto out = torch::zeros({g.num_dst_nodes(), heads, f}, z.options());
  if (g.num_edges() == 0) return out;
  const Tensor& src = g.indices();
  const Tensor& dst = g.edge_dst();
  const auto e = torch::leaky_relu(el.index_select(0, src) + er.index_select(0, dst), negative_slope);  // [E, H]
  // Shifted by the per-dst max for stability (no gradient through the shift:
  // it does not change the result).
  const auto emax = segment_max(g, e.detach());
  const auto ex = torch::exp(e - emax.index_select(0, dst));
  const auto denom = torch::zeros({g.num_dst_nodes(), heads}, e.options()).index_add_(0, dst, ex);
  const auto alpha = ex / denom.index_select(0, dst);
  return out.index_add_(0, dst, z.index_select(0, src) * alpha.unsqueeze(-1));
}

namespace {
// What one aggregated element (a row element read from a random src row and
// added) costs, in the multiply-adds of a matrix product; measured with
// scripts/bench/kernels.sh (docs/performance.md).
constexpr double kAggregateElementCost = 4.0;
}  // namespace

namespace {
std::atomic<bool> g_reference_kernels{false};
}  // namespace

void set_reference_kernels(bool on) { g_reference_kernels.store(on, std::memory_order_relaxed); }
bool reference_kernels() { return g_reference_kernels.load(std::memory_order_relaxed); }

bool project_before_aggregating(const BlockGraph& b, int64_t in_dim, int64_t out_dim, bool input_needs_grad,
                                bool self_loop) {
  return project_before_aggregating(b.num_src_nodes(), b.num_dst_nodes(), b.num_edges(), in_dim, out_dim,
                                    input_needs_grad, self_loop, torch::GradMode::is_enabled());
}

bool project_before_aggregating(int64_t num_src, int64_t num_dst, int64_t num_edges, int64_t in_dim, int64_t out_dim,
                                bool input_needs_grad, bool self_loop, bool training) {
  const double e = static_cast<double>(num_edges + (self_loop ? num_dst : 0));
  const double ns = static_cast<double>(num_src), nd = static_cast<double>(num_dst);
  const double in = static_cast<double>(in_dim), out = static_cast<double>(out_dim);
  // Passes over the product: forward, the weight's gradient, the input's gradient.
  const double gemm_passes = training ? (input_needs_grad ? 3.0 : 2.0) : 1.0;
  // Passes over the aggregation: forward, and backward when its input needs a gradient.
  const double project = ns * in * out * gemm_passes + e * out * kAggregateElementCost * (training ? 2.0 : 1.0);
  const double aggregate =
      nd * in * out * gemm_passes + e * in * kAggregateElementCost * (training && input_needs_grad ? 2.0 : 1.0);
  return project < aggregate;
}

}  // namespace dgld::ops
