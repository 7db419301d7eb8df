// Layer unit tests on a hand-built block: exact aggregation values, zero-degree
// dst nodes (the built-in models' layers, dgld.nn's code scripted at build
// time, fused and reference kernels), and the shape checks of the forward
// pass. Also the feature tensor that takes a batch's rows over (adopt_rows).
#include "daemons/trainer_host/model_impl.h"
#include "daemons/trainer_host/training_loop.h"

#include <catch2/catch.hpp>
#include <torch/script.h>
#include <cmath>
#include <memory>
#include <vector>

#include "common/buffer_pool.h"

using namespace dgld;
using namespace dgld::trainer;

namespace {

// dst {10, 11, 12}; src {10, 11, 12, 13}.
// dst 0 <- src 1, src 3;  dst 1 <- src 0;  dst 2: no in-edges.
Block small_block() {
  Block b;
  b.dst_nodes = {10, 11, 12};
  b.src_nodes = {10, 11, 12, 13};
  b.indptr = {0, 2, 3, 3};
  b.indices = {1, 3, 0};
  b.eids = {100, 101, 102};
  return b;
}

torch::Tensor h_src4() { return torch::tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f}).view({4, 2}); }

void expect_rows(const torch::Tensor& t, const std::vector<std::vector<float>>& want) {
  REQUIRE(t.dim() == 2);
  REQUIRE(t.size(0) == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    REQUIRE(t.size(1) == static_cast<int64_t>(want[i].size()));
    for (size_t j = 0; j < want[i].size(); ++j) {
      INFO("row " << i << " col " << j);
      CHECK(t[i][j].item<float>() == Approx(want[i][j]).margin(1e-5));
    }
  }
}

ops::BlockGraphPtr tensors(const Block& b) {
  auto t = make_block_graph(b);
  REQUIRE(t.is_ok());
  return std::move(t).value();
}

// Every layer test runs with the fused kernels and with their reference.
Kernels any_kernels() { return GENERATE(Kernels::fused, Kernels::reference); }

}  // namespace

TEST_CASE("a block graph lists each edge with its dst, the degrees and the transpose") {
  auto t = tensors(small_block());
  CHECK(t->num_src_nodes() == 4);
  CHECK(t->num_dst_nodes() == 3);
  CHECK(t->num_edges() == 3);
  CHECK(torch::equal(t->indices(), torch::tensor({1, 3, 0}, torch::kInt64)));
  CHECK(torch::equal(t->edge_dst(), torch::tensor({0, 0, 1}, torch::kInt64)));
  CHECK(torch::equal(t->in_degrees(), torch::tensor({2, 1, 0}, torch::kInt64)));
  CHECK(torch::equal(t->out_degrees(), torch::tensor({1, 1, 0, 1}, torch::kInt64)));
  const auto& r = t->reverse();
  CHECK(torch::equal(r.rev_indptr, torch::tensor({0, 1, 2, 2, 3}, torch::kInt64)));
  CHECK(torch::equal(r.rev_dst, torch::tensor({1, 0, 0}, torch::kInt64)));
  CHECK(torch::equal(r.rev_eid, torch::tensor({2, 0, 1}, torch::kInt64)));
}

TEST_CASE("malformed blocks are rejected with a message") {
  Block b = small_block();
  b.indices[1] = 4;  // src index past num_src
  auto r = make_block_graph(b);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("src index 4") != std::string::npos);
  b = small_block();
  b.indptr = {0, 2, 3};
  CHECK_FALSE(make_block_graph(b).is_ok());
}

TEST_CASE("mean aggregation: exact values, zero-degree dst gives 0") {
  auto t = tensors(small_block());
  const bool reference = any_kernels() == Kernels::reference;
  auto agg = [&](ops::Reduce r, bool self_loop) {
    return reference ? ops::copy_u_reduce_reference(t, h_src4(), r, self_loop) : ops::copy_u_reduce(t, h_src4(), r, self_loop);
  };
  expect_rows(agg(ops::Reduce::sum, false), {{10, 12}, {1, 2}, {0, 0}});
  expect_rows(agg(ops::Reduce::mean, false), {{5, 6}, {1, 2}, {0, 0}});
  // With a self edge per dst (dst i is src i).
  expect_rows(agg(ops::Reduce::sum, true), {{11, 14}, {4, 6}, {5, 6}});
  expect_rows(agg(ops::Reduce::mean, true), {{11 / 3.f, 14 / 3.f}, {2, 3}, {5, 6}});
}

namespace {

// The first (only) conv of the built-in `kind`'s one-layer model, sized
// in -> out (heads for gat): the layer trainer-host runs, dgld.nn's code.
struct Conv {
  torch::jit::Module model, conv;
  Kernels kernels;
  Conv(const std::string& kind, int64_t in, int64_t out, int64_t heads, Kernels k) : kernels(k) {
    auto file = builtin_model_file(kind, 1);
    REQUIRE(file.is_ok());
    model = torch::jit::load(*file);
    model.run_method("configure", in, int64_t{4}, out, 0.0, heads, int64_t{0}, int64_t{0});
    model.eval();
    conv = model.attr("layers").toModule().attr("0").toModule();
  }
  void set(const std::string& name, const torch::Tensor& value) {
    for (const auto& p : conv.named_parameters()) {
      if (p.name == name) {
        torch::NoGradGuard g;
        REQUIRE(p.value.sizes() == value.sizes());
        p.value.copy_(value);
        return;
      }
    }
    FAIL("no parameter " << name);
  }
  torch::Tensor forward(const ops::BlockGraphPtr& b, const torch::Tensor& h) {
    ops::set_reference_kernels(kernels == Kernels::reference);
    auto out = conv.forward({c10::IValue(b), h}).toTensor();
    ops::set_reference_kernels(false);
    return out;
  }
};

}  // namespace

TEST_CASE("SAGEConv mean: W_self h_dst + W_neigh mean(h_src) + b") {
  auto t = tensors(small_block());
  Conv conv("sage", 2, 2, 1, any_kernels());
  conv.set("fc_self.weight", torch::eye(2));
  conv.set("fc_neigh.weight", 2 * torch::eye(2));
  conv.set("fc_self.bias", torch::tensor({0.5f, -0.5f}));  // DGL's SAGEConv: the bias is fc_self's
  // dst 0: (1,2) + 2*(5,6) + b;  dst 1: (3,4) + 2*(1,2) + b;  dst 2: (5,6) + 0 + b.
  expect_rows(conv.forward(t, h_src4()), {{11.5, 13.5}, {5.5, 7.5}, {5.5, 5.5}});

  SECTION("in > out applies W_neigh before aggregating, with the same result") {
    Conv narrow("sage", 2, 1, 1, conv.kernels);
    narrow.set("fc_self.weight", torch::tensor({{1.f, 1.f}}));
    narrow.set("fc_neigh.weight", torch::tensor({{1.f, -1.f}}));
    narrow.set("fc_self.bias", torch::ones({1}));
    // dst 0: 3 + (5-6) + 1;  dst 1: 7 + (1-2) + 1;  dst 2: 11 + 0 + 1.
    expect_rows(narrow.forward(t, h_src4()), {{3}, {7}, {12}});
  }
}

TEST_CASE("GraphConv norm both with a self edge per dst") {
  auto t = tensors(small_block());
  Conv conv("gcn", 2, 2, 1, any_kernels());
  conv.set("weight", torch::eye(2));
  conv.set("bias", torch::zeros({2}));
  // Edges with self edges: 1->0, 3->0, 0->0, 0->1, 1->1, 2->2.
  // d_out: src0 2, src1 2, src2 1, src3 1;  d_in: dst0 3, dst1 2, dst2 1.
  const float r2 = std::sqrt(2.f), r3 = std::sqrt(3.f);
  auto row = [&](float a, float b) { return std::vector<float>{a, b}; };
  expect_rows(conv.forward(t, h_src4()),
              {row((3 / r2 + 7 + 1 / r2) / r3, (4 / r2 + 8 + 2 / r2) / r3),
               row((1 / r2 + 3 / r2) / r2, (2 / r2 + 4 / r2) / r2),
               row(5, 6)});
}

TEST_CASE("GATConv: edge softmax over in-edges, zero-degree dst gets the bias") {
  auto t = tensors(small_block());
  Conv conv("gat", 2, 2, 1, any_kernels());
  conv.set("fc.weight", torch::eye(2));
  conv.set("attn_l", torch::zeros({1, 1, 2}));
  conv.set("attn_r", torch::zeros({1, 1, 2}));
  conv.set("bias", torch::tensor({0.25f, 0.75f}));
  SECTION("zero attention weights give the mean") {
    auto out = conv.forward(t, h_src4());
    REQUIRE(out.sizes() == torch::IntArrayRef({3, 1, 2}));
    expect_rows(out.squeeze(1), {{5.25, 6.75}, {1.25, 2.75}, {0.25, 0.75}});
  }
  SECTION("attention from the source's first feature") {
    conv.set("attn_l", torch::tensor({1.f, 0.f}).view({1, 1, 2}));
    // dst 0: scores 3 (src 1) and 7 (src 3), both positive so LeakyReLU keeps them.
    const float a1 = std::exp(3.f) / (std::exp(3.f) + std::exp(7.f)), a3 = 1 - a1;
    auto out = conv.forward(t, h_src4()).squeeze(1);
    expect_rows(out, {{a1 * 3 + a3 * 7 + 0.25f, a1 * 4 + a3 * 8 + 0.75f}, {1.25, 2.75}, {0.25, 0.75}});
  }
  SECTION("several heads") {
    Conv multi("gat", 2, 3, 4, conv.kernels);
    auto out = multi.forward(t, h_src4());
    CHECK(out.sizes() == torch::IntArrayRef({3, 4, 3}));
  }
}

TEST_CASE("forward checks the blocks against the model and trains end to end") {
  // Two layers: block 0 (4 src -> 3 dst, the small block), block 1 (3 src -> 2 dst).
  Block b1;
  b1.dst_nodes = {10, 11};
  b1.src_nodes = {10, 11, 12};
  b1.indptr = {0, 1, 3};
  b1.indices = {2, 0, 2};
  b1.eids = {1, 2, 3};
  MiniBatch batch;
  batch.blocks = {small_block(), b1};
  batch.seeds = b1.dst_nodes;
  batch.input_nodes = batch.blocks[0].src_nodes;
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6, 7, 8};

  auto input = make_model_input(batch, rows, 2);
  REQUIRE(input.is_ok());
  CHECK(torch::equal(input->x, h_src4()));
  CHECK_FALSE(make_model_input(batch, std::vector<float>(6), 2).is_ok());

  for (const char* kind : {"sage", "gcn", "gat"}) {
    INFO(kind);
    torch::manual_seed(0);
    ModelConfig mc{kind, 2, 4, 3, 2, 0.0, 2, any_kernels()};
    auto model = Model::create(mc);
    REQUIRE(model.is_ok());
    auto logits = forward_checked(**model, *input);
    REQUIRE(logits.is_ok());
    CHECK(logits->sizes() == torch::IntArrayRef({2, 3}));
    auto loss = torch::nn::functional::cross_entropy(*logits, torch::tensor({0, 2}, torch::kInt64));
    loss.backward();
    for (const auto& p : (*model)->impl().parameters()) CHECK(p.grad().defined());

    ModelConfig three = mc;
    three.num_layers = 3;
    auto deep = Model::create(three);
    REQUIRE(deep.is_ok());
    auto bad = forward_checked(**deep, *input);
    REQUIRE_FALSE(bad.is_ok());
    CHECK(bad.status().message().find("3 layers but the batch has 2 blocks") != std::string::npos);
  }
}

TEST_CASE("model config errors name the field") {
  CHECK(builtin_model_file("sage", 2).is_ok());
  CHECK(builtin_model_file("graphsage", 2).is_ok());
  auto bad = builtin_model_file("gin", 2);
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("unknown model 'gin' (known: gat, gcn, rgcn, sage)"));
  auto deep = builtin_model_file("sage", 9);
  REQUIRE_FALSE(deep.is_ok());
  CHECK_THAT(deep.status().message(), Catch::Contains("has 1, 2, 3, 4 layers") && Catch::Contains("--model-file"));
  ModelConfig mc{"sage", 0, 16, 7, 2, 0.5, 1};
  CHECK_FALSE(Model::create(mc).is_ok());
  mc.in_dim = 8;
  mc.dropout = 1.0;
  CHECK_FALSE(Model::create(mc).is_ok());
}

TEST_CASE("a batch's feature rows go back to their pool when the tensor is freed, empty ones too") {
  auto pool = std::make_shared<BufferPool>();
  {
    auto t = adopt_rows(std::vector<float>{1, 2, 3, 4, 5, 6}, pool, 2, 3);
    CHECK(t.size(0) == 2);
    CHECK(t.size(1) == 3);
    CHECK(t[1][2].item<float>() == 6);
    CHECK(pool->idle() == 0);
  }
  CHECK(pool->idle() == 1);
  // No input features (a learnable embedding replaces them): a vector that
  // never allocated, data() == nullptr. LibTorch never calls from_blob's
  // deleter for a null pointer; LeakSanitizer (the sanitizer build) found the
  // vector it would have freed leaked, once per batch.
  {
    auto t = adopt_rows(std::vector<float>{}, pool, 5, 0);
    CHECK(t.size(0) == 5);
    CHECK(t.size(1) == 0);
  }
  CHECK(pool->idle() == 1);
  // An empty buffer from the pool still has its storage: it goes back.
  {
    auto t = adopt_rows(pool->take(0), pool, 4, 0);
    CHECK(t.numel() == 0);
    CHECK(pool->idle() == 0);
  }
  CHECK(pool->idle() == 1);
}
