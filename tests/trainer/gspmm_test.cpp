// g-SpMM / g-SDDMM (common/ops/gspmm.h) on small random graphs with a dst
// without in-edges, repeated sources and a shuffled edge order:
// - for every op, reducer, target pair and broadcasting shape, the fused
//   output and gradients equal the index_add / dense reference (double);
// - the fused gradients match central differences (what
//   torch.autograd.gradcheck checks);
// - a larger graph split over two threads; empty graphs, zero-width rows,
//   float32 and non-contiguous inputs;
// - the edge order's checks and the errors the ops raise, also through the
//   registered torch.ops.dgld schemas.
// LibTorch before Catch2: c10's glog macros must not replace Catch2's CHECK.
#include "common/ops/gspmm.h"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

using namespace dgld::ops;
using torch::Tensor;

namespace {

// num_edges random edges (src, dst) in the user's order, dst 0 with none,
// as a CSR; shuffled: edge ids stay in that order (the CSR gets the sorting
// permutation as its edge order, as dgld.graph builds it), else the edges
// come sorted by dst and ids are CSR positions. Seeded by torch::manual_seed.
BlockGraphPtr random_graph(int64_t num_dst, int64_t num_src, int64_t num_edges, bool shuffled) {
  Tensor dst = torch::randint(1, num_dst, {num_edges}, torch::kInt64);
  const Tensor src = torch::randint(0, num_src, {num_edges}, torch::kInt64);
  if (!shuffled) dst = std::get<0>(dst.sort());
  const auto [sorted, order] = dst.sort(c10::optional<bool>(true), 0, false);  // stable
  Tensor indptr = torch::zeros({num_dst + 1}, torch::kInt64);
  indptr.narrow(0, 1, num_dst).copy_(torch::bincount(sorted, {}, num_dst).cumsum(0));
  auto g = BlockGraph::create(indptr, src.index_select(0, order), num_src);
  REQUIRE(g.is_ok());
  if (shuffled) REQUIRE((*g)->set_edge_order(order).is_ok());
  return *g;
}

int64_t rows_of(const BlockGraph& g, Target t) {
  return t == Target::u ? g.num_src_nodes() : t == Target::v ? g.num_dst_nodes() : g.num_edges();
}

// A message: op, targets and feature shapes.
struct Message {
  BinaryOp op;
  Target lt, rt;
  std::vector<int64_t> ls, rs;
};

std::string describe(const Message& m) {
  auto shape = [](const std::vector<int64_t>& s) { return c10::str(torch::IntArrayRef(s)); };
  return c10::str(binary_op_name(m.op), " lhs ", target_name(m.lt), shape(m.ls), " rhs ", target_name(m.rt),
                  shape(m.rs));
}

// The operands a message reads (double): one for the copies, two otherwise;
// div's denominators 0.5 .. 1.5 away from 0 (distinct: no ties for max / min).
std::vector<Tensor> operands(const BlockGraph& g, const Message& m) {
  auto rows = [&](Target t, const std::vector<int64_t>& s) {
    std::vector<int64_t> shape{rows_of(g, t)};
    shape.insert(shape.end(), s.begin(), s.end());
    return torch::randn(shape, torch::kFloat64);
  };
  if (m.op == BinaryOp::copy_lhs) return {rows(m.lt, m.ls)};
  if (m.op == BinaryOp::copy_rhs) return {rows(m.rt, m.rs)};
  Tensor rhs = rows(m.rt, m.rs);
  if (m.op == BinaryOp::div) rhs = (torch::rand_like(rhs) + 0.5) * torch::sign(rhs + 1e-3);
  return {rows(m.lt, m.ls), rhs};
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// gspmm (or gsddmm when reduce is empty), fused or reference, of operands().
Fn message_fn(const BlockGraphPtr& g, const Message& m, std::optional<SpmmReduce> reduce, bool reference) {
  return [=](const std::vector<Tensor>& x) {
    const Tensor lhs = m.op == BinaryOp::copy_rhs ? Tensor() : x[0];
    const Tensor rhs = m.op == BinaryOp::copy_rhs ? x[0] : x.size() > 1 ? x[1] : Tensor();
    if (reduce) {
      return reference ? gspmm_reference(g, m.op, *reduce, lhs, rhs, m.lt, m.rt)
                       : gspmm(g, m.op, *reduce, lhs, rhs, m.lt, m.rt);
    }
    return reference ? gsddmm_reference(g, m.op, lhs, rhs, m.lt, m.rt) : gsddmm(g, m.op, lhs, rhs, m.lt, m.rt);
  };
}

// f(inputs) followed by the gradient of sum(f(inputs) * w) for each input.
std::vector<Tensor> output_and_grads(const Fn& f, const std::vector<Tensor>& inputs, const Tensor& w) {
  std::vector<Tensor> leaves;
  for (const auto& x : inputs) leaves.push_back(x.detach().clone().requires_grad_(true));
  const Tensor out = f(leaves);
  std::vector<Tensor> result{out.detach()};
  if (out.numel() > 0) (out * w).sum().backward();
  for (const auto& x : leaves) result.push_back(x.grad().defined() ? x.grad() : torch::zeros_like(x));
  return result;
}

// The largest difference between two functions' outputs and gradients.
double max_difference(const Fn& a, const Fn& b, const std::vector<Tensor>& inputs) {
  const Tensor w = torch::rand(a(inputs).sizes(), torch::kFloat64) + 0.5;
  const auto ra = output_and_grads(a, inputs, w), rb = output_and_grads(b, inputs, w);
  double worst = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    REQUIRE(ra[i].sizes() == rb[i].sizes());
    if (ra[i].numel() > 0) worst = std::max(worst, (ra[i] - rb[i]).abs().max().item<double>());
  }
  return worst;
}

// The largest difference between autograd's gradient of sum(f(x) * w) and
// its central differences, over every element of every input (double).
double central_difference_error(const Fn& f, const std::vector<Tensor>& inputs) {
  const Tensor w = torch::rand(f(inputs).sizes(), torch::kFloat64) + 0.5;
  const auto analytic = output_and_grads(f, inputs, w);
  std::vector<Tensor> probe;
  for (const auto& x : inputs) probe.push_back(x.detach().clone().contiguous());
  auto loss = [&] {
    torch::NoGradGuard no_grad;
    return (f(probe) * w).sum().item<double>();
  };
  const double h = 1e-6;
  double worst = 0;
  for (size_t i = 0; i < probe.size(); ++i) {
    double* x = probe[i].data_ptr<double>();
    const Tensor grad = analytic[i + 1].contiguous();
    for (int64_t j = 0; j < probe[i].numel(); ++j) {
      const double keep = x[j];
      x[j] = keep + h;
      const double up = loss();
      x[j] = keep - h;
      const double down = loss();
      x[j] = keep;
      worst = std::max(worst, std::abs((up - down) / (2 * h) - grad.data_ptr<double>()[j]));
    }
  }
  return worst;
}

const std::vector<Target> kTargets{Target::u, Target::v, Target::e};
const std::vector<SpmmReduce> kReducers{SpmmReduce::sum, SpmmReduce::mean, SpmmReduce::max, SpmmReduce::min};

// Every message over every target pair: elementwise ops on equal shapes,
// broadcast ([3,1] x [1,4]), padded ([4] x [2,4]), scalar operands and no
// feature dimension; dot on [2,5] x [2,5] and [1,5] x [3,5]; the copies.
std::vector<Message> all_messages() {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> elementwise{
      {{2, 3}, {2, 3}}, {{3, 1}, {1, 4}}, {{4}, {2, 4}}, {{4}, {1}}, {{1}, {2, 3}}, {{}, {}}};
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> dot{{{2, 5}, {2, 5}}, {{1, 5}, {3, 5}}};
  std::vector<Message> all;
  for (Target lt : kTargets) {
    for (Target rt : kTargets) {
      for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div}) {
        for (const auto& [ls, rs] : elementwise) all.push_back({op, lt, rt, ls, rs});
      }
      for (const auto& [ls, rs] : dot) all.push_back({BinaryOp::dot, lt, rt, ls, rs});
      all.push_back({BinaryOp::copy_lhs, lt, rt, {2, 3}, {}});
      all.push_back({BinaryOp::copy_lhs, lt, rt, {2, 20}, {}});  // max / min backward: 3 column ranges
      all.push_back({BinaryOp::copy_rhs, lt, rt, {}, {3}});
    }
  }
  return all;
}

}  // namespace

TEST_CASE("gspmm equals the reference and central differences for every op, reducer and target pair") {
  torch::manual_seed(1);
  const auto g = random_graph(5, 7, 12, true);
  REQUIRE_FALSE(torch::equal(g->edge_order(), torch::arange(g->num_edges())));  // ids not CSR positions
  for (const Message& m : all_messages()) {
    for (SpmmReduce r : kReducers) {
      INFO("gspmm " << describe(m) << " reduce " << spmm_reduce_name(r));
      const auto x = operands(*g, m);
      CHECK(max_difference(message_fn(g, m, r, false), message_fn(g, m, r, true), x) < 1e-12);
      CHECK(central_difference_error(message_fn(g, m, r, false), x) < 1e-6);
    }
  }
}

TEST_CASE("gsddmm equals the reference and central differences for every op and target pair") {
  torch::manual_seed(2);
  const auto g = random_graph(5, 7, 10, true);
  REQUIRE_FALSE(torch::equal(g->edge_order(), torch::arange(g->num_edges())));  // ids not CSR positions
  for (const Message& m : all_messages()) {
    INFO("gsddmm " << describe(m));
    const auto x = operands(*g, m);
    CHECK(max_difference(message_fn(g, m, std::nullopt, false), message_fn(g, m, std::nullopt, true), x) < 1e-12);
    CHECK(central_difference_error(message_fn(g, m, std::nullopt, false), x) < 1e-6);
  }
}

TEST_CASE("output shapes follow DGL's broadcasting and edge ids") {
  torch::manual_seed(4);
  const auto g = random_graph(5, 7, 9, true);
  const int64_t ne = g->num_edges();
  CHECK(gspmm(g, BinaryOp::mul, SpmmReduce::sum, torch::randn({7, 3, 1}), torch::randn({ne, 1, 4})).sizes() ==
        torch::IntArrayRef({5, 3, 4}));
  CHECK(gspmm(g, BinaryOp::dot, SpmmReduce::max, torch::randn({7, 1, 5}), torch::randn({ne, 3, 5})).sizes() ==
        torch::IntArrayRef({5, 3, 1}));
  CHECK(gsddmm(g, BinaryOp::dot, torch::randn({7, 2, 5}), torch::randn({5, 2, 5})).sizes() ==
        torch::IntArrayRef({ne, 2, 1}));
  CHECK(gsddmm(g, BinaryOp::add, torch::randn({7, 4}), torch::randn({5, 2, 1})).sizes() ==
        torch::IntArrayRef({ne, 2, 4}));
  // Edge id k's row of an "e" operand is edge k's: copying edge ids back
  // through gsddmm gives 0 .. E-1, and gspmm sums each dst's own edge ids.
  const Tensor ids = torch::arange(ne, torch::kFloat64).unsqueeze(1);
  CHECK(torch::equal(gsddmm(g, BinaryOp::copy_lhs, ids, Tensor(), Target::e), ids));
  const Tensor order = g->edge_order();
  REQUIRE(order.defined());
  const Tensor per_dst = torch::zeros({5, 1}, torch::kFloat64).index_add_(0, g->edge_dst(), ids.index_select(0, order));
  CHECK(torch::equal(gspmm(g, BinaryOp::copy_rhs, SpmmReduce::sum, Tensor(), ids), per_dst));
}

TEST_CASE("float32 and non-contiguous inputs give the double results") {
  torch::manual_seed(3);
  const auto g = random_graph(60, 90, 400, true);
  const int64_t ne = g->num_edges();
  const Tensor u = torch::randn({8, 90}, torch::kFloat64).t();  // [90, 8], not contiguous
  const Tensor e = torch::randn({ne, 8}, torch::kFloat64).narrow(1, 2, 1);
  for (SpmmReduce r : kReducers) {
    INFO(spmm_reduce_name(r));
    const Tensor ref = gspmm_reference(g, BinaryOp::mul, r, u, e);
    CHECK(torch::allclose(gspmm(g, BinaryOp::mul, r, u, e), ref, 0, 1e-12));
    CHECK(torch::allclose(gspmm(g, BinaryOp::mul, r, u.to(torch::kFloat), e.to(torch::kFloat)),
                          ref.to(torch::kFloat), 1e-5, 1e-5));
  }
  const Tensor v = torch::randn({60, 8}, torch::kFloat64);
  CHECK(torch::allclose(gsddmm(g, BinaryOp::dot, u.to(torch::kFloat), v.to(torch::kFloat)),
                        gsddmm_reference(g, BinaryOp::dot, u, v).to(torch::kFloat), 1e-5, 1e-5));
}

TEST_CASE("on a larger graph split over threads, outputs and gradients equal the reference") {
  torch::manual_seed(8);
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  const auto g = random_graph(2000, 3000, 24000, true);
  const std::vector<Message> messages{{BinaryOp::mul, Target::u, Target::e, {16}, {1}},
                                      {BinaryOp::add, Target::v, Target::e, {16}, {16}},
                                      {BinaryOp::dot, Target::u, Target::v, {2, 8}, {2, 8}},
                                      {BinaryOp::copy_rhs, Target::u, Target::e, {}, {16}},
                                      {BinaryOp::copy_lhs, Target::u, Target::e, {40}, {}}};  // 3 column ranges
  for (const Message& m : messages) {
    const auto x = operands(*g, m);
    for (SpmmReduce r : kReducers) {
      INFO("gspmm " << describe(m) << " reduce " << spmm_reduce_name(r));
      CHECK(max_difference(message_fn(g, m, r, false), message_fn(g, m, r, true), x) < 1e-10);
    }
    INFO("gsddmm " << describe(m));
    CHECK(max_difference(message_fn(g, m, std::nullopt, false), message_fn(g, m, std::nullopt, true), x) < 1e-10);
  }
  at::set_num_threads(threads);
}

TEST_CASE("graphs without edges or dst nodes, and zero-width rows, give zeros of the right shape") {
  auto no_edges = BlockGraph::create(torch::zeros({4}, torch::kInt64), torch::empty({0}, torch::kInt64), 5);
  auto no_dst = BlockGraph::create(torch::zeros({1}, torch::kInt64), torch::empty({0}, torch::kInt64), 5);
  REQUIRE(no_edges.is_ok());
  REQUIRE(no_dst.is_ok());
  REQUIRE((*no_edges)->set_edge_order(torch::empty({0}, torch::kInt64)).is_ok());
  for (const auto& g : {*no_edges, *no_dst}) {
    const int64_t nd = g->num_dst_nodes();
    const Tensor u = torch::randn({5, 3}).requires_grad_(true);
    const Tensor e = torch::randn({0, 3}).requires_grad_(true);
    for (SpmmReduce r : kReducers) {
      const Tensor out = gspmm(g, BinaryOp::add, r, u, e);
      CHECK(out.sizes() == torch::IntArrayRef({nd, 3}));
      CHECK(out.abs().sum().item<float>() == 0);
      out.sum().backward();
      CHECK(u.grad().abs().sum().item<float>() == 0);
    }
    CHECK(gsddmm(g, BinaryOp::dot, u, torch::randn({nd, 3})).sizes() == torch::IntArrayRef({0, 1}));
    const Tensor empty = gspmm(g, BinaryOp::copy_lhs, SpmmReduce::max, torch::randn({5, 0}), Tensor());
    CHECK(empty.sizes() == torch::IntArrayRef({nd, 0}));
  }
  torch::manual_seed(5);
  const auto g = random_graph(4, 6, 8, true);
  const Tensor zero_width = torch::randn({6, 2, 0}).requires_grad_(true);
  const Tensor out = gspmm(g, BinaryOp::mul, SpmmReduce::min, zero_width, torch::randn({g->num_edges(), 1, 1}));
  CHECK(out.sizes() == torch::IntArrayRef({4, 2, 0}));
  out.sum().backward();
  CHECK(zero_width.grad().sizes() == zero_width.sizes());
  CHECK(gsddmm(g, BinaryOp::dot, torch::randn({6, 0}), torch::randn({4, 0})).abs().sum().item<float>() == 0);
}

TEST_CASE("set_edge_order takes a permutation of the edge ids and nothing else") {
  torch::manual_seed(6);
  const auto g = random_graph(5, 7, 9, false);
  const int64_t ne = g->num_edges();
  REQUIRE(ne >= 3);
  CHECK_FALSE(g->edge_order().defined());
  auto message = [&](const Tensor& order) { return g->set_edge_order(order).message(); };
  CHECK_THAT(message(torch::arange(ne - 1, torch::kInt64)),
             Catch::Contains(std::to_string(ne - 1) + " entries for " + std::to_string(ne) + " edges"));
  CHECK_THAT(message(torch::arange(ne, torch::kInt32)), Catch::Contains("1-d int64"));
  CHECK_THAT(message(torch::arange(ne, torch::kInt64) + 1), Catch::Contains("outside [0, " + std::to_string(ne) + ")"));
  CHECK_THAT(message(torch::zeros({ne}, torch::kInt64)), Catch::Contains("edge id 0 appears twice"));
  CHECK_FALSE(g->edge_order().defined());  // refused orders change nothing
  const Tensor reversed = torch::arange(ne - 1, -1, -1, torch::kInt64);
  REQUIRE(g->set_edge_order(reversed).is_ok());
  CHECK(torch::equal(g->edge_order(), reversed));
  REQUIRE(g->set_edge_order(Tensor()).is_ok());
  CHECK_FALSE(g->edge_order().defined());
}

namespace {

// torch.ops.dgld.<name>(args...) through the dispatcher, as Python calls it.
Tensor call_op(const char* name, std::vector<c10::IValue> args) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  op.callBoxed(&args);
  return args.at(0).toTensor();
}

}  // namespace

TEST_CASE("the registered ops take their arguments by name and refuse wrong ones with a message") {
  torch::manual_seed(7);
  const auto g = random_graph(5, 7, 9, true);
  const int64_t ne = g->num_edges();
  const Tensor u = torch::randn({7, 3}), v = torch::randn({5, 3}), e = torch::randn({ne, 1});
  auto spmm = [&](std::string op, std::string reduce, c10::IValue lhs, c10::IValue rhs, std::string lt = "u",
                  std::string rt = "e") {
    return call_op("dgld::gspmm", {c10::IValue(g), op, reduce, lhs, rhs, lt, rt});
  };
  CHECK(torch::allclose(spmm("mul", "mean", u, e), gspmm(g, BinaryOp::mul, SpmmReduce::mean, u, e)));
  CHECK(torch::allclose(spmm("copy_rhs", "max", c10::IValue(), e), gspmm_reference(g, BinaryOp::copy_rhs,
                                                                                  SpmmReduce::max, Tensor(), e)));
  CHECK(torch::allclose(call_op("dgld::gsddmm", {c10::IValue(g), "sub", u, v, "u", "v"}),
                        gsddmm_reference(g, BinaryOp::sub, u, v)));
  CHECK_THROWS_WITH(spmm("pow", "sum", u, e),
                    Catch::Contains("gspmm: unknown op 'pow' (valid: copy_lhs, copy_rhs, add, sub, mul, div, dot)"));
  CHECK_THROWS_WITH(spmm("mul", "prod", u, e), Catch::Contains("gspmm: unknown reduce 'prod' (valid: sum, mean, max, min)"));
  CHECK_THROWS_WITH(spmm("mul", "sum", u, e, "w"), Catch::Contains("gspmm: unknown lhs_target 'w' (valid: u, v, e)"));
  CHECK_THROWS_WITH(call_op("dgld::gsddmm", {c10::IValue(g), "add", u, v, "u", "x"}),
                    Catch::Contains("gsddmm: unknown rhs_target 'x'"));
  CHECK_THROWS_WITH(spmm("mul", "sum", torch::randn({5, 3}), e),
                    Catch::Contains("gspmm: lhs has 5 rows but the graph has 7 source nodes"));
  CHECK_THROWS_WITH(spmm("add", "sum", u, v, "u", "e"),
                    Catch::Contains("rhs has 5 rows but the graph has " + std::to_string(ne) + " edges"));
  CHECK_THROWS_WITH(call_op("dgld::gsddmm", {c10::IValue(g), "add", u, u, "u", "v"}),
                    Catch::Contains("gsddmm: rhs has 7 rows but the graph has 5 destination nodes"));
  CHECK_THROWS_WITH(spmm("add", "sum", torch::randn({7, 3, 2}), torch::randn({ne, 4})),
                    Catch::Contains("lhs feature shape [3, 2] and rhs feature shape [4] do not broadcast"));
  CHECK_THROWS_WITH(spmm("dot", "sum", u, torch::randn({ne, 4})),
                    Catch::Contains("dot needs equal last dimensions, got lhs feature shape [3] and rhs feature shape [4]"));
  CHECK_THROWS_WITH(spmm("add", "sum", torch::ones({7, 3}, torch::kInt64), e),
                    Catch::Contains("lhs must be float32 or float64, got Long"));
  CHECK_THROWS_WITH(spmm("add", "sum", u.to(torch::kDouble), e),
                    Catch::Contains("lhs and rhs must have the same dtype, got Double and Float"));
  CHECK_THROWS_WITH(spmm("mul", "sum", u, c10::IValue()), Catch::Contains("gspmm: op 'mul' needs rhs, got None"));
  CHECK_THROWS_WITH(spmm("copy_lhs", "sum", c10::IValue(), e), Catch::Contains("op 'copy_lhs' needs lhs, got None"));
  CHECK_THROWS_WITH(gsddmm(g, BinaryOp::mul, torch::randn({}), v),
                    Catch::Contains("gsddmm: lhs is 0-d, it needs one row for each of the graph's source nodes"));
}
