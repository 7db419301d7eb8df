#include "daemons/trainer_host/model_cost.h"

#include <algorithm>
#include <chrono>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "common/ops/message_passing.h"

namespace dgld::trainer {

StepWork model_step_work(const std::vector<Block>& blocks, const std::vector<int64_t>& dims,
                         int maps, bool input_needs_grad) {
  StepWork w;
  for (size_t l = 0; l < blocks.size() && l + 1 < dims.size(); ++l) {
    const Block& b = blocks[l];
    const int64_t in = dims[l], out = dims[l + 1];
    const int64_t src = b.num_src(), dst = b.num_dst(), edges = b.num_edges();
    const bool needs_grad = l > 0 || input_needs_grad;
    const bool first =
        ops::project_before_aggregating(src, dst, edges, in, out, needs_grad, /*self_loop=*/false,
                                        /*training=*/true);
    for (int i = 0; i < std::max(1, maps); ++i) {
      // The neighbours' map runs over the src rows when it projects first.
      const int64_t rows = first && i == 0 ? src : dst;
      w.products.push_back({rows, in, out, false, true});                   // Y = X W^T
      w.products.push_back({out, rows, in, true, false});                   // dW = dY^T X
      if (needs_grad) w.products.push_back({rows, out, in, false, false});  // dX = dY W
    }
    // The aggregation's backward runs when its input needs a gradient: a
    // projected input always does.
    const double width = static_cast<double>(first ? out : in);
    w.aggregate_flops += static_cast<double>(edges) * width * (first || needs_grad ? 2.0 : 1.0);
  }
  for (const DenseProduct& p : w.products) w.dense_flops += p.flops();
  return w;
}

double measure_gemm_gflops(const std::vector<DenseProduct>& products, double min_seconds) {
  constexpr int64_t kCap = 16384;
  std::vector<DenseProduct> run;
  int64_t a_size = 0, b_size = 0, c_size = 0;
  double flops = 0;
  for (DenseProduct p : products) {
    p.m = std::min(p.m, kCap);
    p.k = std::min(p.k, kCap);
    p.n = std::min(p.n, kCap);
    if (p.m <= 0 || p.k <= 0 || p.n <= 0) continue;
    a_size = std::max(a_size, p.m * p.k);
    b_size = std::max(b_size, p.k * p.n);
    c_size = std::max(c_size, p.m * p.n);
    flops += p.flops();
    run.push_back(p);
  }
  if (run.empty()) return 0;
  torch::NoGradGuard no_grad;
  // A generator of its own: the run's draws (weights, dropout) stay as they were.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const auto a = torch::empty({a_size}).uniform_(-1, 1, gen),
             b = torch::empty({b_size}).uniform_(-1, 1, gen);
  auto c = torch::empty({c_size});
  auto once = [&] {
    for (const DenseProduct& p : run) {
      const auto av = p.ta ? a.narrow(0, 0, p.m * p.k).view({p.k, p.m}).t()
                           : a.narrow(0, 0, p.m * p.k).view({p.m, p.k});
      const auto bv = p.tb ? b.narrow(0, 0, p.k * p.n).view({p.n, p.k}).t()
                           : b.narrow(0, 0, p.k * p.n).view({p.k, p.n});
      auto cv = c.narrow(0, 0, p.m * p.n).view({p.m, p.n});
      torch::mm_out(cv, av, bv);
    }
  };
  once();  // warm-up: BLAS buffers, pages
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  double elapsed = 0;
  int reps = 0;
  do {
    once();
    ++reps;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (elapsed < min_seconds);
  return flops * reps / elapsed / 1e9;
}

}  // namespace dgld::trainer
