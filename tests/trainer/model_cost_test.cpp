// What trainer-host reports of the model step (daemons/trainer_host/
// model_cost.h, step_profile.h): the FLOPs of a step from its blocks and
// widths, each layer aggregating or projecting first by the layers' own
// rule; the GEMM rate of a step's shapes; the profiler's operators and
// categories.
// LibTorch before Catch2: c10's glog macros must not replace Catch2's CHECK.
#include <torch/torch.h>

#include "daemons/trainer_host/model_cost.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "daemons/trainer_host/step_profile.h"

using namespace dgld;
using namespace dgld::trainer;

namespace {

Block sized_block(int64_t src, int64_t dst, int64_t edges) {
  Block b;
  b.src_nodes.resize(static_cast<size_t>(src));
  b.dst_nodes.resize(static_cast<size_t>(dst));
  b.eids.resize(static_cast<size_t>(edges));
  return b;
}

}  // namespace

TEST_CASE(
    "a step's FLOPs: products forward and backward, per layer aggregating or projecting first") {
  // Layer 0 (8 -> 16 over 10 src, 4 dst, 12 edges; input without gradient):
  // aggregating first is cheaper, so both maps run over the 4 dst rows, with
  // no input gradient. Layer 1 (16 -> 3 over 4 src, 2 dst, 5 edges): projecting
  // first is cheaper, so the neighbours' map runs over the 4 src rows.
  const std::vector<Block> blocks = {sized_block(10, 4, 12), sized_block(4, 2, 5)};
  const StepWork w = model_step_work(blocks, {8, 16, 3}, /*maps=*/2, /*input_needs_grad=*/false);
  REQUIRE(w.products.size() == 10);
  CHECK(w.products[0].m == 4);  // Y = X W^T over the dst rows
  CHECK(w.products[0].tb);
  CHECK(w.products[1].ta);      // dW = dY^T X
  CHECK(w.products[4].m == 4);  // layer 1's neighbour map over its src rows
  CHECK(w.products[7].m == 2);  // layer 1's self map over its dst rows
  CHECK(w.dense_flops == Approx(2 * 2 * 1024 + 3 * 384 + 3 * 192));
  CHECK(w.aggregate_flops == Approx(12 * 8 + 5 * 3 * 2));
  CHECK(w.flops() == Approx(w.dense_flops + w.aggregate_flops));
  // A learnable input (an embedding) adds layer 0's input gradients.
  const StepWork g = model_step_work(blocks, {8, 16, 3}, 2, /*input_needs_grad=*/true);
  CHECK(g.dense_flops > w.dense_flops);
  CHECK(model_step_work({}, {8}, 2, false).flops() == 0);
}

TEST_CASE("the GEMM rate of a step's shapes is measured, and 0 with nothing to run") {
  const std::vector<DenseProduct> products = {{256, 64, 128, false, true},
                                              {128, 256, 64, true, false}};
  const double gflops = measure_gemm_gflops(products, 0.05);
  CHECK(gflops > 0.1);
  CHECK(gflops < 1e5);
  CHECK(measure_gemm_gflops({}, 0.05) == 0);
  CHECK(measure_gemm_gflops({{0, 4, 4}}, 0.05) == 0);
  // The run's random draws stay as they were.
  torch::manual_seed(5);
  const auto a = torch::rand({4});
  torch::manual_seed(5);
  (void)measure_gemm_gflops(products, 0.01);
  CHECK(torch::equal(torch::rand({4}), a));
}

TEST_CASE("the step profiler sums each operator's self time by category over the recorded steps") {
  CHECK(op_category("aten::mm") == "dense products");
  CHECK(op_category("aten::addmm_") == "dense products");
  CHECK(op_category("dgld::copy_u_reduce") == "aggregation");
  CHECK(op_category("torch::autograd::CppNode<dgld::ops::(anonymous namespace)::DropoutFn>") ==
        "dropout");
  CHECK(op_category(
            "torch::autograd::CppNode<dgld::ops::(anonymous namespace)::CopyUReduceFunction>") ==
        "aggregation");
  CHECK(op_category("aten::index_select") == "gathers");
  CHECK(op_category("aten::empty") == "allocation and copies");
  CHECK(op_category("autograd::engine::evaluate_function: MmBackward0") == "autograd engine");

  StepProfiler profiler;
  const auto a = torch::randn({64, 64}).set_requires_grad(true);
  for (int step = 0; step < 3; ++step) {
    profiler.start();
    torch::mm(a, a).relu().sum().backward();
    profiler.pause();
    torch::mm(a, a);  // not recorded: between the steps
  }
  const StepProfile p = profiler.result(3, 0.5);
  CHECK(p.steps == 3);
  const auto mm = std::find_if(p.ops.begin(), p.ops.end(),
                               [](const OpTime& t) { return t.name == "aten::mm"; });
  REQUIRE(mm != p.ops.end());
  CHECK(mm->calls == 3 * 3);  // forward, and the two of its backward
  CHECK(mm->category == "dense products");
  CHECK(mm->self_s > 0);
  CHECK(mm->total_s >= mm->self_s);
  double categories = 0;
  for (const auto& [name, s] : p.categories) categories += s;
  double ops = 0;
  for (const OpTime& t : p.ops) ops += t.self_s;
  CHECK(categories == Approx(ops));
  for (size_t i = 1; i < p.ops.size(); ++i) CHECK(p.ops[i - 1].self_s >= p.ops[i].self_s);
  const std::string table = format_step_profile(p);
  CHECK(table.find("dense products") != std::string::npos);
  CHECK(table.find("aten::mm") != std::string::npos);
}
