#include "common/sampling/id_map.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <vector>

using dgld::IdMap;

namespace {
// Inserts id into the map and into ref (id -> index), checking that the map
// gives the index ref expects (the next one for a new id).
void insert_and_check(IdMap& map, std::unordered_map<int64_t, int32_t>& ref, int64_t id) {
  const auto [index, inserted] = map.insert_or_find(id);
  const auto it = ref.find(id);
  if (it == ref.end()) {
    REQUIRE(inserted);
    REQUIRE(index == int32_t(ref.size()));
    ref.emplace(id, index);
  } else {
    REQUIRE_FALSE(inserted);
    REQUIRE(index == it->second);
  }
}
}  // namespace

TEST_CASE("id_map: indices follow insertion order", "[id_map]") {
  IdMap map;
  CHECK(map.empty());
  CHECK(map.find(5) == -1);
  CHECK(map.insert_or_find(42) == std::pair<int32_t, bool>{0, true});
  CHECK(map.insert_or_find(7) == std::pair<int32_t, bool>{1, true});
  CHECK(map.insert_or_find(42) == std::pair<int32_t, bool>{0, false});
  CHECK(map.insert_or_find(-3) == std::pair<int32_t, bool>{2, true});
  CHECK(map.size() == 3);
  CHECK(map.find(7) == 1);
  CHECK(map.find(-3) == 2);
  CHECK_FALSE(map.contains(8));
  CHECK(map.ids() == std::vector<int64_t>{42, 7, -3});
}

TEST_CASE("id_map: negative, zero and extreme ids", "[id_map]") {
  const std::vector<int64_t> ids = {0,
                                    -1,
                                    1,
                                    std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min() + 1,
                                    int64_t{1} << 40,
                                    -(int64_t{1} << 40)};
  IdMap map;
  for (size_t i = 0; i < ids.size(); ++i) CHECK(map.insert_or_find(ids[i]).first == int32_t(i));
  for (size_t i = 0; i < ids.size(); ++i) CHECK(map.find(ids[i]) == int32_t(i));
  CHECK(map.find(2) == -1);
  CHECK(map.find(std::numeric_limits<int64_t>::max() - 1) == -1);
}

TEST_CASE("id_map: growth and rehash keep every mapping", "[id_map]") {
  // Start tiny so the table rehashes many times; strided and random keys both.
  IdMap map;
  std::unordered_map<int64_t, int32_t> ref;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const int64_t id = (i % 3 == 0) ? int64_t(i) * 4096 : static_cast<int64_t>(rng() % 150000) - 75000;
    insert_and_check(map, ref, id);
  }
  REQUIRE(map.size() == ref.size());
  for (const auto& [id, index] : ref) REQUIRE(map.find(id) == index);
  for (size_t i = 0; i < map.ids().size(); ++i) REQUIRE(map.find(map.ids()[i]) == int32_t(i));
}

TEST_CASE("id_map: clear, reserve and release_ids", "[id_map]") {
  IdMap map(4);
  for (int64_t i = 0; i < 100; ++i) map.insert_or_find(i * 7);
  map.clear();
  CHECK(map.empty());
  CHECK(map.find(7) == -1);
  CHECK(map.insert_or_find(14).first == 0);
  map.reserve(1000);
  CHECK(map.find(14) == 0);
  const std::vector<int64_t> ids = map.release_ids();
  CHECK(ids == std::vector<int64_t>{14});
  CHECK(map.empty());
  CHECK(map.find(14) == -1);
  CHECK(map.insert_or_find(3).first == 0);
}

TEST_CASE("unique_with_inverse", "[id_map]") {
  const std::vector<int64_t> ids = {5, 3, 5, -1, 3, 9, 9, 5};
  const dgld::UniqueInverse u = dgld::unique_with_inverse(ids);
  CHECK(u.unique == std::vector<int64_t>{5, 3, -1, 9});
  CHECK(u.inverse == std::vector<int32_t>{0, 1, 0, 2, 1, 3, 3, 0});
  for (size_t i = 0; i < ids.size(); ++i) CHECK(u.unique[u.inverse[i]] == ids[i]);

  const dgld::UniqueInverse empty = dgld::unique_with_inverse({});
  CHECK(empty.unique.empty());
  CHECK(empty.inverse.empty());
}

TEST_CASE("id_map: reuse after clear with a smaller reservation", "[id_map]") {
  IdMap map(50000);
  for (int64_t i = 0; i < 50000; ++i) map.insert_or_find(i * 31 - 7);
  for (int round = 0; round < 3; ++round) {
    map.clear();
    map.reserve(100);  // uses a prefix of the old table; stale entries must stay invisible
    for (int64_t i = 0; i < 50000; i += 97) REQUIRE(map.find(i * 31 - 7) == -1);
    for (int64_t i = 0; i < 1000; ++i) REQUIRE(map.insert_or_find(i * 5 + round).first == int32_t(i));
    for (int64_t i = 0; i < 1000; ++i) REQUIRE(map.find(i * 5 + round) == int32_t(i));
  }
}

TEST_CASE("id_map: a direct range maps its ids by array, others by hash, in one order", "[id_map]") {
  // Ids inside [0, 5000) take the array, the rest (negative, >= 5000) the
  // hash; growth of the hash must not disturb the array's ids, and clear()
  // must forget both, over many rounds (the stamps).
  IdMap map;
  map.set_direct_range(5000);
  CHECK(map.direct_range() == 5000);
  std::mt19937_64 rng(11);
  for (int round = 0; round < 40; ++round) {
    std::unordered_map<int64_t, int32_t> ref;
    const int n = round % 4 == 0 ? 20000 : 300;
    for (int i = 0; i < n; ++i) {
      const int64_t id = static_cast<int64_t>(rng() % 12000) - 3000;
      insert_and_check(map, ref, id);
    }
    REQUIRE(map.size() == ref.size());
    for (const auto& [id, index] : ref) REQUIRE(map.find(id) == index);
    for (int64_t id = -3000; id < 9000; id += 7) {
      if (!ref.count(id)) REQUIRE(map.find(id) == -1);
    }
    for (size_t i = 0; i < map.ids().size(); ++i) REQUIRE(map.find(map.ids()[i]) == int32_t(i));
    if (round % 2) {
      map.clear();
    } else {
      REQUIRE(map.release_ids().size() == ref.size());
    }
    REQUIRE(map.find(0) == -1);
  }
}

TEST_CASE("id_map: direct range limits and changes", "[id_map]") {
  IdMap map;
  map.set_direct_range(IdMap::kMaxDirectRange + 1);  // too large: none
  CHECK(map.direct_range() == 0);
  map.set_direct_range(-5);
  CHECK(map.direct_range() == 0);
  map.set_direct_range(100);
  CHECK(map.insert_or_find(99).first == 0);
  CHECK(map.insert_or_find(100).first == 1);  // just outside: the hash
  CHECK_THROWS_AS(map.set_direct_range(200), std::logic_error);
  map.clear();
  map.set_direct_range(200);  // a new array: nothing of the old range looks live
  CHECK(map.find(99) == -1);
  CHECK(map.insert_or_find(150).first == 0);
  CHECK(map.find(150) == 0);
  map.clear();
  map.set_direct_range(0);
  CHECK(map.find(150) == -1);
  CHECK(map.insert_or_find(150).first == 0);
  CHECK(map.direct_bytes() == 0);
}
