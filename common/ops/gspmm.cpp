#include "common/ops/gspmm.h"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <torch/autograd.h>

#include "common/ops/gspmm_kernels.h"

namespace dgld::ops {

using detail::Bcast;
using detail::Operands;
using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

constexpr std::array<std::pair<const char*, BinaryOp>, 7> kOps{{{"copy_lhs", BinaryOp::copy_lhs},
                                                                {"copy_rhs", BinaryOp::copy_rhs},
                                                                {"add", BinaryOp::add},
                                                                {"sub", BinaryOp::sub},
                                                                {"mul", BinaryOp::mul},
                                                                {"div", BinaryOp::div},
                                                                {"dot", BinaryOp::dot}}};
constexpr std::array<std::pair<const char*, SpmmReduce>, 4> kReducers{
    {{"sum", SpmmReduce::sum}, {"mean", SpmmReduce::mean}, {"max", SpmmReduce::max}, {"min", SpmmReduce::min}}};
constexpr std::array<std::pair<const char*, Target>, 3> kTargets{
    {{"u", Target::u}, {"v", Target::v}, {"e", Target::e}}};

template <typename E, size_t N>
Result<E> lookup(const std::array<std::pair<const char*, E>, N>& table, std::string_view name, std::string_view what) {
  std::string valid;
  for (const auto& [n, e] : table) {
    if (name == n) return e;
    valid += fmt::format("{}{}", valid.empty() ? "" : ", ", n);
  }
  return invalid_argument(fmt::format("unknown {} '{}' (valid: {})", what, name, valid));
}

template <typename E, size_t N>
const char* name_in(const std::array<std::pair<const char*, E>, N>& table, E e) {
  for (const auto& [n, v] : table) {
    if (v == e) return n;
  }
  return "?";
}

}  // namespace

Result<BinaryOp> parse_binary_op(std::string_view name) { return lookup(kOps, name, "op"); }
Result<SpmmReduce> parse_spmm_reduce(std::string_view name) { return lookup(kReducers, name, "reduce"); }
Result<Target> parse_target(std::string_view name, std::string_view what) { return lookup(kTargets, name, what); }
const char* binary_op_name(BinaryOp op) { return name_in(kOps, op); }
const char* spmm_reduce_name(SpmmReduce reduce) { return name_in(kReducers, reduce); }
const char* target_name(Target target) { return name_in(kTargets, target); }

namespace {

std::string shape_string(c10::IntArrayRef s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

int64_t product(c10::IntArrayRef s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// `s` with leading 1s up to `dims` dimensions.
std::vector<int64_t> padded(c10::IntArrayRef s, size_t dims) {
  std::vector<int64_t> p(dims - s.size(), 1);
  p.insert(p.end(), s.begin(), s.end());
  return p;
}

// Per output element (over `out`, row-major), its first element in a row of
// padded shape `in` (dot: each element spans k).
std::vector<int64_t> offsets(const std::vector<int64_t>& in, const std::vector<int64_t>& out, int64_t k) {
  const size_t d = out.size();
  std::vector<int64_t> stride(d);
  int64_t s = k;
  for (size_t i = d; i-- > 0;) {
    stride[i] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  const int64_t n = product(out);
  std::vector<int64_t> off(static_cast<size_t>(n), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t rest = e, o = 0;
    for (size_t i = d; i-- > 0;) {
      o += (rest % out[i]) * stride[i];
      rest /= out[i];
    }
    off[static_cast<size_t>(e)] = o;
  }
  return off;
}

// How op's messages read rows of feature shapes ls and rs (DGL's broadcasting).
Result<Bcast> make_bcast(BinaryOp op, c10::IntArrayRef ls, c10::IntArrayRef rs) {
  Bcast b;
  b.lhs_len = product(ls);
  b.rhs_len = product(rs);
  if (op == BinaryOp::copy_lhs) {
    b.n = b.lhs_len;
    b.out_shape = ls.vec();
    return b;
  }
  c10::IntArrayRef l = ls, r = rs;
  if (op == BinaryOp::dot) {
    if (ls.empty() || rs.empty() || ls.back() != rs.back()) {
      return invalid_argument(fmt::format("dot needs equal last dimensions, got lhs feature shape {} and rhs feature shape {}",
                                          shape_string(ls), shape_string(rs)));
    }
    b.k = ls.back();
    l = ls.slice(0, ls.size() - 1);
    r = rs.slice(0, rs.size() - 1);
  }
  const size_t d = std::max(l.size(), r.size());
  const auto lp = padded(l, d), rp = padded(r, d);
  std::vector<int64_t> out(d);
  for (size_t i = 0; i < d; ++i) {
    if (lp[i] != rp[i] && lp[i] != 1 && rp[i] != 1) {
      return invalid_argument(fmt::format("lhs feature shape {} and rhs feature shape {} do not broadcast",
                                          shape_string(ls), shape_string(rs)));
    }
    out[i] = lp[i] == 1 ? rp[i] : lp[i];
  }
  b.n = product(out);
  b.out_shape = out;
  if (op == BinaryOp::dot) b.out_shape.push_back(1);
  if (lp == rp) return b;
  if (op != BinaryOp::dot && b.lhs_len == 1) {
    b.mode = Bcast::Mode::lhs_scalar;
  } else if (op != BinaryOp::dot && b.rhs_len == 1) {
    b.mode = Bcast::Mode::rhs_scalar;
  } else {
    b.mode = Bcast::Mode::table;
    b.lhs_off = offsets(lp, out, b.k);
    b.rhs_off = offsets(rp, out, b.k);
  }
  return b;
}

int64_t target_rows(const BlockGraph& g, Target t) {
  return t == Target::u ? g.num_src_nodes() : t == Target::v ? g.num_dst_nodes() : g.num_edges();
}

const char* target_rows_name(Target t) {
  return t == Target::u ? "source nodes" : t == Target::v ? "destination nodes" : "edges";
}

void check_operand(const char* fn, const char* side, const Tensor& x, const BlockGraph& g, Target t) {
  TORCH_CHECK(x.dim() >= 1, fn, ": ", side, " is 0-d, it needs one row for each of the graph's ", target_rows_name(t));
  TORCH_CHECK(x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble, fn, ": ", side,
              " must be float32 or float64, got ", x.scalar_type());
  TORCH_CHECK(x.device().is_cpu(), fn, ": ", side, " must be on the CPU, got ", x.device());
  const int64_t rows = target_rows(g, t);
  TORCH_CHECK(x.size(0) == rows, fn, ": ", side, " has ", x.size(0), " rows but the graph has ", rows, " ",
              target_rows_name(t));
}

// The checked, normalized operands (not yet contiguous) and their Bcast.
struct Checked {
  Operands x;
  Bcast bc;
};

Checked check_inputs(const char* fn, const BlockGraph& g, BinaryOp op, const Tensor& lhs, const Tensor& rhs,
                     Target lhs_target, Target rhs_target) {
  const bool needs_lhs = op != BinaryOp::copy_rhs, needs_rhs = op != BinaryOp::copy_lhs;
  TORCH_CHECK(!needs_lhs || lhs.defined(), fn, ": op '", binary_op_name(op), "' needs lhs, got None");
  TORCH_CHECK(!needs_rhs || rhs.defined(), fn, ": op '", binary_op_name(op), "' needs rhs, got None");
  if (needs_lhs) check_operand(fn, "lhs", lhs, g, lhs_target);
  if (needs_rhs) check_operand(fn, "rhs", rhs, g, rhs_target);
  if (needs_lhs && needs_rhs) {
    TORCH_CHECK(lhs.scalar_type() == rhs.scalar_type(), fn, ": lhs and rhs must have the same dtype, got ",
                lhs.scalar_type(), " and ", rhs.scalar_type());
  }
  Checked c;
  if (op == BinaryOp::copy_rhs) {
    c.x = {BinaryOp::copy_lhs, rhs, rhs, rhs_target, rhs_target};
  } else if (op == BinaryOp::copy_lhs) {
    c.x = {BinaryOp::copy_lhs, lhs, lhs, lhs_target, lhs_target};
  } else {
    c.x = {op, lhs, rhs, lhs_target, rhs_target};
  }
  auto bc = make_bcast(c.x.op, c.x.lhs.sizes().slice(1), c.x.rhs.sizes().slice(1));
  TORCH_CHECK(bc.is_ok(), fn, ": ", bc.status().message());
  c.bc = std::move(*bc);
  return c;
}

std::vector<int64_t> with_rows(int64_t rows, const std::vector<int64_t>& shape) {
  std::vector<int64_t> s{rows};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

// The block travels through autograd in a capsule, which holds a reference.
BlockGraph& block_in(AutogradContext* ctx) {
  return *static_cast<BlockGraph*>(ctx->saved_data["block"].toCapsule().get());
}

// gspmm (reduce >= 0, a SpmmReduce) or gsddmm (reduce < 0) of checked
// inputs. For copy_lhs, rhs is lhs again and gets no gradient.
class MessageFunction : public torch::autograd::Function<MessageFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& lhs, const Tensor& rhs, BlockGraphPtr g, int64_t op,
                        int64_t reduce, int64_t lhs_target, int64_t rhs_target) {
    Operands x{static_cast<BinaryOp>(op), lhs.contiguous(), rhs.contiguous(), static_cast<Target>(lhs_target),
               static_cast<Target>(rhs_target)};
    const Bcast bc = *make_bcast(x.op, x.lhs.sizes().slice(1), x.rhs.sizes().slice(1));
    Tensor out, arg;
    if (reduce < 0) {
      out = torch::empty(with_rows(g->num_edges(), bc.out_shape), x.lhs.options());
      detail::sddmm_forward(*g, x, bc, out);
    } else {
      const auto r = static_cast<SpmmReduce>(reduce);
      out = torch::empty(with_rows(g->num_dst_nodes(), bc.out_shape), x.lhs.options());
      if (r == SpmmReduce::max || r == SpmmReduce::min) arg = torch::empty(out.sizes(), torch::kInt64);
      detail::spmm_forward(*g, x, bc, r, out, arg);
    }
    ctx->saved_data["block"] = c10::IValue::make_capsule(g);
    ctx->saved_data["op"] = op;
    ctx->saved_data["reduce"] = reduce;
    ctx->saved_data["lhs_target"] = lhs_target;
    ctx->saved_data["rhs_target"] = rhs_target;
    ctx->save_for_backward({x.lhs, x.rhs, arg});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t reduce = ctx->saved_data["reduce"].toInt();
    const Operands x{static_cast<BinaryOp>(ctx->saved_data["op"].toInt()), saved[0], saved[1],
                     static_cast<Target>(ctx->saved_data["lhs_target"].toInt()),
                     static_cast<Target>(ctx->saved_data["rhs_target"].toInt())};
    const Bcast bc = *make_bcast(x.op, x.lhs.sizes().slice(1), x.rhs.sizes().slice(1));
    detail::Upstream up;
    up.grad = grads[0].contiguous();
    up.per_edge = reduce < 0;
    up.reduce = reduce < 0 ? SpmmReduce::sum : static_cast<SpmmReduce>(reduce);
    up.arg = saved[2];
    BlockGraph& g = block_in(ctx);
    Tensor grad_lhs, grad_rhs;
    if (ctx->needs_input_grad(0)) grad_lhs = detail::operand_grad(g, x, bc, up, true);
    if (x.op != BinaryOp::copy_lhs && ctx->needs_input_grad(1)) grad_rhs = detail::operand_grad(g, x, bc, up, false);
    return {grad_lhs, grad_rhs, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

Tensor run(const BlockGraphPtr& g, const Checked& c, int64_t reduce) {
  return MessageFunction::apply(c.x.lhs, c.x.rhs, g, static_cast<int64_t>(c.x.op), reduce,
                                static_cast<int64_t>(c.x.lhs_target), static_cast<int64_t>(c.x.rhs_target));
}

// ------------------------------------------------ references

// The operand's row for every edge, in CSR order.
Tensor rows_per_edge(BlockGraph& g, const Tensor& x, Target t) {
  if (t == Target::u) return x.index_select(0, g.indices());
  if (t == Target::v) return x.index_select(0, g.edge_dst());
  const Tensor order = g.edge_order();
  return order.defined() ? x.index_select(0, order) : x;
}

// x [E, *s] as [E, 1, .., 1, *s] with `dims` dimensions.
Tensor padded_rows(const Tensor& x, int64_t dims) {
  auto shape = x.sizes().vec();
  shape.insert(shape.begin() + 1, static_cast<size_t>(dims - x.dim()), 1);
  return x.reshape(shape);
}

// Every edge's message, in CSR order.
Tensor reference_messages(BlockGraph& g, const Operands& x) {
  Tensor a = rows_per_edge(g, x.lhs, x.lhs_target);
  if (x.op == BinaryOp::copy_lhs) return a;
  Tensor b = rows_per_edge(g, x.rhs, x.rhs_target);
  const int64_t dims = std::max(a.dim(), b.dim());
  a = padded_rows(a, dims);
  b = padded_rows(b, dims);
  switch (x.op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    default: return (a * b).sum(-1, true);
  }
}

// Per dst, the max (min) of its messages m [E, *s], 0 without in-edges: the
// messages laid out densely, [num_dst, max in-degree, *s].
Tensor reference_extreme(BlockGraph& g, const Tensor& m, bool max) {
  const int64_t nd = g.num_dst_nodes();
  auto shape = m.sizes().vec();
  shape[0] = nd;
  const Tensor deg = g.in_degrees();
  const int64_t width = nd > 0 ? deg.max().item<int64_t>() : 0;
  if (width == 0) return torch::zeros(shape, m.options());
  const Tensor& dst = g.edge_dst();
  const Tensor pos = torch::arange(g.num_edges(), torch::kInt64) - g.indptr().index_select(0, dst);
  auto dense_shape = shape;
  dense_shape.insert(dense_shape.begin() + 1, width);
  const double fill = max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  const Tensor dense = torch::full(dense_shape, fill, m.options()).index_put({dst, pos}, m);
  const Tensor r = max ? dense.amax(1) : dense.amin(1);
  std::vector<int64_t> mask_shape(static_cast<size_t>(m.dim()), 1);
  mask_shape[0] = nd;
  return torch::where((deg > 0).view(mask_shape), r, torch::zeros({}, m.options()));
}

}  // namespace

Tensor gspmm(const BlockGraphPtr& g, BinaryOp op, SpmmReduce reduce, const Tensor& lhs, const Tensor& rhs,
             Target lhs_target, Target rhs_target) {
  return run(g, check_inputs("gspmm", *g, op, lhs, rhs, lhs_target, rhs_target), static_cast<int64_t>(reduce));
}

Tensor gsddmm(const BlockGraphPtr& g, BinaryOp op, const Tensor& lhs, const Tensor& rhs, Target lhs_target,
              Target rhs_target) {
  return run(g, check_inputs("gsddmm", *g, op, lhs, rhs, lhs_target, rhs_target), -1);
}

Tensor gspmm_reference(const BlockGraphPtr& gp, BinaryOp op, SpmmReduce reduce, const Tensor& lhs, const Tensor& rhs,
                       Target lhs_target, Target rhs_target) {
  BlockGraph& g = *gp;
  const Checked c = check_inputs("gspmm_reference", g, op, lhs, rhs, lhs_target, rhs_target);
  const Tensor m = reference_messages(g, c.x);
  if (reduce == SpmmReduce::max || reduce == SpmmReduce::min) return reference_extreme(g, m, reduce == SpmmReduce::max);
  const Tensor sum = torch::zeros(with_rows(g.num_dst_nodes(), c.bc.out_shape), m.options()).index_add(0, g.edge_dst(), m);
  if (reduce == SpmmReduce::sum) return sum;
  std::vector<int64_t> shape(static_cast<size_t>(sum.dim()), 1);
  shape[0] = g.num_dst_nodes();
  return sum / g.in_degrees().clamp_min(1).to(m.scalar_type()).view(shape);
}

Tensor gsddmm_reference(const BlockGraphPtr& gp, BinaryOp op, const Tensor& lhs, const Tensor& rhs, Target lhs_target,
                        Target rhs_target) {
  BlockGraph& g = *gp;
  const Checked c = check_inputs("gsddmm_reference", g, op, lhs, rhs, lhs_target, rhs_target);
  const Tensor m = reference_messages(g, c.x);
  const Tensor order = g.edge_order();
  return order.defined() ? torch::zeros_like(m).index_copy(0, order, m) : m;
}

}  // namespace dgld::ops
