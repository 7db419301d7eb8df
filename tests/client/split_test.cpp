// node_split / edge_split against hand-computed cases and DGL's own numbers
// (numpy's legacy permutation, DGL's _split_random_within_part and
// _split_by_trainer_id, run on the same inputs).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "client/split.h"

using namespace dgld;
using namespace dgld::client;
using V = std::vector<int64_t>;

namespace {

RangePartitionBook book_of(std::vector<IdRange> nodes) {
  std::vector<IdRange> edges = nodes;  // same ranges for edge_split cases
  return RangePartitionBook(std::move(nodes), std::move(edges));
}

std::vector<uint8_t> mask_of(int64_t n, const std::set<int64_t>& on) {
  std::vector<uint8_t> m(static_cast<size_t>(n), 0);
  for (int64_t i : on) m[static_cast<size_t>(i)] = 1;
  return m;
}

V split_ok(std::span<const uint8_t> mask, const RangePartitionBook& book, SplitRank who,
           SplitOptions opt = {}) {
  auto r = node_split(mask, book, who, opt);
  REQUIRE(r.is_ok());
  return *r;
}

// The 60-node case the DGL reference ran: two partitions of 30, mask (7i % 3 != 0).
std::vector<uint8_t> mask60() {
  std::vector<uint8_t> m(60);
  for (int i = 0; i < 60; ++i) m[i] = (i * 7) % 3 != 0;
  return m;
}

}  // namespace

TEST_CASE("split: numpy's legacy permutation, bit for bit") {
  // np.random.seed(s); np.random.permutation(n)
  CHECK(numpy_permutation(10, 0) == V{2, 8, 4, 9, 1, 6, 7, 3, 0, 5});
  CHECK(numpy_permutation(7, 1) == V{6, 2, 1, 0, 4, 3, 5});
  CHECK(numpy_permutation(20, 3) ==
        V{14, 2, 1, 17, 4, 16, 6, 7, 15, 12, 9, 11, 19, 18, 13, 5, 0, 8, 3, 10});
  CHECK(numpy_permutation(1, 5) == V{0});
  CHECK(numpy_permutation(0, 5).empty());
}

TEST_CASE("split: even offsets give the first n % k pieces one more") {
  CHECK(even_offsets(10, 3) == V{0, 4, 7, 10});
  CHECK(even_offsets(11, 3) == V{0, 4, 8, 11});
  CHECK(even_offsets(9, 3) == V{0, 3, 6, 9});
  CHECK(even_offsets(2, 4) == V{0, 1, 2, 2, 2});
}

TEST_CASE("split: force_even cuts the sorted true ids into P slices, remainder first") {
  auto book = book_of({{0, 4}, {4, 8}, {8, 12}});
  auto mask = mask_of(12, {0, 1, 2, 3, 4, 5, 6, 9, 10, 11});  // 10 ids, 3 partitions: 4, 3, 3
  CHECK(split_ok(mask, book, {0, 0, 3}) == V{0, 1, 2, 3});
  CHECK(split_ok(mask, book, {1, 1, 3}) == V{4, 5, 6});
  CHECK(split_ok(mask, book, {2, 2, 3}) == V{9, 10, 11});
}

TEST_CASE("split: force_even slices ignore ownership when the mask is uneven") {
  auto book = book_of({{0, 5}, {5, 10}});
  auto mask = mask_of(10, {0, 1, 2, 3, 4, 5, 9});  // 7 ids: 4 then 3
  CHECK(split_ok(mask, book, {0, 0, 2}) == V{0, 1, 2, 3});
  CHECK(split_ok(mask, book, {1, 1, 2}) == V{4, 5, 9});
}

TEST_CASE("split: several trainers per machine permute their slice with seed p (DGL's numbers)") {
  auto book = book_of({{0, 30}, {30, 60}});
  auto mask = mask60();
  CHECK(split_ok(mask, book, {0, 0, 4}) == V{2, 4, 7, 10, 13, 16, 20, 26, 28, 29});
  CHECK(split_ok(mask, book, {0, 1, 4}) == V{1, 5, 8, 11, 14, 17, 19, 22, 23, 25});
  CHECK(split_ok(mask, book, {1, 2, 4}) == V{32, 34, 35, 37, 40, 41, 46, 52, 55, 56});
  CHECK(split_ok(mask, book, {1, 3, 4}) == V{31, 38, 43, 44, 47, 49, 50, 53, 58, 59});
  // Disjoint and complete.
  std::set<int64_t> all;
  size_t total = 0;
  for (int r = 0; r < 4; ++r) {
    auto s = split_ok(mask, book, {r / 2, r, 4});
    total += s.size();
    all.insert(s.begin(), s.end());
  }
  CHECK(total == 40);
  CHECK(all.size() == 40);
}

TEST_CASE("split: trainer ids from hierarchical partitioning (DGL's _split_by_trainer_id)") {
  auto book = book_of({{0, 30}, {30, 60}});
  auto mask = mask60();
  V tid(60);
  for (int i = 0; i < 60; ++i) tid[i] = (i / 7) % 4;
  SplitOptions opt{true, tid};
  CHECK(split_ok(mask, book, {0, 0, 4}, opt) == V{1, 2, 4, 5, 28, 29, 14, 16, 17, 19, 20});
  CHECK(split_ok(mask, book, {0, 1, 4}, opt) == V{7, 8, 10, 11, 13, 22, 23, 25, 26});
  CHECK(split_ok(mask, book, {1, 2, 4}, opt) == V{43, 44, 46, 47, 49, 31, 32, 34, 35, 37, 38});
  CHECK(split_ok(mask, book, {1, 3, 4}, opt) == V{50, 52, 53, 55, 40, 41, 56, 58, 59});
  // Partitioned for 8 trainers, run with 4: ids are scaled down by 2.
  V tid8(60);
  for (int i = 0; i < 60; ++i) tid8[i] = (i / 5) % 8;
  CHECK(split_ok(mask, book, {1, 3, 4}, SplitOptions{true, tid8}) ==
        V{35, 37, 38, 50, 52, 53, 55, 56, 58, 59});
}

TEST_CASE("split: without force_even each trainer takes a contiguous piece of its machine's ids") {
  auto book = book_of({{0, 30}, {30, 60}});
  auto mask = mask60();
  SplitOptions local{false, {}};
  CHECK(split_ok(mask, book, {1, 3, 6}, local) == V{31, 32, 34, 35, 37, 38});
  CHECK(split_ok(mask, book, {1, 4, 6}, local) == V{40, 41, 43, 44, 46, 47});
  CHECK(split_ok(mask, book, {1, 5, 6}, local) ==
        V{49, 50, 52, 53, 55, 56, 58, 59});  // last takes the rest
  auto one = split_ok(mask, book, {0, 0, 2}, local);
  CHECK(one.size() == 20);
  CHECK(std::all_of(one.begin(), one.end(), [](int64_t v) { return v < 30; }));
  // With trainer ids: those whose trainer matches the caller's position on the machine.
  V tid(60);
  for (int i = 0; i < 60; ++i) tid[i] = (i < 30 ? 0 : 2) + i % 2;
  auto mine = split_ok(mask, book, {1, 3, 4}, SplitOptions{false, tid});
  CHECK(mine == V{31, 35, 37, 41, 43, 47, 49, 53, 55, 59});
}

TEST_CASE("split: edge_split uses the edge ranges; a mask function works too") {
  RangePartitionBook book({{0, 2}, {2, 4}}, {{0, 6}, {6, 10}});
  auto r =
      edge_split([](int64_t e) { return e % 2 == 1; }, book, {1, 1, 2});  // 1 3 5 7 9: 3 then 2
  REQUIRE(r.is_ok());
  CHECK(*r == V{7, 9});
  auto l = edge_split([](int64_t e) { return e % 2 == 1; }, book, {1, 1, 2}, {false, {}});
  REQUIRE(l.is_ok());
  CHECK(*l == V{7, 9});
  auto n = node_split([](int64_t) { return true; }, book, {0, 0, 2});
  REQUIRE(n.is_ok());
  CHECK(*n == V{0, 1});
}

TEST_CASE("split: bad inputs are errors, not asserts") {
  auto book = book_of({{0, 5}, {5, 10}});
  auto mask = mask_of(10, {1});
  CHECK(node_split(mask, book, {0, 0, 3}).status().code() ==
        StatusCode::invalid_argument);  // 3 % 2 != 0
  CHECK(node_split(mask, book, {0, 4, 4}).status().code() ==
        StatusCode::invalid_argument);  // rank out of range
  CHECK(node_split(mask, book, {2, 0, 2}).status().code() ==
        StatusCode::invalid_argument);  // no partition 2
  auto short_mask = mask_of(9, {1});
  auto r = node_split(short_mask, book, {0, 0, 2});
  CHECK(r.status().code() == StatusCode::invalid_argument);
  CHECK(r.status().message().find("9 entries") != std::string::npos);
  V tid(10, 0);
  tid[0] = 4;  // max 5 is not a multiple of 4 trainers
  CHECK(node_split(mask_of(10, {1, 2}), book, {0, 0, 4}, {true, tid}).status().code() ==
        StatusCode::invalid_argument);
}
