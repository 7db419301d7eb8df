// dgld::dropout (common/ops/dropout.h), the built-in models' ReLU and
// dropout between layers: the share of elements kept, the scale of the kept
// ones, gradients (central differences with the seed held, and the relu
// form's from its output), reproducibility from torch::manual_seed, the same
// result for any thread count, and eval mode.
// LibTorch before Catch2: c10's glog macros must not replace Catch2's CHECK.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "common/ops/dropout.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace dgld;
using torch::Tensor;

TEST_CASE("dropout keeps each element with probability 1 - p and scales it by 1 / (1 - p)") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(1);
  const int64_t n = 1'000'003;  // not a multiple of any vector width
  for (double p : {0.1, 0.5, 0.9}) {
    INFO("p " << p);
    const Tensor y = ops::dropout(torch::ones({n}), p, /*training=*/true, /*relu=*/false);
    const double kept = y.gt(0).to(torch::kFloat64).mean().item<double>();
    // Binomial: 5 standard deviations.
    CHECK(std::abs(kept - (1 - p)) < 5 * std::sqrt(p * (1 - p) / static_cast<double>(n)));
    const Tensor nonzero = y.masked_select(y.gt(0));
    CHECK(nonzero.min().item<float>() == Approx(1 / (1 - p)));
    CHECK(nonzero.max().item<float>() == Approx(1 / (1 - p)));
  }
  // Neighbouring elements' bits are independent: the share of kept pairs is (1 - p)^2.
  const Tensor m = ops::dropout_keep_mask(12345, n, 0.5).to(torch::kFloat64);
  const double pairs = (m.narrow(0, 0, n - 1) * m.narrow(0, 1, n - 1)).mean().item<double>();
  CHECK(std::abs(pairs - 0.25) < 0.003);
  CHECK(ops::dropout(torch::ones({10}), 1.0, true, false).abs().sum().item<float>() == 0);
  CHECK_THROWS_WITH(ops::dropout(torch::ones({3}), 1.5, true, false),
                    Catch::Contains("p must be in [0, 1]"));
  CHECK_THROWS_WITH(ops::dropout(torch::ones({3}, torch::kInt64), 0.5, true, false),
                    Catch::Contains("floating-point"));
}

TEST_CASE(
    "the relu form is relu(x) where kept, 0 elsewhere; eval mode and p = 0 are relu(x) or x") {
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({300, 37});
  torch::manual_seed(9);
  const Tensor plain = ops::dropout(x, 0.4, true, false);
  torch::manual_seed(9);
  const Tensor fused = ops::dropout(x, 0.4, true, true);
  // The same keep bits for the same seed: the relu form is relu of the plain one.
  CHECK(torch::equal(fused, torch::relu(plain)));
  CHECK(torch::allclose(plain.masked_select(plain.ne(0)), (x / 0.6).masked_select(plain.ne(0))));
  CHECK(torch::equal(ops::dropout(x, 0.4, false, true), torch::relu(x)));
  CHECK(torch::equal(ops::dropout(x, 0.0, true, true), torch::relu(x)));
  CHECK(torch::equal(ops::dropout(x, 0.4, false, false), x));
  // float64 takes the same keep bits.
  torch::manual_seed(9);
  const Tensor d = ops::dropout(x.to(torch::kFloat64), 0.4, true, false);
  CHECK(torch::equal(d.ne(0), plain.ne(0)));
}

TEST_CASE("dropout is reproducible from torch::manual_seed and the same for any thread count") {
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({1 << 18});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  torch::manual_seed(3);
  const Tensor one = ops::dropout(x, 0.5, true, true);
  at::set_num_threads(2);
  torch::manual_seed(3);
  const Tensor two = ops::dropout(x, 0.5, true, true);
  const Tensor again = ops::dropout(x, 0.5, true, true);
  at::set_num_threads(threads);
  CHECK(torch::equal(one, two));
  CHECK_FALSE(torch::equal(two, again));  // the next call draws another seed
}

TEST_CASE(
    "dropout's gradients: central differences with the seed held, and the relu form's from its "
    "output") {
  for (bool relu : {false, true}) {
    INFO("relu " << relu);
    // Away from relu's kink at 0.
    Tensor x = (torch::rand({40}, torch::kFloat64) + 0.1) *
               (torch::randint(0, 2, {40}, torch::kFloat64) * 2 - 1);
    x.set_requires_grad(true);
    auto f = [&](const Tensor& in) {
      torch::manual_seed(11);
      return ops::dropout(in, 0.3, true, relu);
    };
    const Tensor w = torch::randn({40}, torch::kFloat64);
    (f(x) * w).sum().backward();
    const Tensor analytic = x.grad().clone();
    torch::NoGradGuard no_grad;
    double worst = 0;
    for (int64_t j = 0; j < 40; ++j) {
      Tensor plus = x.detach().clone(), minus = x.detach().clone();
      plus[j] += 1e-6;
      minus[j] -= 1e-6;
      const double numeric = ((f(plus) - f(minus)) * w).sum().item<double>() / 2e-6;
      worst = std::max(worst, std::abs(numeric - analytic[j].item<double>()));
    }
    CHECK(worst < 1e-6);
  }
}

TEST_CASE(
    "the bias form is dropout(x + bias) with the same keep bits, and its gradients are the unfused "
    "form's") {
  for (bool relu : {false, true}) {
    for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
      INFO("relu " << relu << ", dtype " << dtype);
      // 300 rows of 37: rows that straddle the parallel chunks and no vector width.
      const Tensor x0 = torch::randn({300, 37}, dtype);
      const Tensor b0 = torch::randn({37}, dtype);
      const Tensor w = torch::randn({300, 37}, dtype);
      Tensor x = x0.clone().set_requires_grad(true), b = b0.clone().set_requires_grad(true);
      torch::manual_seed(21);
      const Tensor fused = ops::dropout(x, 0.4, true, relu, b);
      (fused * w).sum().backward();
      Tensor xr = x0.clone().set_requires_grad(true), br = b0.clone().set_requires_grad(true);
      torch::manual_seed(21);
      const Tensor plain = ops::dropout(xr + br, 0.4, true, relu);
      (plain * w).sum().backward();
      const double tol = dtype == torch::kFloat32 ? 1e-5 : 1e-12;
      CHECK(torch::allclose(fused, plain, tol, tol));
      CHECK(torch::allclose(x.grad(), xr.grad(), tol, tol));
      REQUIRE(b.grad().defined());
      CHECK(b.grad().sizes() == b0.sizes());
      CHECK(torch::allclose(b.grad(), br.grad(), 1e-4, 1e-4));
      CHECK(b.grad().abs().sum().item<double>() > 0);
    }
  }
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({50, 8});
  const Tensor b = torch::randn({8});
  CHECK(torch::equal(ops::dropout(x, 0.4, false, true, b), torch::relu(x + b)));
  CHECK(torch::equal(ops::dropout(x, 0.0, true, false, b), x + b));
  CHECK(ops::dropout(torch::randn({0, 8}), 0.5, true, true, b).sizes() == torch::IntArrayRef({0, 8}));
  CHECK_THROWS_WITH(ops::dropout(x, 0.4, true, true, torch::randn({7})),
                    Catch::Contains("one element per column of x (8)"));
  CHECK_THROWS_WITH(ops::dropout(x, 0.4, true, true, torch::randn({8}, torch::kFloat64)),
                    Catch::Contains("the bias is Double but x is Float"));
}

TEST_CASE("the bias form gives the same output and bias gradient for any thread count") {
  const Tensor x0 = torch::randn({4096, 64});
  const Tensor b0 = torch::randn({64});
  const Tensor w = torch::randn({4096, 64});
  const int threads = at::get_num_threads();
  std::vector<Tensor> out, grads;
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    Tensor b = b0.clone().set_requires_grad(true);
    torch::manual_seed(5);
    const Tensor y = ops::dropout(x0, 0.5, true, true, b);
    (y * w).sum().backward();
    out.push_back(y.detach());
    grads.push_back(b.grad());
  }
  at::set_num_threads(threads);
  CHECK(torch::equal(out[0], out[1]));
  // Summed in double per thread: equal to float32 rounding.
  CHECK(torch::allclose(grads[0], grads[1], 1e-6, 1e-6));
}

TEST_CASE("a 0-d bias (x of one column) gets its gradient back as 0-d") {
  const Tensor x = torch::randn({64, 1}).set_requires_grad(true);
  const Tensor b = torch::randn({}).set_requires_grad(true);
  torch::manual_seed(3);
  ops::dropout(x, 0.5, true, true, b).sum().backward();
  REQUIRE(b.grad().defined());
  CHECK(b.grad().dim() == 0);
  const Tensor xr = x.detach().clone().set_requires_grad(true);
  const Tensor br = b.detach().clone().set_requires_grad(true);
  torch::manual_seed(3);
  ops::dropout(xr + br, 0.5, true, true).sum().backward();
  CHECK(torch::allclose(b.grad(), br.grad(), 1e-5, 1e-5));
}
