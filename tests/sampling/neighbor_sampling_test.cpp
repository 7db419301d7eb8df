#include "common/sampling/neighbor_sampling.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/sampling/thread_pool.h"
#include "tests/sampling/test_graphs.h"

using namespace dgld;
using dgld::test::OwnedGraph;

namespace {

SampledEdges sample_ok(const OwnedGraph& g, const std::vector<int64_t>& seeds,
                       const SampleOptions& opt, const SampleExtras& extras = {}) {
  Result<SampledEdges> r = sample_neighbors(g.view(), seeds, opt, extras);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

// Edges a seed should give under DGL's rules.
int64_t expected_count(const OwnedGraph& g, int64_t seed, const SampleOptions& opt,
                       const std::vector<float>& weights) {
  int64_t avail = 0;
  for (int64_t p = g.indptr[seed]; p < g.indptr[seed + 1]; ++p) {
    avail += weights.empty() || weights[p] > 0.0f;
  }
  if (avail == 0) return 0;
  if (opt.fanout == -1) return avail;
  return opt.replace ? opt.fanout : std::min(opt.fanout, avail);
}

// Every property sample_neighbors promises, checked on one output.
void check_sample(const OwnedGraph& g, const std::vector<int64_t>& seeds, const SampleOptions& opt,
                  const std::vector<float>& weights, const SampledEdges& out) {
  const auto table = dgld::test::edge_table(g);
  std::map<int64_t, int64_t> position_of_eid;
  for (size_t p = 0; p < g.eids.size(); ++p) position_of_eid[g.eids[p]] = int64_t(p);
  REQUIRE(out.src.size() == out.size());
  REQUIRE(out.dst.size() == out.size());
  size_t at = 0;
  for (const int64_t seed : seeds) {
    const int64_t want = expected_count(g, seed, opt, weights);
    std::set<int64_t> seen;
    for (int64_t k = 0; k < want; ++k, ++at) {
      REQUIRE(at < out.size());
      REQUIRE(out.dst[at] == seed);
      const auto it = table.find(out.eid[at]);
      REQUIRE(it != table.end());
      REQUIRE(it->second.first == out.src[at]);
      REQUIRE(it->second.second == seed);
      if (!weights.empty()) REQUIRE(weights[position_of_eid[out.eid[at]]] > 0.0f);
      const bool fresh = seen.insert(out.eid[at]).second;
      if (!opt.replace) REQUIRE(fresh);
    }
    if (!opt.replace && want == g.indptr[seed + 1] - g.indptr[seed]) {
      // Took everything: exactly the neighbourhood.
      REQUIRE(int64_t(seen.size()) == want);
    }
  }
  REQUIRE(at == out.size());
}

std::vector<float> random_weights(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> w(n);
  for (float& x : w) x = (rng() % 10 < 3) ? 0.0f : float(rng() % 1000) / 100.0f + 0.01f;
  return w;
}

// Hits per edge of row 0 (index eid - 1000) over `trials` samples with rng
// seeds 0, 1, ..., each required to give `fanout` distinct edges.
std::vector<int> hits_without_replacement(const OwnedGraph& g, int64_t fanout, int trials,
                                          const SampleExtras& ex = {}) {
  std::vector<int> hits(g.eids.size(), 0);
  for (int t = 0; t < trials; ++t) {
    const SampledEdges out = sample_ok(g, {0}, {.fanout = fanout, .rng_seed = uint64_t(t)}, ex);
    REQUIRE(int64_t(out.size()) == fanout);
    REQUIRE(std::set<int64_t>(out.eid.begin(), out.eid.end()).size() == out.size());
    for (const int64_t e : out.eid) ++hits[e - 1000];
  }
  return hits;
}

}  // namespace

TEST_CASE("sample_neighbors: hand-built graph", "[sampling]") {
  // In-edges: 0 <- {1,2,3,4}, 1 <- {0}, 2 <- {}, 3 <- {0, 1}.
  const OwnedGraph g =
      dgld::test::from_edges(5, {{1, 0}, {2, 0}, {3, 0}, {4, 0}, {0, 1}, {0, 3}, {1, 3}});

  SECTION("fanout -1 is the full neighbourhood, grouped by seed") {
    const SampledEdges out = sample_ok(g, {3, 2, 0, 1}, {.fanout = -1});
    CHECK(out.src == std::vector<int64_t>{0, 1, 1, 2, 3, 4, 0});
    CHECK(out.dst == std::vector<int64_t>{3, 3, 0, 0, 0, 0, 1});
    CHECK(out.eid == std::vector<int64_t>{1005, 1006, 1000, 1001, 1002, 1003, 1004});
  }
  SECTION("fanout >= degree without replacement takes all") {
    const SampledEdges out = sample_ok(g, {0, 3}, {.fanout = 4});
    CHECK(out.eid == std::vector<int64_t>{1000, 1001, 1002, 1003, 1005, 1006});
    CHECK(sample_ok(g, {0, 3}, {.fanout = 100}).eid == out.eid);
  }
  SECTION("fanout < degree picks distinct edges") {
    for (uint64_t s = 0; s < 50; ++s) {
      const SampledEdges out = sample_ok(g, {0}, {.fanout = 2, .rng_seed = s});
      REQUIRE(out.size() == 2);
      REQUIRE(out.eid[0] != out.eid[1]);
      check_sample(g, {0}, {.fanout = 2}, {}, out);
    }
  }
  SECTION("with replacement: exactly fanout draws") {
    const SampledEdges out = sample_ok(g, {1, 2, 3}, {.fanout = 6, .replace = true});
    REQUIRE(out.size() == 12);
    for (int i = 0; i < 6; ++i) CHECK(out.eid[i] == 1004);
    check_sample(g, {1, 2, 3}, {.fanout = 6, .replace = true}, {}, out);
  }
  SECTION("degree 0 and fanout 0 give nothing") {
    CHECK(sample_ok(g, {2, 4}, {.fanout = 5, .replace = true}).size() == 0);
    CHECK(sample_ok(g, {2, 4}, {.fanout = -1}).size() == 0);
    CHECK(sample_ok(g, {0, 3}, {.fanout = 0}).size() == 0);
    CHECK(sample_ok(g, {0, 3}, {.fanout = 0, .replace = true}).size() == 0);
    CHECK(sample_ok(g, {}, {.fanout = 3}).size() == 0);
  }
  SECTION("weights: zero-weight edges are never taken, even with fanout -1") {
    const std::vector<float> w = {0, 1, 0, 2, 0, 0, 5};
    const SampleExtras ex{.weights = w};
    CHECK(sample_ok(g, {0, 1, 3}, {.fanout = -1}, ex).eid == std::vector<int64_t>{1001, 1003, 1006});
    CHECK(sample_ok(g, {0, 1, 3}, {.fanout = 3}, ex).eid == std::vector<int64_t>{1001, 1003, 1006});
    const SampledEdges r = sample_ok(g, {0, 1, 3}, {.fanout = 3, .replace = true}, ex);
    CHECK(r.size() == 6);  // seed 1 has no positive edge
    check_sample(g, {0, 1, 3}, {.fanout = 3, .replace = true}, w, r);
  }
}

TEST_CASE("sample_neighbors: errors are invalid_argument and name the problem", "[sampling]") {
  const OwnedGraph g = dgld::test::from_edges(3, {{1, 0}, {2, 0}});
  auto fails_with = [&](const std::vector<int64_t>& seeds, const SampleOptions& opt,
                        const SampleExtras& ex, const std::string& text) {
    Result<SampledEdges> r = sample_neighbors(g.view(), seeds, opt, ex);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::invalid_argument);
    INFO(r.status().message());
    CHECK(r.status().message().find(text) != std::string::npos);
  };
  fails_with({0, 3}, {.fanout = 1}, {}, "seed 3 outside the node range [0, 3)");
  fails_with({-1}, {.fanout = 1}, {}, "seed -1 outside the node range [0, 3)");
  fails_with({0}, {.fanout = -2}, {}, "fanout -2");
  const std::vector<float> short_w = {1.0f};
  fails_with({0}, {.fanout = 1}, {.weights = short_w}, "1 entries for 2 edges");
  const std::vector<int64_t> keys = {1, 2};
  fails_with({0}, {.fanout = 1}, {.stream_keys = keys}, "2 entries for 1 seeds");
  const std::vector<float> neg = {1.0f, -0.5f};
  fails_with({1, 0}, {.fanout = 1}, {.weights = neg}, "edge 1001");
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
  fails_with({0}, {.fanout = 1}, {.weights = nan}, "edge 1000");
  const std::vector<float> inf = {std::numeric_limits<float>::infinity(), 1.0f};
  fails_with({0}, {.fanout = 1}, {.weights = inf}, "must be finite");
}

TEST_CASE("sample_neighbors: properties on random graphs", "[sampling]") {
  // Max degree 300 reaches every path: Floyd by scan, partial Fisher-Yates, Floyd by hash set.
  const OwnedGraph g = dgld::test::random_graph(400, 300, 11);
  const std::vector<float> w = random_weights(g.indices.size(), 12);
  std::vector<int64_t> seeds = dgld::test::iota_ids(400);
  std::shuffle(seeds.begin(), seeds.end(), std::mt19937_64(3));
  seeds.resize(250);
  for (const bool weighted : {false, true}) {
    for (const bool replace : {false, true}) {
      for (const int64_t fanout : {0, 1, 3, 10, 25, 40, 100, -1}) {
        DYNAMIC_SECTION("weighted " << weighted << " replace " << replace << " fanout " << fanout) {
          const SampleOptions opt{.fanout = fanout, .replace = replace, .rng_seed = 99};
          const std::vector<float> none;
          const SampleExtras ex{.weights = weighted ? std::span<const float>(w) : std::span<const float>()};
          const SampledEdges out = sample_ok(g, seeds, opt, ex);
          check_sample(g, seeds, opt, weighted ? w : none, out);
        }
      }
    }
  }
}

TEST_CASE("sample_neighbors: reproducible and thread-count independent", "[sampling]") {
  const OwnedGraph g = dgld::test::random_graph(5000, 60, 5);
  const std::vector<float> w = random_weights(g.indices.size(), 6);
  std::vector<int64_t> seeds = dgld::test::iota_ids(5000);
  std::shuffle(seeds.begin(), seeds.end(), std::mt19937_64(8));
  ThreadPool pool2(2), pool3(3);
  for (const bool weighted : {false, true}) {
    for (const bool replace : {false, true}) {
      const SampleOptions opt{.fanout = 10, .replace = replace, .rng_seed = 1234};
      SampleExtras ex{.weights = weighted ? std::span<const float>(w) : std::span<const float>()};
      const SampledEdges a = sample_ok(g, seeds, opt, ex);
      const SampledEdges b = sample_ok(g, seeds, opt, ex);
      ex.pool = &pool2;
      const SampledEdges c = sample_ok(g, seeds, opt, ex);
      ex.pool = &pool3;
      const SampledEdges d = sample_ok(g, seeds, opt, ex);
      CHECK(a.eid == b.eid);
      CHECK(a.eid == c.eid);
      CHECK(a.src == c.src);
      CHECK(a.dst == c.dst);
      CHECK(a.eid == d.eid);
      SampleOptions other = opt;
      other.rng_seed = 1235;
      ex.pool = nullptr;
      CHECK(sample_ok(g, seeds, other, ex).eid != a.eid);

      // A seed's edges do not depend on the other seeds in the call.
      const std::vector<int64_t> one = {seeds[17]};
      const SampledEdges alone = sample_ok(g, one, opt, ex);
      std::vector<int64_t> in_batch;
      for (size_t i = 0; i < a.size(); ++i)
        if (a.dst[i] == seeds[17]) in_batch.push_back(a.eid[i]);
      CHECK(alone.eid == in_batch);
    }
  }
}

TEST_CASE("sample_neighbors: stream keys decide the draws", "[sampling]") {
  // Two rows with the same neighbourhood and the same key draw the same positions.
  const OwnedGraph g = dgld::test::from_edges(
      2, {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}});
  const std::vector<int64_t> keys = {77, 77};
  const SampledEdges out = sample_ok(g, {0, 1}, {.fanout = 2, .rng_seed = 4}, {.stream_keys = keys});
  REQUIRE(out.size() == 4);
  CHECK(out.eid[2] - out.eid[0] == 5);
  CHECK(out.eid[3] - out.eid[1] == 5);
}

TEST_CASE("sample_neighbors: uniform without replacement on every path", "[sampling][stats]") {
  // One row per path: degree 10 fanout 3 (scan Floyd), 100/40 (Fisher-Yates), 1000/40 (hash Floyd).
  for (const auto& [degree, fanout] : {std::pair<int64_t, int64_t>{10, 3}, {100, 40}, {1000, 40}}) {
    std::vector<std::pair<int64_t, int64_t>> edges;
    for (int64_t i = 0; i < degree; ++i) edges.emplace_back(i, 0);
    const OwnedGraph g = dgld::test::from_edges(degree, edges);
    const int trials = 4000;
    const std::vector<int> hits = hits_without_replacement(g, fanout, trials);
    const double expect = double(trials) * fanout / degree;
    for (int64_t i = 0; i < degree; ++i) {
      INFO("degree " << degree << " edge " << i << " hits " << hits[i] << " expected " << expect);
      CHECK(hits[i] > 0.6 * expect);
      CHECK(hits[i] < 1.4 * expect);
    }
  }
}

TEST_CASE("sample_neighbors: weighted frequencies follow the weights", "[sampling][stats]") {
  const OwnedGraph g = dgld::test::from_edges(1, {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}});
  const std::vector<float> w = {1, 2, 3, 4, 0};
  const SampleExtras ex{.weights = w};
  SECTION("with replacement") {
    const SampledEdges out = sample_ok(g, {0}, {.fanout = 40000, .replace = true, .rng_seed = 5}, ex);
    std::vector<int> hits(5, 0);
    for (const int64_t e : out.eid) ++hits[e - 1000];
    CHECK(hits[4] == 0);
    for (int i = 0; i < 4; ++i) CHECK(std::abs(hits[i] / 40000.0 - w[i] / 10.0) < 0.02);
  }
  SECTION("without replacement, fanout 1 is exactly proportional") {
    const std::vector<int> hits = hits_without_replacement(g, 1, 20000, ex);
    CHECK(hits[4] == 0);
    for (int i = 0; i < 4; ++i) CHECK(std::abs(hits[i] / 20000.0 - w[i] / 10.0) < 0.02);
  }
  SECTION("without replacement, fanout 2: heavier edges more often, never twice") {
    const std::vector<int> hits = hits_without_replacement(g, 2, 10000, ex);
    CHECK(hits[4] == 0);
    CHECK(hits[0] < hits[1]);
    CHECK(hits[1] < hits[2]);
    CHECK(hits[2] < hits[3]);
  }
}

TEST_CASE("map_to_global", "[sampling]") {
  const std::vector<int64_t> table = {10, 20, 30};
  std::vector<int64_t> ids = {2, 0, 1, 2};
  REQUIRE(map_to_global(ids, table).is_ok());
  CHECK(ids == std::vector<int64_t>{30, 10, 20, 30});
  std::vector<int64_t> bad = {1, 3};
  const Status st = map_to_global(bad, table);
  CHECK(st.code() == StatusCode::invalid_argument);
  CHECK(st.message().find("local id 3") != std::string::npos);
}

TEST_CASE("thread_pool: every index once, exceptions reach the caller", "[sampling]") {
  ThreadPool pool(3);
  CHECK(pool.num_threads() == 3);
  std::vector<std::atomic<int>> seen(10007);
  for (int round = 0; round < 20; ++round) {
    pool.parallel_for(10007, 64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
    });
  }
  for (const auto& s : seen) REQUIRE(s.load() == 20);
  CHECK_THROWS_AS(pool.parallel_for(1000, 10,
                                    [](int64_t b, int64_t) {
                                      if (b == 500) throw std::runtime_error("boom");
                                    }),
                  std::runtime_error);
  int calls = 0;
  pool.parallel_for(5, 64, [&](int64_t b, int64_t e) { calls += int(e - b); });
  CHECK(calls == 5);
}

// A graph-server's sampling requests arrive on several I/O threads and share
// one pool: whoever finds the workers busy runs its loop alone, never waits
// on the other loop, and a loop started from inside a chunk runs inline.
TEST_CASE("thread_pool: concurrent and nested calls each cover every index once", "[sampling]") {
  ThreadPool pool(3);
  constexpr int64_t kN = 4099;
  std::vector<std::vector<std::atomic<int>>> seen(4);
  for (auto& v : seen) v = std::vector<std::atomic<int>>(kN);
  std::atomic<int64_t> nested{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        pool.parallel_for(kN, 64, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) seen[t][i].fetch_add(1);
          if (b == 0) pool.parallel_for(100, 10, [&](int64_t nb, int64_t ne) { nested += ne - nb; });
        });
      }
    });
  }
  for (auto& c : callers) c.join();
  for (const auto& v : seen) {
    for (const auto& s : v) REQUIRE(s.load() == 50);
  }
  CHECK(nested.load() == 4 * 50 * 100);
}

TEST_CASE("sample_neighbors: a huge fanout with replacement is refused, not allocated",
          "[sampling]") {
  const OwnedGraph g = dgld::test::from_edges(2, {{1, 0}, {0, 1}});
  Result<SampledEdges> r =
      sample_neighbors(g.view(), std::vector<int64_t>{0, 1}, {.fanout = std::numeric_limits<int64_t>::max(), .replace = true});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::resource_exhausted);
}
