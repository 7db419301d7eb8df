#include "common/sampling/block.h"

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/sampling/block_checks.h"

using namespace dgld;

TEST_CASE("build_block: hand-built", "[block]") {
  const std::vector<int64_t> dst = {50, 10};
  SampledEdges e;
  e.src = {10, 70, 50, 70, 30};
  e.dst = {50, 50, 10, 10, 10};
  e.eid = {1, 2, 3, 4, 5};
  Result<Block> r = build_block(dst, e);
  REQUIRE(r.is_ok());
  const Block& b = *r;
  CHECK(b.dst_nodes == std::vector<int64_t>{50, 10});
  CHECK(b.src_nodes == std::vector<int64_t>{50, 10, 70, 30});
  CHECK(b.indptr == std::vector<int64_t>{0, 2, 5});
  CHECK(b.indices == std::vector<int64_t>{1, 2, 0, 2, 3});
  CHECK(b.eids == std::vector<int64_t>{1, 2, 3, 4, 5});
  dgld::test::check_block(b, dst, e);
}

TEST_CASE("build_block: edges not grouped by dst are grouped, order kept", "[block]") {
  const std::vector<int64_t> dst = {1, 2, 3};
  SampledEdges e;
  e.src = {9, 8, 9, 7, 1, 8};
  e.dst = {3, 1, 1, 3, 2, 3};
  e.eid = {10, 11, 12, 13, 14, 15};
  Result<Block> r = build_block(dst, e);
  REQUIRE(r.is_ok());
  CHECK(r->src_nodes == std::vector<int64_t>{1, 2, 3, 9, 8, 7});
  CHECK(r->indptr == std::vector<int64_t>{0, 2, 3, 6});
  CHECK(r->eids == std::vector<int64_t>{11, 12, 14, 10, 13, 15});
  CHECK(r->indices == std::vector<int64_t>{4, 3, 0, 3, 5, 4});
  dgld::test::check_block(*r, dst, e);
}

TEST_CASE("build_block: empty inputs and isolated dst nodes", "[block]") {
  Result<Block> none = build_block({}, SampledEdges{});
  REQUIRE(none.is_ok());
  CHECK(none->indptr == std::vector<int64_t>{0});
  CHECK(none->num_src() == 0);
  const std::vector<int64_t> dst = {-5, 4};
  Result<Block> iso = build_block(dst, SampledEdges{});
  REQUIRE(iso.is_ok());
  CHECK(iso->src_nodes == dst);
  CHECK(iso->indptr == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("build_block: errors", "[block]") {
  SampledEdges e;
  e.src = {1};
  e.dst = {2};
  e.eid = {3};
  const std::vector<int64_t> twice = {2, 2};
  Result<Block> dup = build_block(twice, e);
  REQUIRE_FALSE(dup.is_ok());
  CHECK(dup.status().code() == StatusCode::invalid_argument);
  CHECK(dup.status().message().find("dst node 2 appears twice") != std::string::npos);

  const std::vector<int64_t> other = {5};
  Result<Block> stray = build_block(other, e);
  REQUIRE_FALSE(stray.is_ok());
  CHECK(stray.status().message().find("edge 3 has dst 2") != std::string::npos);

  e.src.push_back(4);
  Result<Block> ragged = build_block(twice, e);
  REQUIRE_FALSE(ragged.is_ok());
  CHECK(ragged.status().code() == StatusCode::invalid_argument);
}

TEST_CASE("build_block: random edges", "[block]") {
  std::mt19937_64 rng(21);
  for (int round = 0; round < 20; ++round) {
    std::vector<int64_t> dst;
    std::set<int64_t> used;
    while (dst.size() < 300) {
      const int64_t v = int64_t(rng() % 5000) - 2500;
      if (used.insert(v).second) dst.push_back(v);
    }
    SampledEdges e;
    const bool grouped = round % 2 == 0;
    for (int i = 0; i < 3000; ++i) {
      e.dst.push_back(grouped ? dst[i / 10] : dst[rng() % dst.size()]);
      e.src.push_back(int64_t(rng() % 5000) - 2500);
      e.eid.push_back(i * 3 + 1);
    }
    Result<Block> r = build_block(dst, e);
    REQUIRE(r.is_ok());
    dgld::test::check_block(*r, dst, e);
    // With a node id range (the ids in [0, 2500) looked up by array, the
    // negative ones still hashed): the same block.
    Result<Block> ranged = build_block(dst, e, 2500);
    REQUIRE(ranged.is_ok());
    CHECK(ranged->src_nodes == r->src_nodes);
    CHECK(ranged->indptr == r->indptr);
    CHECK(ranged->indices == r->indices);
    CHECK(ranged->eids == r->eids);
  }
}

TEST_CASE("build_block: edges handed over are relabelled in place when grouped, kept when not", "[block]") {
  std::mt19937_64 rng(5);
  for (const bool grouped : {true, false}) {
    std::vector<int64_t> dst;
    for (int64_t v = 0; v < 200; ++v) dst.push_back(v * 7 % 200);
    SampledEdges e;
    for (int i = 0; i < 2000; ++i) {
      e.dst.push_back(grouped ? dst[i / 10] : dst[rng() % dst.size()]);
      e.src.push_back(int64_t(rng() % 1000));
      e.eid.push_back(i);
      e.etype.push_back(i % 3);
    }
    const SampledEdges given = e;
    Result<Block> ref = build_block(dst, given, 1000);
    REQUIRE(ref.is_ok());
    const int64_t* src_data = e.src.data();
    Result<Block> moved = build_block(dst, std::move(e), 1000);
    REQUIRE(moved.is_ok());
    CHECK(moved->src_nodes == ref->src_nodes);
    CHECK(moved->indptr == ref->indptr);
    CHECK(moved->indices == ref->indices);
    CHECK(moved->eids == ref->eids);
    CHECK(moved->etypes == ref->etypes);
    dgld::test::check_block(*moved, dst, given);
    if (grouped) {
      CHECK(moved->indices.data() == src_data);  // the sampled array, not a copy
      CHECK(e.src.empty());
      CHECK(e.dst.empty());
    } else {
      CHECK(e.src == given.src);
      CHECK(e.dst == given.dst);
      CHECK(e.eid == given.eid);
    }
  }
  // An error leaves the edges as they were.
  SampledEdges bad;
  bad.src = {1, 2};
  bad.dst = {0, 9};
  bad.eid = {5, 6};
  const SampledEdges before = bad;
  const std::vector<int64_t> only0 = {0};
  Result<Block> r = build_block(only0, std::move(bad));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("edge 6 has dst 9") != std::string::npos);
  CHECK(bad.src == before.src);
  CHECK(bad.dst == before.dst);
}
