#include "common/ops/gspmm_kernels.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

namespace dgld::ops::detail {
namespace {

using torch::Tensor;

// How far ahead the forward pass prefetches the operand rows it gathers.
constexpr int64_t kPrefetchAhead = 8;

// Rows per parallel task: about 64 k element operations each.
int64_t rows_per_task(int64_t rows, int64_t elements) {
  if (rows <= 0) return 1;
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, elements / rows));
}

// The sum of term(j) for j < n in kLanes partial sums: floating-point adds
// do not reassociate by themselves, so one running sum would not vectorize.
constexpr int64_t kLanes = 8;

template <typename T, typename Term>
inline T lane_sum(int64_t n, const Term& term) {
  T part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) part[l] += term(j + l);
  }
  T s = 0;
  for (; j < n; ++j) s += term(j);
  for (int64_t l = 0; l < kLanes; ++l) s += part[l];
  return s;
}

// ------------------------------------------------ elementwise messages

// Each: the message of two elements and its partial derivatives.
struct CopyFn {
  template <typename T> static T f(T a, T) { return a; }
  template <typename T> static T da(T, T) { return T(1); }
  template <typename T> static T db(T, T) { return T(0); }
};
struct AddFn {
  template <typename T> static T f(T a, T b) { return a + b; }
  template <typename T> static T da(T, T) { return T(1); }
  template <typename T> static T db(T, T) { return T(1); }
};
struct SubFn {
  template <typename T> static T f(T a, T b) { return a - b; }
  template <typename T> static T da(T, T) { return T(1); }
  template <typename T> static T db(T, T) { return T(-1); }
};
struct MulFn {
  template <typename T> static T f(T a, T b) { return a * b; }
  template <typename T> static T da(T, T b) { return b; }
  template <typename T> static T db(T a, T) { return a; }
};
struct DivFn {
  template <typename T> static T f(T a, T b) { return a / b; }
  template <typename T> static T da(T, T b) { return T(1) / b; }
  template <typename T> static T db(T a, T b) { return -a / (b * b); }
};

// Where output element i reads each operand (Bcast::Mode), as types so that
// the loops over contiguous rows vectorize.
struct SameIdx {
  explicit SameIdx(const Bcast&) {}
  int64_t l(int64_t i) const { return i; }
  int64_t r(int64_t i) const { return i; }
};
struct LhsScalarIdx {
  explicit LhsScalarIdx(const Bcast&) {}
  int64_t l(int64_t) const { return 0; }
  int64_t r(int64_t i) const { return i; }
};
struct RhsScalarIdx {
  explicit RhsScalarIdx(const Bcast&) {}
  int64_t l(int64_t i) const { return i; }
  int64_t r(int64_t) const { return 0; }
};
struct TableIdx {
  explicit TableIdx(const Bcast& b) : lo(b.lhs_off.data()), ro(b.rhs_off.data()) {}
  int64_t l(int64_t i) const { return lo[i]; }
  int64_t r(int64_t i) const { return ro[i]; }
  const int64_t *lo, *ro;
};
struct DotSameIdx {  // dot, equal shapes: product i reads elements i*k ..
  explicit DotSameIdx(const Bcast& b) : k(b.k) {}
  int64_t l(int64_t i) const { return i * k; }
  int64_t r(int64_t i) const { return i * k; }
  int64_t k;
};

// m[0 .. n) = the message of one edge, from its operand rows a and b (or,
// the accumulating variant, m[0 .. n) += it).
template <typename T>
using MessageFn = void (*)(const T* a, const T* b, const Bcast& bc, T* m);
// acc (the lhs or rhs row the gradient goes to) += s * (g . d message / d that row).
template <typename T>
using GradFn = void (*)(const T* g, T s, const T* a, const T* b, const Bcast& bc, T* acc);

template <typename T, typename Op, typename Idx, bool Add>
void message_row(const T* __restrict a, const T* __restrict b, const Bcast& bc, T* __restrict m) {
  const Idx ix(bc);
  const int64_t n = bc.n;
  for (int64_t i = 0; i < n; ++i) {
    const T x = Op::f(a[ix.l(i)], b[ix.r(i)]);
    if constexpr (Add) {
      m[i] += x;
    } else {
      m[i] = x;
    }
  }
}

template <typename T, typename Idx, bool Add>
void dot_message_row(const T* __restrict a, const T* __restrict b, const Bcast& bc, T* __restrict m) {
  const Idx ix(bc);
  const int64_t n = bc.n, k = bc.k;
  for (int64_t i = 0; i < n; ++i) {
    const T* x = a + ix.l(i);
    const T* y = b + ix.r(i);
    const T d = lane_sum<T>(k, [&](int64_t j) { return x[j] * y[j]; });
    if constexpr (Add) {
      m[i] += d;
    } else {
      m[i] = d;
    }
  }
}

template <typename T, typename Op, typename Idx, bool Lhs>
void grad_row(const T* __restrict g, T s, const T* __restrict a, const T* __restrict b, const Bcast& bc,
              T* __restrict acc) {
  const Idx ix(bc);
  const int64_t n = bc.n;
  auto d = [](T x, T y) { return Lhs ? Op::template da<T>(x, y) : Op::template db<T>(x, y); };
  if constexpr (std::is_same_v<Idx, std::conditional_t<Lhs, LhsScalarIdx, RhsScalarIdx>>) {
    // Every output element reads the one element: a reduction.
    acc[0] += s * lane_sum<T>(n, [&](int64_t i) { return g[i] * d(a[ix.l(i)], b[ix.r(i)]); });
  } else {
    for (int64_t i = 0; i < n; ++i) acc[Lhs ? ix.l(i) : ix.r(i)] += s * g[i] * d(a[ix.l(i)], b[ix.r(i)]);
  }
}

template <typename T, typename Idx, bool Lhs>
void dot_grad_row(const T* __restrict g, T s, const T* __restrict a, const T* __restrict b, const Bcast& bc,
                  T* __restrict acc) {
  const Idx ix(bc);
  const int64_t n = bc.n, k = bc.k;
  for (int64_t i = 0; i < n; ++i) {
    const T gi = s * g[i];
    const T* other = Lhs ? b + ix.r(i) : a + ix.l(i);
    T* o = acc + (Lhs ? ix.l(i) : ix.r(i));
    for (int64_t j = 0; j < k; ++j) o[j] += gi * other[j];
  }
}

template <typename T, typename Op, bool Add>
MessageFn<T> message_for_mode(Bcast::Mode mode) {
  switch (mode) {
    case Bcast::Mode::same: return &message_row<T, Op, SameIdx, Add>;
    case Bcast::Mode::lhs_scalar: return &message_row<T, Op, LhsScalarIdx, Add>;
    case Bcast::Mode::rhs_scalar: return &message_row<T, Op, RhsScalarIdx, Add>;
    case Bcast::Mode::table: break;
  }
  return &message_row<T, Op, TableIdx, Add>;
}

// nullptr for copy_lhs: the message is the lhs row itself. Add: the variant
// that adds the message to m instead of writing it.
template <typename T, bool Add = false>
MessageFn<T> message_fn(BinaryOp op, Bcast::Mode mode) {
  switch (op) {
    case BinaryOp::add: return message_for_mode<T, AddFn, Add>(mode);
    case BinaryOp::sub: return message_for_mode<T, SubFn, Add>(mode);
    case BinaryOp::mul: return message_for_mode<T, MulFn, Add>(mode);
    case BinaryOp::div: return message_for_mode<T, DivFn, Add>(mode);
    case BinaryOp::dot:
      return mode == Bcast::Mode::same ? &dot_message_row<T, DotSameIdx, Add> : &dot_message_row<T, TableIdx, Add>;
    case BinaryOp::copy_lhs:
    case BinaryOp::copy_rhs: break;
  }
  return nullptr;
}

template <typename T, typename Op, bool Lhs>
GradFn<T> grad_for_mode(Bcast::Mode mode) {
  switch (mode) {
    case Bcast::Mode::same: return &grad_row<T, Op, SameIdx, Lhs>;
    case Bcast::Mode::lhs_scalar: return &grad_row<T, Op, LhsScalarIdx, Lhs>;
    case Bcast::Mode::rhs_scalar: return &grad_row<T, Op, RhsScalarIdx, Lhs>;
    case Bcast::Mode::table: break;
  }
  return &grad_row<T, Op, TableIdx, Lhs>;
}

template <typename T, bool Lhs>
GradFn<T> grad_fn_side(BinaryOp op, Bcast::Mode mode) {
  switch (op) {
    case BinaryOp::add: return grad_for_mode<T, AddFn, Lhs>(mode);
    case BinaryOp::sub: return grad_for_mode<T, SubFn, Lhs>(mode);
    case BinaryOp::mul: return grad_for_mode<T, MulFn, Lhs>(mode);
    case BinaryOp::div: return grad_for_mode<T, DivFn, Lhs>(mode);
    case BinaryOp::dot:
      return mode == Bcast::Mode::same ? &dot_grad_row<T, DotSameIdx, Lhs> : &dot_grad_row<T, TableIdx, Lhs>;
    case BinaryOp::copy_lhs:
    case BinaryOp::copy_rhs: break;
  }
  return &grad_row<T, CopyFn, SameIdx, Lhs>;
}

template <typename T>
GradFn<T> grad_fn(BinaryOp op, Bcast::Mode mode, bool lhs) {
  return lhs ? grad_fn_side<T, true>(op, mode) : grad_fn_side<T, false>(op, mode);
}

// ------------------------------------------------ walking the graph

// The CSR as pointers; order: the edge id of each position, null for the identity.
struct Csr {
  explicit Csr(BlockGraph& g)
      : order_t(g.edge_order()),
        indptr(g.indptr().data_ptr<int64_t>()),
        src(g.indices().data_ptr<int64_t>()),
        order(order_t.defined() ? order_t.data_ptr<int64_t>() : nullptr),
        nd(g.num_dst_nodes()),
        ns(g.num_src_nodes()),
        ne(g.num_edges()) {}
  int64_t eid(int64_t p) const { return order ? order[p] : p; }

  Tensor order_t;  // keeps `order` alive
  const int64_t *indptr, *src, *order;
  int64_t nd, ns, ne;
};

// One operand's rows.
template <typename T>
struct Rows {
  Rows(const Tensor& t, Target target, int64_t len) : data(t.data_ptr<T>()), len(len), target(target) {}
  const T* at(int64_t u, int64_t v, int64_t eid) const {
    return data + (target == Target::u ? u : target == Target::v ? v : eid) * len;
  }
  // The row edge p will read, if it is a random one (u, or e under an order).
  void prefetch(const Csr& c, int64_t p) const {
    const T* row = target == Target::u ? data + c.src[p] * len
                   : target == Target::e && c.order ? data + c.order[p] * len
                                                    : nullptr;
    if (row == nullptr) return;
    const char* bytes = reinterpret_cast<const char*>(row);
    for (int64_t off = 0; off < len * static_cast<int64_t>(sizeof(T)); off += 64) __builtin_prefetch(bytes + off);
  }
  const T* data;
  int64_t len;
  Target target;
};

template <typename T, bool Max>
inline void keep_extreme(T* __restrict o, int64_t* __restrict arg, const T* __restrict m, int64_t p, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    if (Max ? m[j] > o[j] : m[j] < o[j]) {
      o[j] = m[j];
      arg[j] = p;
    }
  }
}

// msg writes an edge's message, add_msg adds it: sum and mean accumulate each
// message straight into the output row; max and min compare it from a buffer.
template <typename T>
void spmm_rows(const Csr& c, const Rows<T>& a, const Rows<T>& b, const Bcast& bc, MessageFn<T> msg,
               MessageFn<T> add_msg, SpmmReduce reduce, T* out, int64_t* arg) {
  const int64_t n = bc.n;
  const bool summing = reduce == SpmmReduce::sum || reduce == SpmmReduce::mean;
  at::parallel_for(0, c.nd, rows_per_task(c.nd, (c.ne + c.nd) * n * bc.k), [&](int64_t begin, int64_t end) {
    std::vector<T> buf(static_cast<size_t>(n));
    const int64_t stop = c.indptr[end];
    for (int64_t v = begin; v < end; ++v) {
      T* o = out + v * n;
      int64_t* ag = arg ? arg + v * n : nullptr;
      const int64_t s = c.indptr[v], t = c.indptr[v + 1];
      if (s == t) {
        std::fill(o, o + n, T(0));
        if (ag) std::fill(ag, ag + n, int64_t{-1});
        continue;
      }
      for (int64_t p = s; p < t; ++p) {
        if (p + kPrefetchAhead < stop) a.prefetch(c, p + kPrefetchAhead);
        const int64_t u = c.src[p], eid = c.eid(p);
        const T* m = a.at(u, v, eid);
        if (msg) {
          if (p + kPrefetchAhead < stop) b.prefetch(c, p + kPrefetchAhead);
          if (summing) {
            (p == s ? msg : add_msg)(m, b.at(u, v, eid), bc, o);
            continue;
          }
          msg(m, b.at(u, v, eid), bc, buf.data());
          m = buf.data();
        }
        if (p == s) {
          std::copy(m, m + n, o);
          if (ag) std::fill(ag, ag + n, p);
        } else if (reduce == SpmmReduce::max) {
          keep_extreme<T, true>(o, ag, m, p, n);
        } else if (reduce == SpmmReduce::min) {
          keep_extreme<T, false>(o, ag, m, p, n);
        } else {
          for (int64_t j = 0; j < n; ++j) o[j] += m[j];
        }
      }
      if (reduce == SpmmReduce::mean && t - s > 1) {
        const T scale = T(1) / static_cast<T>(t - s);
        for (int64_t j = 0; j < n; ++j) o[j] *= scale;
      }
    }
  });
}

template <typename T>
void sddmm_rows(const Csr& c, const Rows<T>& a, const Rows<T>& b, const Bcast& bc, MessageFn<T> msg, T* out) {
  const int64_t n = bc.n;
  at::parallel_for(0, c.nd, rows_per_task(c.nd, (c.ne + c.nd) * n * bc.k), [&](int64_t begin, int64_t end) {
    for (int64_t v = begin; v < end; ++v) {
      for (int64_t p = c.indptr[v]; p < c.indptr[v + 1]; ++p) {
        const int64_t u = c.src[p], eid = c.eid(p);
        const T* x = a.at(u, v, eid);
        if (msg) {
          msg(x, b.at(u, v, eid), bc, out + eid * n);
        } else {
          std::copy(x, x + n, out + eid * n);
        }
      }
    }
  });
}

// The gradient flowing into one edge's message.
template <typename T>
struct UpstreamRows {
  // Edge p (into dst v, id eid): its gradient row and the scale s it is
  // multiplied by; nullptr when the edge gets none (max / min lost).
  const T* row(int64_t v, int64_t p, int64_t eid, T* buf, T& s) const {
    s = T(1);
    if (per_edge) return g + eid * n;
    const T* gv = g + v * n;
    if (reduce == SpmmReduce::sum) return gv;
    if (reduce == SpmmReduce::mean) {
      s = T(1) / static_cast<T>(indptr[v + 1] - indptr[v]);
      return gv;
    }
    const int64_t* av = arg + v * n;
    bool won = false;
    for (int64_t i = 0; i < n; ++i) {
      const bool hit = av[i] == p;
      buf[i] = hit ? gv[i] : T(0);
      won = won || hit;
    }
    return won ? buf : nullptr;
  }
  const T* g;
  int64_t n;
  bool per_edge;
  SpmmReduce reduce;
  const int64_t* arg;
  const int64_t* indptr;
};

// grad ([rows of `target`, len]) = the gradient of the operand `fn` differentiates.
template <typename T>
void grad_rows(BlockGraph& g, const Csr& c, const Rows<T>& a, const Rows<T>& b, const UpstreamRows<T>& up,
               const Bcast& bc, GradFn<T> fn, Target target, int64_t len, T* grad) {
  const int64_t n = bc.n;
  auto add_edge = [&](int64_t u, int64_t v, int64_t p, T* acc, T* buf) {
    const int64_t eid = c.eid(p);
    T s;
    const T* gr = up.row(v, p, eid, buf, s);
    if (gr) fn(gr, s, a.at(u, v, eid), b.at(u, v, eid), bc, acc);
  };
  const int64_t work = (c.ne + std::max(c.ns, c.nd)) * n * bc.k;
  if (target == Target::u) {  // the transpose: every src row written by one thread
    const auto& rev = g.reverse();
    const int64_t* rp = rev.rev_indptr.data_ptr<int64_t>();
    const int64_t* rd = rev.rev_dst.data_ptr<int64_t>();
    const int64_t* re = rev.rev_eid.data_ptr<int64_t>();
    at::parallel_for(0, c.ns, rows_per_task(c.ns, work), [&](int64_t begin, int64_t end) {
      std::vector<T> buf(static_cast<size_t>(n));
      for (int64_t u = begin; u < end; ++u) {
        T* acc = grad + u * len;
        std::fill(acc, acc + len, T(0));
        for (int64_t r = rp[u]; r < rp[u + 1]; ++r) add_edge(u, rd[r], re[r], acc, buf.data());
      }
    });
    return;
  }
  at::parallel_for(0, c.nd, rows_per_task(c.nd, work), [&](int64_t begin, int64_t end) {
    std::vector<T> buf(static_cast<size_t>(n));
    for (int64_t v = begin; v < end; ++v) {
      if (target == Target::v) {
        T* acc = grad + v * len;
        std::fill(acc, acc + len, T(0));
        for (int64_t p = c.indptr[v]; p < c.indptr[v + 1]; ++p) add_edge(c.src[p], v, p, acc, buf.data());
        continue;
      }
      for (int64_t p = c.indptr[v]; p < c.indptr[v + 1]; ++p) {  // e: each edge's own row
        T* acc = grad + c.eid(p) * len;
        std::fill(acc, acc + len, T(0));
        add_edge(c.src[p], v, p, acc, buf.data());
      }
    }
  });
}

// max / min of a copied operand (copy_lhs, rows the same width as the
// output): each output element came from one edge (arg), so its gradient goes
// to that edge's row and element alone. Scattered straight from arg, instead
// of walking every edge and comparing its position with the dst's arg row.
// Threads take column ranges, so no two write one element.
template <typename T>
void scatter_extreme_grad(const Csr& c, const T* up, const int64_t* arg, int64_t n, Target target, T* grad) {
  constexpr int64_t kColumns = 16;  // a cache line of floats per thread and row
  const int64_t chunks = (n + kColumns - 1) / kColumns;
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    const int64_t j0 = begin * kColumns, j1 = std::min(n, end * kColumns);
    for (int64_t v = 0; v < c.nd; ++v) {
      const int64_t* av = arg + v * n;
      const T* gv = up + v * n;
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t p = av[j];
        if (p < 0) continue;  // no in-edges
        const int64_t row = target == Target::u ? c.src[p] : target == Target::e ? c.eid(p) : v;
        grad[row * n + j] += gv[j];
      }
    }
  });
}

}  // namespace

void spmm_forward(BlockGraph& g, const Operands& x, const Bcast& bc, SpmmReduce reduce, Tensor& out, Tensor& arg) {
  const Csr c(g);
  AT_DISPATCH_FLOATING_TYPES(x.lhs.scalar_type(), "dgld::gspmm", [&] {
    spmm_rows<scalar_t>(c, Rows<scalar_t>(x.lhs, x.lhs_target, bc.lhs_len),
                        Rows<scalar_t>(x.rhs, x.rhs_target, bc.rhs_len), bc, message_fn<scalar_t>(x.op, bc.mode),
                        message_fn<scalar_t, true>(x.op, bc.mode), reduce, out.data_ptr<scalar_t>(),
                        arg.defined() ? arg.data_ptr<int64_t>() : nullptr);
  });
}

void sddmm_forward(BlockGraph& g, const Operands& x, const Bcast& bc, Tensor& out) {
  const Csr c(g);
  AT_DISPATCH_FLOATING_TYPES(x.lhs.scalar_type(), "dgld::gsddmm", [&] {
    sddmm_rows<scalar_t>(c, Rows<scalar_t>(x.lhs, x.lhs_target, bc.lhs_len),
                         Rows<scalar_t>(x.rhs, x.rhs_target, bc.rhs_len), bc, message_fn<scalar_t>(x.op, bc.mode),
                         out.data_ptr<scalar_t>());
  });
}

Tensor operand_grad(BlockGraph& g, const Operands& x, const Bcast& bc, const Upstream& up, bool lhs_side) {
  const Tensor& self = lhs_side ? x.lhs : x.rhs;
  const Csr c(g);
  const bool extreme = up.reduce == SpmmReduce::max || up.reduce == SpmmReduce::min;
  if (lhs_side && x.op == BinaryOp::copy_lhs && !up.per_edge && extreme && bc.mode == Bcast::Mode::same &&
      bc.k == 1 && bc.lhs_len == bc.n) {
    Tensor grad = torch::zeros(self.sizes(), self.options());
    AT_DISPATCH_FLOATING_TYPES(self.scalar_type(), "dgld::gspmm_backward", [&] {
      scatter_extreme_grad<scalar_t>(c, up.grad.data_ptr<scalar_t>(), up.arg.data_ptr<int64_t>(), bc.n,
                                     x.lhs_target, grad.data_ptr<scalar_t>());
    });
    return grad;
  }
  Tensor grad = torch::empty(self.sizes(), self.options());
  AT_DISPATCH_FLOATING_TYPES(self.scalar_type(), "dgld::gspmm_backward", [&] {
    const UpstreamRows<scalar_t> rows{up.grad.data_ptr<scalar_t>(), bc.n, up.per_edge, up.reduce,
                                      up.arg.defined() ? up.arg.data_ptr<int64_t>() : nullptr, c.indptr};
    grad_rows<scalar_t>(g, c, Rows<scalar_t>(x.lhs, x.lhs_target, bc.lhs_len),
                        Rows<scalar_t>(x.rhs, x.rhs_target, bc.rhs_len), rows, bc,
                        grad_fn<scalar_t>(x.op, bc.mode, lhs_side), lhs_side ? x.lhs_target : x.rhs_target,
                        lhs_side ? bc.lhs_len : bc.rhs_len, grad.data_ptr<scalar_t>());
  });
  return grad;
}

}  // namespace dgld::ops::detail
