#include "common/sampling/multi_layer_sampler.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/random.h"
#include "common/sampling/thread_pool.h"
#include "tests/sampling/block_checks.h"
#include "tests/sampling/test_graphs.h"

using namespace dgld;
using dgld::test::OwnedGraph;

namespace {

std::vector<int64_t> random_seeds(int64_t n, size_t count, uint64_t seed) {
  std::vector<int64_t> ids = dgld::test::iota_ids(n);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
  ids.resize(count);
  return ids;
}

MiniBatch sample_ok(const MultiLayerNeighborSampler& sampler, NeighborSource& source,
                    const std::vector<int64_t>& seeds, uint64_t rng_seed) {
  Result<MiniBatch> r = sampler.sample(source, seeds, rng_seed);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

bool same_blocks(const MiniBatch& a, const MiniBatch& b) {
  if (a.blocks.size() != b.blocks.size()) return false;
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    const Block &x = a.blocks[i], &y = b.blocks[i];
    if (x.src_nodes != y.src_nodes || x.dst_nodes != y.dst_nodes || x.indptr != y.indptr ||
        x.indices != y.indices || x.eids != y.eids)
      return false;
  }
  return a.input_nodes == b.input_nodes && a.seeds == b.seeds;
}

class FailingSource final : public NeighborSource {
 public:
  Result<SampledEdges> sample(std::span<const int64_t>, const SampleOptions&) override {
    return io_error("server 1 unreachable");
  }
};

}  // namespace

TEST_CASE("multi-layer sampler: layers chain and follow DGL's fanout order", "[sampler]") {
  const OwnedGraph g = dgld::test::random_graph(3000, 40, 31);
  LocalGraphSource source(g.view());
  const auto table = dgld::test::edge_table(g);
  const std::vector<int64_t> fanouts = {3, 7};
  const MultiLayerNeighborSampler sampler(fanouts);
  const std::vector<int64_t> seeds = random_seeds(3000, 200, 1);
  const MiniBatch mb = sample_ok(sampler, source, seeds, 2024);

  REQUIRE(mb.blocks.size() == 2);
  CHECK(mb.seeds == seeds);
  CHECK(mb.blocks.back().dst_nodes == seeds);
  CHECK(mb.input_nodes == mb.blocks[0].src_nodes);
  CHECK(mb.blocks[0].dst_nodes == mb.blocks[1].src_nodes);
  for (size_t layer = 0; layer < 2; ++layer) {
    const Block& b = mb.blocks[layer];
    // The block is exactly the sample of its dst nodes with this layer's options.
    const SampleOptions opt{.fanout = fanouts[layer], .rng_seed = derive_seed(2024, layer)};
    Result<SampledEdges> edges = sample_neighbors(g.view(), b.dst_nodes, opt);
    REQUIRE(edges.is_ok());
    dgld::test::check_block(b, b.dst_nodes, *edges);
    for (int64_t d = 0; d < b.num_dst(); ++d) {
      const int64_t v = b.dst_nodes[d];
      const int64_t degree = g.indptr[v + 1] - g.indptr[v];
      REQUIRE(b.indptr[d + 1] - b.indptr[d] == std::min(fanouts[layer], degree));
      std::set<int64_t> eids;
      for (int64_t j = b.indptr[d]; j < b.indptr[d + 1]; ++j) {
        const auto it = table.find(b.eids[j]);
        REQUIRE(it != table.end());
        REQUIRE(it->second.first == b.src_nodes[b.indices[j]]);
        REQUIRE(it->second.second == v);
        REQUIRE(eids.insert(b.eids[j]).second);
      }
    }
  }
}

TEST_CASE("multi-layer sampler: three layers, replacement and full neighbourhoods", "[sampler]") {
  const OwnedGraph g = dgld::test::random_graph(1000, 12, 41);
  LocalGraphSource source(g.view());
  const std::vector<int64_t> seeds = random_seeds(1000, 50, 2);
  SECTION("with replacement") {
    const MiniBatch mb = sample_ok(MultiLayerNeighborSampler({2, 3, 4}, true), source, seeds, 9);
    REQUIRE(mb.blocks.size() == 3);
    for (size_t i = 0; i + 1 < mb.blocks.size(); ++i)
      CHECK(mb.blocks[i].dst_nodes == mb.blocks[i + 1].src_nodes);
    for (size_t layer = 0; layer < 3; ++layer) {
      const Block& b = mb.blocks[layer];
      for (int64_t d = 0; d < b.num_dst(); ++d) {
        const int64_t v = b.dst_nodes[d];
        const int64_t want = g.indptr[v + 1] == g.indptr[v] ? 0 : int64_t(layer) + 2;
        REQUIRE(b.indptr[d + 1] - b.indptr[d] == want);
      }
    }
  }
  SECTION("fanout -1 takes every in-edge") {
    const MiniBatch mb = sample_ok(MultiLayerNeighborSampler({-1}), source, seeds, 9);
    const Block& b = mb.blocks[0];
    for (int64_t d = 0; d < b.num_dst(); ++d) {
      const int64_t v = b.dst_nodes[d];
      std::vector<int64_t> want(g.eids.begin() + g.indptr[v], g.eids.begin() + g.indptr[v + 1]);
      std::vector<int64_t> got(b.eids.begin() + b.indptr[d], b.eids.begin() + b.indptr[d + 1]);
      REQUIRE(got == want);
    }
  }
}

TEST_CASE("multi-layer sampler: reproducible, pool-independent, seed-sensitive", "[sampler]") {
  const OwnedGraph g = dgld::test::random_graph(4000, 50, 51);
  const std::vector<float> w(g.indices.size(), 1.0f);
  ThreadPool pool(2);
  LocalGraphSource plain(g.view());
  LocalGraphSource pooled(g.view(), {.pool = &pool});
  LocalGraphSource weighted(g.view(), {.weights = w});
  const MultiLayerNeighborSampler sampler({10, 25});
  const std::vector<int64_t> seeds = random_seeds(4000, 300, 3);
  const MiniBatch a = sample_ok(sampler, plain, seeds, 77);
  CHECK(same_blocks(a, sample_ok(sampler, plain, seeds, 77)));
  CHECK(same_blocks(a, sample_ok(sampler, pooled, seeds, 77)));
  CHECK_FALSE(same_blocks(a, sample_ok(sampler, plain, seeds, 78)));
  const MiniBatch wa = sample_ok(sampler, weighted, seeds, 77);
  CHECK(same_blocks(wa, sample_ok(sampler, weighted, seeds, 77)));
}

TEST_CASE("LocalGraphSource over a partition matches the whole graph", "[sampler]") {
  const OwnedGraph g = dgld::test::random_graph(2000, 30, 61);
  // Partition: owned global rows [600, 1400) become local rows 0..799; their
  // in-neighbours outside that range (halo) get local ids after them.
  const int64_t first = 600, last = 1400;
  std::vector<int64_t> local_to_global = dgld::test::iota_ids(last - first, first);
  std::vector<int64_t> halo_local(2000, -1);
  OwnedGraph part;
  part.indptr.push_back(0);
  for (int64_t v = first; v < last; ++v) {
    for (int64_t p = g.indptr[v]; p < g.indptr[v + 1]; ++p) {
      const int64_t u = g.indices[p];
      int64_t local = u - first;
      if (u < first || u >= last) {
        if (halo_local[u] < 0) {
          halo_local[u] = int64_t(local_to_global.size());
          local_to_global.push_back(u);
        }
        local = halo_local[u];
      }
      part.indices.push_back(local);
      part.eids.push_back(g.eids[p]);
    }
    part.indptr.push_back(int64_t(part.indices.size()));
  }
  const auto to_local = [&](int64_t gid) { return gid >= first && gid < last ? gid - first : -1; };
  LocalGraphSource partition(part.view(), local_to_global, to_local);
  LocalGraphSource whole(g.view());

  const std::vector<int64_t> seeds = {600, 1399, 1000, 777, 1234};
  for (const bool replace : {false, true}) {
    const SampleOptions opt{.fanout = 5, .replace = replace, .rng_seed = 8};
    Result<SampledEdges> a = partition.sample(seeds, opt);
    Result<SampledEdges> b = whole.sample(seeds, opt);
    REQUIRE(a.is_ok());
    REQUIRE(b.is_ok());
    CHECK(a->src == b->src);
    CHECK(a->dst == b->dst);
    CHECK(a->eid == b->eid);
  }
  const std::vector<int64_t> foreign = {600, 5};
  Result<SampledEdges> bad = partition.sample(foreign, {.fanout = 5});
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == StatusCode::invalid_argument);
  CHECK(bad.status().message().find("seed 5 is not a node of this partition") != std::string::npos);
}

TEST_CASE("multi-layer sampler: errors", "[sampler]") {
  const OwnedGraph g = dgld::test::random_graph(100, 5, 71);
  LocalGraphSource source(g.view());
  const std::vector<int64_t> seeds = {1, 2, 3};
  auto error_of = [&](const MultiLayerNeighborSampler& s, NeighborSource& src,
                      const std::vector<int64_t>& batch) {
    Result<MiniBatch> r = s.sample(src, batch, 1);
    REQUIRE_FALSE(r.is_ok());
    return r.status();
  };
  CHECK(error_of(MultiLayerNeighborSampler(std::vector<int64_t>{}), source, seeds).code() ==
        StatusCode::invalid_argument);
  const Status bad_fanout = error_of(MultiLayerNeighborSampler({5, -3}), source, seeds);
  CHECK(bad_fanout.code() == StatusCode::invalid_argument);
  CHECK(bad_fanout.message().find("fanout -3 of layer 1") != std::string::npos);
  const Status dup = error_of(MultiLayerNeighborSampler({2, 2}), source, {1, 2, 1});
  CHECK(dup.code() == StatusCode::invalid_argument);
  CHECK(dup.message().find("layer 1") != std::string::npos);
  const Status range = error_of(MultiLayerNeighborSampler({2}), source, {1, 100});
  CHECK(range.message().find("seed 100 outside the node range [0, 100)") != std::string::npos);
  FailingSource failing;
  const Status io = error_of(MultiLayerNeighborSampler({2, 2}), failing, seeds);
  CHECK(io.code() == StatusCode::io_error);
  CHECK(io.message() == "layer 1: server 1 unreachable");
}
