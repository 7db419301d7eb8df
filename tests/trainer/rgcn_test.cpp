// R-GCN (DGL's entity-classification RelGraphConv) on typed blocks:
// - BlockGraph::relation(r) splits a block's edges exactly by type;
// - the built-in rgcn model's RelGraphConv (dgld.nn's, scripted at build
//   time) equals a naive per-edge computation, with as many bases as
//   relations and with fewer, fused and reference kernels alike;
// - gradients reach every relation that has edges and match central
//   differences in double;
// - a 2-layer R-GCN learns a label only one relation's neighbours predict;
// - config and block errors are reported.
// LibTorch before Catch2: c10's glog macros must not replace Catch2's CHECK.
#include "daemons/trainer_host/model_impl.h"

#include <catch2/catch.hpp>
#include <torch/script.h>
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace dgld;
using namespace dgld::trainer;
using torch::Tensor;

namespace {

// A random typed block: in-degrees in [0, max_deg] (dst 0 has none),
// sources drawn with repeats, types drawn from `types` (interleaved within a
// row, not grouped).
Block random_typed_block(int64_t num_dst, int64_t num_src, int64_t max_deg, const std::vector<int32_t>& types,
                         uint64_t seed) {
  std::mt19937_64 rng(seed);
  Block b;
  for (int64_t i = 0; i < num_src; ++i) {
    b.src_nodes.push_back(1000 + i);
    if (i < num_dst) b.dst_nodes.push_back(1000 + i);
  }
  b.indptr.push_back(0);
  for (int64_t v = 0; v < num_dst; ++v) {
    const int64_t deg = v == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(max_deg + 1));
    for (int64_t k = 0; k < deg; ++k) {
      b.indices.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(num_src)));
      b.eids.push_back(static_cast<int64_t>(b.eids.size()) + 500);
      b.etypes.push_back(types[rng() % types.size()]);
    }
    b.indptr.push_back(static_cast<int64_t>(b.indices.size()));
  }
  return b;
}

ops::BlockGraphPtr graph_of(const Block& b, int64_t num_etypes = 0) {
  auto g = make_block_graph(b, num_etypes);
  REQUIRE(g.is_ok());
  return std::move(g).value();
}

// h_dst'[v] = h[v] W_self + b + sum_r mean_{u in N_r(v)} h[u] W_r, by loops
// over the block's edges in double.
Tensor naive_rgcn(const Block& b, const Tensor& h_src, const Tensor& w_rel, const Tensor& w_self, const Tensor& bias) {
  const auto h = h_src.to(torch::kFloat64);
  const auto wr = w_rel.detach().to(torch::kFloat64);
  const int64_t nd = b.num_dst(), nr = wr.size(0), in = h.size(1);
  auto out = h.narrow(0, 0, nd).matmul(w_self.detach().to(torch::kFloat64)) + bias.detach().to(torch::kFloat64);
  for (int64_t v = 0; v < nd; ++v) {
    for (int64_t r = 0; r < nr; ++r) {
      auto sum = torch::zeros({in}, torch::kFloat64);
      int64_t n = 0;
      for (int64_t k = b.indptr[v]; k < b.indptr[v + 1]; ++k) {
        if (b.etypes[k] != r) continue;
        sum += h[b.indices[k]];
        ++n;
      }
      if (n > 0) out[v] += (sum / static_cast<double>(n)).matmul(wr[r]);
    }
  }
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// The largest difference between autograd's gradient of sum(f() * w) with
// respect to each tensor of `leaves` (which f reads; double, requires_grad)
// and central differences, perturbing the leaves in place.
double max_gradient_error(const std::function<Tensor()>& f, const std::vector<Tensor>& leaves) {
  for (const auto& x : leaves) x.mutable_grad() = Tensor();
  const Tensor out = f();
  const Tensor w = torch::randn(out.sizes(), torch::kFloat64);
  (out * w).sum().backward();
  double worst = 0;
  const double eps = 1e-6;
  for (const auto& x : leaves) {
    const Tensor analytic = x.grad();
    REQUIRE(analytic.defined());
    torch::NoGradGuard no_grad;
    auto flat = x.detach().view({-1});
    for (int64_t j = 0; j < flat.size(0); ++j) {
      const double orig = flat[j].item<double>();
      flat[j] = orig + eps;
      const double plus = (f() * w).sum().item<double>();
      flat[j] = orig - eps;
      const double minus = (f() * w).sum().item<double>();
      flat[j] = orig;
      const double numeric = (plus - minus) / (2 * eps);
      worst = std::max(worst, std::abs(numeric - analytic.view({-1})[j].item<double>()));
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("relation graphs partition a typed block's edges exactly") {
  // Types 0, 1 and 3 of 5: relations 2 and 4 are empty.
  const Block b = random_typed_block(30, 45, 7, {0, 1, 3, 3, 1}, 11);
  const auto g = graph_of(b, 5);
  REQUIRE(g->has_etypes());
  CHECK(g->num_etypes() == 5);
  CHECK_FALSE(g->has_relations());
  int64_t total = 0;
  for (int64_t r = 0; r < 5; ++r) {
    const auto rg = g->relation(r);
    CHECK(rg.get() == g->relation(r).get());  // built once, shared
    CHECK(rg->num_src_nodes() == g->num_src_nodes());
    CHECK(rg->num_dst_nodes() == g->num_dst_nodes());
    CHECK_FALSE(rg->has_etypes());
    total += rg->num_edges();
    const int64_t* ip = rg->indptr().data_ptr<int64_t>();
    const int64_t* ix = rg->indices().data_ptr<int64_t>();
    for (int64_t v = 0; v < b.num_dst(); ++v) {
      std::vector<int64_t> want;
      for (int64_t k = b.indptr[v]; k < b.indptr[v + 1]; ++k) {
        if (b.etypes[k] == r) want.push_back(b.indices[k]);
      }
      const std::vector<int64_t> got(ix + ip[v], ix + ip[v + 1]);
      INFO("relation " << r << " dst " << v);
      CHECK(got == want);
    }
    // A relation graph is a valid block of its own.
    CHECK(ops::validate_csr(rg->indptr(), rg->indices(), rg->num_src_nodes()).is_ok());
  }
  CHECK(total == g->num_edges());
  CHECK(g->has_relations());
  CHECK(g->relation(2)->num_edges() == 0);
  CHECK(g->relation(4)->num_edges() == 0);

  // Default num_etypes: max type + 1; int64 types work the same.
  const auto g2 = graph_of(b);
  CHECK(g2->num_etypes() == 4);
  auto g3 = ops::BlockGraph::create(g->indptr(), g->indices(), g->num_src_nodes());
  REQUIRE(g3.is_ok());
  REQUIRE((*g3)->set_etypes(g->etypes().to(torch::kInt64), 5).is_ok());
  for (int64_t r = 0; r < 5; ++r) CHECK(torch::equal((*g3)->relation(r)->indices(), g->relation(r)->indices()));
  // Setting new types drops the relations built from the old ones.
  REQUIRE((*g3)->set_etypes(torch::zeros({g->num_edges()}, torch::kInt32), 1).is_ok());
  CHECK((*g3)->relation(0)->num_edges() == g->num_edges());
  CHECK_THROWS((*g3)->relation(1));
  CHECK_THROWS(g->relation(5));
  CHECK_THROWS(g->relation(-1));
}

TEST_CASE("edge types are validated") {
  const Block b = random_typed_block(10, 15, 4, {0, 1, 2}, 3);
  const auto g = graph_of(b);
  const int64_t ne = g->num_edges();
  REQUIRE(ne > 2);
  auto plain = ops::BlockGraph::create(g->indptr(), g->indices(), g->num_src_nodes());
  REQUIRE(plain.is_ok());
  auto& p = *plain;
  CHECK_FALSE(p->has_etypes());
  CHECK(p->num_etypes() == 0);
  CHECK_THROWS_WITH(p->relation(0), Catch::Contains("without edge types"));

  auto st = p->set_etypes(torch::zeros({ne - 1}, torch::kInt32), 3);
  CHECK(st.message().find(fmt::format("{} edge types for {} edges", ne - 1, ne)) != std::string::npos);
  st = p->set_etypes(torch::zeros({ne}, torch::kFloat32), 3);
  CHECK(st.message().find("int32 or int64") != std::string::npos);
  auto bad = torch::zeros({ne}, torch::kInt64);
  bad[2] = 3;
  st = p->set_etypes(bad, 3);
  CHECK(st.message().find("edge 2 has edge type 3, outside [0, 3)") != std::string::npos);
  bad[2] = -1;
  st = p->set_etypes(bad, 0);
  CHECK(st.message().find("negative edge type -1") != std::string::npos);
  CHECK_FALSE(p->has_etypes());

  Block wrong = b;
  wrong.etypes.pop_back();
  CHECK_FALSE(make_block_graph(wrong).is_ok());
  wrong = b;
  wrong.etypes[0] = 7;
  CHECK(make_block_graph(wrong).is_ok());  // 8 types
  auto r = make_block_graph(wrong, 3);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("outside [0, 3)") != std::string::npos);
}

namespace {

// The conv of the built-in rgcn model with one layer (dgld.nn.RelGraphConv,
// aggregate='mean', basis weights, a self loop), sized in -> out over
// num_rels relations and num_bases bases (0 or >= num_rels: as many bases
// as relations).
struct Rgcn {
  torch::jit::Module model, conv;
  int64_t rels, bases;
  Rgcn(int64_t in, int64_t out, int64_t num_rels, int64_t num_bases) : rels(num_rels) {
    auto file = builtin_model_file("rgcn", 1);
    REQUIRE(file.is_ok());
    model = torch::jit::load(*file);
    model.run_method("configure", in, int64_t{4}, out, 0.0, int64_t{1}, num_rels, num_bases);
    conv = model.attr("layers").toModule().attr("0").toModule();
    bases = param("linear_r.W").size(0);
  }
  Tensor param(const std::string& name) {
    for (const auto& p : conv.named_parameters()) {
      if (p.name == name) return p.value;
    }
    FAIL("no parameter " << name);
    return {};
  }
  // W_r = sum_b coeff[r, b] V_b: [rels, in, out].
  Tensor relation_weights() {
    const auto w = param("linear_r.W");
    return param("linear_r.coeff").matmul(w.reshape({w.size(0), -1})).view({rels, w.size(1), w.size(2)});
  }
  Tensor forward(const ops::BlockGraphPtr& g, const Tensor& h, Kernels k = Kernels::fused) {
    ops::set_reference_kernels(k == Kernels::reference);
    auto out = conv.forward({c10::IValue(g), h}).toTensor();
    ops::set_reference_kernels(false);
    return out;
  }
  void zero_grad() {
    for (const auto& p : conv.parameters()) p.mutable_grad() = Tensor();
  }
};

}  // namespace

TEST_CASE("RelGraphConv equals a naive per-edge computation") {
  const int64_t num_bases = GENERATE(0, 2, 4);  // 0 and 4 >= num_rels: as many bases as relations
  INFO("num_bases " << num_bases);
  torch::manual_seed(7);
  // Relation 2 has no edges in the block.
  const Block b = random_typed_block(12, 20, 6, {0, 1, 3}, 5);
  const auto g = graph_of(b, 4);
  const int64_t in = 5, out = 3;
  Rgcn conv(in, out, 4, num_bases);
  CHECK(conv.bases == (num_bases == 2 ? 2 : 4));
  {
    torch::NoGradGuard no_grad;
    conv.param("h_bias").normal_();  // zeros at init: make it show
  }
  const auto w_rel = conv.relation_weights();
  REQUIRE(w_rel.sizes() == torch::IntArrayRef({4, in, out}));
  const auto loop = conv.param("loop_weight"), bias = conv.param("h_bias");

  const auto h = torch::randn({20, in});
  const auto want = naive_rgcn(b, h, w_rel, loop, bias);
  auto h1 = h.clone().set_requires_grad(true);
  auto h2 = h.clone().set_requires_grad(true);
  const auto y1 = conv.forward(g, h1, Kernels::fused);
  REQUIRE(y1.sizes() == torch::IntArrayRef({12, out}));
  CHECK(max_abs_diff(y1, want) < 1e-4);
  // dst 0 has no in-edges: self loop and bias only.
  CHECK(max_abs_diff(y1[0], h[0].matmul(loop) + bias) < 1e-5);

  // Fused and reference kernels: the same values and gradients.
  const auto w = torch::randn(y1.sizes());
  (y1 * w).sum().backward();
  std::vector<Tensor> fused_grads;
  for (const auto& p : conv.conv.parameters()) fused_grads.push_back(p.grad().clone());
  conv.zero_grad();
  const auto y2 = conv.forward(g, h2, Kernels::reference);
  CHECK(max_abs_diff(y2, want) < 1e-4);
  (y2 * w).sum().backward();
  CHECK(max_abs_diff(h1.grad(), h2.grad()) < 1e-4);
  size_t i = 0;
  for (const auto& p : conv.conv.parameters()) CHECK(max_abs_diff(fused_grads[i++], p.grad()) < 1e-4);
}

TEST_CASE("RelGraphConv gradients reach every relation with edges") {
  torch::manual_seed(3);
  const Block b = random_typed_block(12, 20, 6, {0, 1, 3}, 9);  // relation 2 unused
  const auto g = graph_of(b, 4);
  const Kernels kernels = GENERATE(Kernels::fused, Kernels::reference);
  INFO("kernels " << kernels_name(kernels));

  for (const int64_t num_bases : {0, 2}) {
    INFO("num_bases " << num_bases);
    Rgcn conv(5, 3, 4, num_bases);
    conv.forward(g, torch::randn({20, 5}), kernels).pow(2).sum().backward();
    const auto gc = conv.param("linear_r.coeff").grad();
    REQUIRE(gc.defined());
    for (int64_t r = 0; r < 4; ++r) {
      INFO("relation " << r);
      CHECK((gc[r].abs().sum().item<double>() > 0.0) == (r != 2));
    }
    for (int64_t i = 0; i < conv.bases; ++i) CHECK(conv.param("linear_r.W").grad()[i].abs().sum().item<double>() > 0.0);
    CHECK(conv.param("loop_weight").grad().abs().sum().item<double>() > 0.0);
    CHECK(conv.param("h_bias").grad().abs().sum().item<double>() > 0.0);
  }
  SECTION("central differences in double") {
    const Block small = random_typed_block(5, 8, 4, {0, 1, 2}, 21);
    const auto sg = graph_of(small, 3);
    for (const int64_t num_bases : {0, 2}) {
      INFO("num_bases " << num_bases);
      Rgcn conv(3, 2, 3, num_bases);
      conv.conv.to(torch::kFloat64);
      {
        torch::NoGradGuard no_grad;
        conv.param("h_bias").normal_();
      }
      auto h = torch::randn({8, 3}, torch::kFloat64).set_requires_grad(true);
      std::vector<Tensor> leaves{h};
      for (const auto& p : conv.conv.parameters()) leaves.push_back(p);
      CHECK(leaves.size() == 5u);  // h, W, coeff, h_bias, loop_weight
      CHECK(max_gradient_error([&] { return conv.forward(sg, h, kernels); }, leaves) < 1e-6);
    }
  }
}

TEST_CASE("a 2-layer R-GCN learns a label that only one relation predicts") {
  // n nodes, each with 3 in-edges of each of 3 types from random nodes; the
  // label is whether the type-1 in-neighbours' feature 0 sums above 0.
  torch::manual_seed(1);
  std::mt19937_64 rng(17);
  const int64_t n = 800, n_train = 600, in_dim = 4, deg = 3;
  const auto x = torch::randn({n, in_dim});
  Block blk;
  for (int64_t i = 0; i < n; ++i) {
    blk.dst_nodes.push_back(i);
    blk.src_nodes.push_back(i);
  }
  blk.indptr.push_back(0);
  std::vector<int64_t> labels;
  for (int64_t v = 0; v < n; ++v) {
    double s = 0;
    for (int64_t k = 0; k < 3 * deg; ++k) {
      const auto u = static_cast<int64_t>(rng() % n);
      const int32_t t = static_cast<int32_t>(rng() % 3);  // interleaved types
      blk.indices.push_back(u);
      blk.eids.push_back(static_cast<int64_t>(blk.eids.size()));
      blk.etypes.push_back(t);
      if (t == 1) s += x[u][0].item<double>();
    }
    blk.indptr.push_back(static_cast<int64_t>(blk.indices.size()));
    labels.push_back(s > 0 ? 1 : 0);
  }
  const auto y = torch::tensor(labels, torch::kInt64);
  const double positive = y.to(torch::kFloat64).mean().item<double>();
  REQUIRE(positive > 0.25);
  REQUIRE(positive < 0.75);

  ModelConfig mc;
  mc.kind = "rgcn";
  mc.in_dim = in_dim;
  mc.num_hidden = 16;
  mc.num_classes = 2;
  mc.num_layers = 2;
  mc.dropout = 0.0;
  mc.num_rels = 3;
  mc.num_bases = GENERATE(0, 2);
  INFO("num_bases " << mc.num_bases);
  auto model = Model::create(mc);
  REQUIRE(model.is_ok());
  CHECK((*model)->describe().find(mc.num_bases == 2 ? "rels=3, bases=2" : "rels=3, bases=0") != std::string::npos);
  ModelInput input;
  input.blocks = {graph_of(blk, 3), graph_of(blk, 3)};
  input.x = x;
  torch::optim::Adam opt((*model)->impl().parameters(), torch::optim::AdamOptions(0.03));
  double first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    opt.zero_grad();
    auto logits = forward_checked(**model, input);
    REQUIRE(logits.is_ok());
    // Trained on the first n_train nodes, tested on the others.
    auto loss = torch::nn::functional::cross_entropy(logits->narrow(0, 0, n_train), y.narrow(0, 0, n_train));
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  torch::NoGradGuard no_grad;
  const auto logits = forward_checked(**model, input);
  REQUIRE(logits.is_ok());
  const double acc =
      (logits->narrow(0, n_train, n - n_train).argmax(1) == y.narrow(0, n_train, n - n_train))
          .to(torch::kFloat64)
          .mean()
          .item<double>();
  INFO("loss " << first << " -> " << last << ", held-out accuracy " << acc);
  CHECK(last < 0.2 * first);
  CHECK(acc > 0.85);
}

TEST_CASE("rgcn config and block errors") {
  CHECK(builtin_model_file("rgcn", 2).is_ok());
  auto info = builtin_model_info("rgcn");
  REQUIRE(info.is_ok());
  CHECK(info->uses_edge_types);
  CHECK_FALSE(builtin_model_info("sage")->uses_edge_types);
  auto unknown = builtin_model_file("hgt", 2);
  REQUIRE_FALSE(unknown.is_ok());
  CHECK(unknown.status().message().find("rgcn") != std::string::npos);

  ModelConfig mc;
  mc.kind = "rgcn";
  mc.in_dim = 4;
  mc.num_classes = 3;
  auto bad = Model::create(mc);  // no relations
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("num_rels must be >= 1"));
  mc.num_rels = 3;
  mc.num_bases = -1;
  auto st = validate_model_config(mc);
  CHECK(st.message().find("--num-bases must be >= 0") != std::string::npos);
  mc.num_bases = 2;
  REQUIRE(validate_model_config(mc).is_ok());

  auto model = Model::create(mc);
  REQUIRE(model.is_ok());
  st = (*model)->save_torchscript("/nonexistent/rgcn.pt");
  CHECK_FALSE(st.is_ok());
  CHECK(st.message().find("/nonexistent/rgcn.pt") != std::string::npos);

  Block typed = random_typed_block(6, 10, 4, {0, 1, 2}, 4);
  REQUIRE(typed.etypes.size() > 1);
  Block plain = typed;
  plain.etypes.clear();
  Block edgeless = random_typed_block(6, 6, 0, {0}, 4);  // no edges, no types
  REQUIRE(edgeless.etypes.empty());

  auto run = [&](const Block& b0, const Block& b1, int64_t num_etypes) {
    ModelInput in;
    in.blocks = {graph_of(b0, num_etypes), graph_of(b1, num_etypes)};
    in.x = torch::randn({b0.num_src(), 4});
    return forward_checked(**model, in);
  };
  Block top = random_typed_block(3, 6, 3, {0, 2}, 8);
  REQUIRE(run(typed, top, 3).is_ok());
  auto r = run(plain, top, 0);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("the block has no edge types") != std::string::npos);
  // An edgeless block needs no types (only the self loop runs); with the
  // relation count given it has (empty) types anyway.
  Block top6 = random_typed_block(6, 6, 3, {1}, 9);
  CHECK(run(edgeless, top6, 0).is_ok());
  CHECK(run(edgeless, top6, 3).is_ok());
  CHECK(graph_of(edgeless, 3)->has_etypes());
  // A type past the model's relations.
  Block many = typed;
  many.etypes[0] = 5;
  r = run(many, top, 0);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("6 edge types but the layer has 3 relations") != std::string::npos);
}
