#include "common/shm/shared_tensor.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <vector>

#include "tests/shm/shm_test_util.h"

using namespace dgld;
using namespace dgld::shm;
using namespace dgld::shm::testing;

namespace {

// A tensor whose element e of row r is r * 1000 + e, as T.
template <typename T>
SharedTensor make_tensor(const std::string& seg, DType dtype, const std::vector<int64_t>& shape) {
  auto t = SharedTensor::create(seg, "t", dtype, shape);
  REQUIRE(t.is_ok());
  const size_t per_row = t->row_bytes() / sizeof(T);
  for (int64_t r = 0; r < t->num_rows(); ++r) {
    auto* row = static_cast<T*>(t->mutable_row(r));
    for (size_t e = 0; e < per_row; ++e) row[e] = static_cast<T>(r * 1000 + static_cast<int64_t>(e));
  }
  REQUIRE(t->mark_ready().is_ok());
  return std::move(t).value();
}

template <typename T>
void check_gather_scatter(DType dtype, const std::vector<int64_t>& shape) {
  const std::string name = unique_name(std::string("gs.") + dtype_name(dtype) + "." + std::to_string(shape.size()));
  ScopedUnlink cleanup({name});
  SharedTensor t = make_tensor<T>(name, dtype, shape);
  const size_t per_row = t.row_bytes() / sizeof(T);
  const std::vector<int64_t> ids = {5, 0, t.num_rows() - 1, 5, 2};
  std::vector<T> out(ids.size() * per_row);
  REQUIRE(t.gather_rows(ids, out.data()).is_ok());
  for (size_t k = 0; k < ids.size(); ++k) {
    for (size_t e = 0; e < per_row; ++e) {
      CHECK(out[k * per_row + e] == static_cast<T>(ids[k] * 1000 + static_cast<int64_t>(e)));
    }
  }
  const std::vector<int64_t> targets = {1, 3};
  std::vector<T> in(2 * per_row);
  std::iota(in.begin(), in.end(), T(7));
  REQUIRE(t.scatter_rows(targets, in.data()).is_ok());
  CHECK(std::memcmp(t.row(1), in.data(), t.row_bytes()) == 0);
  CHECK(std::memcmp(t.row(3), in.data() + per_row, t.row_bytes()) == 0);
  CHECK(static_cast<const T*>(t.row(2))[0] == T(2000));
}

}  // namespace

TEST_CASE("shm tensor: a child attaches read-only and reads rows", "[shm]") {
  const std::string name = unique_name("tensor-cross");
  ScopedUnlink cleanup({name});
  SharedTensor t = make_tensor<float>(name, DType::float32, {100, 16});
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
  CHECK(t.data_bytes() == 100 * 16 * 4);
  const int status = run_in_child([&] {
    auto a = SharedTensor::attach(name, true, in_ms(2000));
    if (!a.is_ok()) return 2;
    if (a->name() != "t" || a->dtype() != DType::float32 || a->num_rows() != 100) return 3;
    if (a->shape().size() != 2 || a->shape()[1] != 16 || a->row_bytes() != 64) return 4;
    if (a->mutable_data() != nullptr || a->mutable_row(0) != nullptr) return 5;
    std::vector<float> out(2 * 16);
    const std::vector<int64_t> ids = {99, 7};
    if (!a->gather_rows(ids, out.data()).is_ok()) return 6;
    if (out[0] != 99000.f || out[15] != 99015.f || out[16] != 7000.f) return 7;
    const float one = 1;
    const std::vector<int64_t> first = {0};
    return a->scatter_rows(first, &one).code() == StatusCode::invalid_argument ? 0 : 8;
  });
  CHECK(exited_with(status, 0));
}

TEST_CASE("shm tensor: gather and scatter for every row-size path", "[shm]") {
  check_gather_scatter<int32_t>(DType::int32, {10});          // 4-byte rows
  check_gather_scatter<int64_t>(DType::int64, {10});          // 8-byte rows
  check_gather_scatter<double>(DType::float64, {10, 3});      // generic
  check_gather_scatter<uint8_t>(DType::uint8, {10, 2, 3, 5}); // 4 dims
}

TEST_CASE("shm tensor: out-of-range ids are rejected before any copy", "[shm]") {
  const std::string name = unique_name("tensor-range");
  ScopedUnlink cleanup({name});
  SharedTensor t = make_tensor<int64_t>(name, DType::int64, {8, 2});
  for (int64_t bad : {int64_t{8}, int64_t{-1}, int64_t{1} << 40}) {
    const std::vector<int64_t> ids = {1, bad, 2};
    std::vector<int64_t> out(6, -7);
    const Status st = t.gather_rows(ids, out.data());
    CHECK(st.code() == StatusCode::invalid_argument);
    CHECK(contains(st.message(), "row id " + std::to_string(bad)));
    CHECK(contains(st.message(), "8 rows"));
    CHECK(contains(st.message(), name));
    CHECK(out == std::vector<int64_t>(6, -7));

    std::vector<int64_t> in(6, 99);
    CHECK(t.scatter_rows(ids, in.data()).code() == StatusCode::invalid_argument);
    CHECK(static_cast<const int64_t*>(t.row(1))[0] == 1000);
  }
  std::vector<int64_t> none;
  CHECK(t.gather_rows(none, nullptr).is_ok());
}

TEST_CASE("shm tensor: create checks its arguments", "[shm]") {
  const std::string name = unique_name("tensor-args");
  ScopedUnlink cleanup({name});
  CHECK(SharedTensor::create(name, "x", DType::float32, {}).status().code() == StatusCode::invalid_argument);
  CHECK(SharedTensor::create(name, "x", DType::float32, {1, 2, 3, 4, 5}).status().code() ==
        StatusCode::invalid_argument);
  CHECK(SharedTensor::create(name, "x", DType::float32, {4, -1}).status().code() ==
        StatusCode::invalid_argument);
  CHECK(SharedTensor::create(name, std::string(200, 'n'), DType::float32, {4}).status().code() ==
        StatusCode::invalid_argument);
  CHECK(SharedTensor::create(name, "x", DType::float32, {int64_t{1} << 40, int64_t{1} << 40})
            .status().code() == StatusCode::invalid_argument);
  CHECK_FALSE(segment_exists(name));

  auto empty = SharedTensor::create(name, "empty", DType::int32, {0, 4});
  REQUIRE(empty.is_ok());
  CHECK(empty->num_rows() == 0);
  CHECK(empty->row_bytes() == 16);
  REQUIRE(empty->mark_ready().is_ok());
  auto attached = SharedTensor::attach(name, true, in_ms(100));
  REQUIRE(attached.is_ok());
  CHECK(attached->name() == "empty");
}

TEST_CASE("shm tensor: attach rejects a segment that is not a tensor", "[shm]") {
  const std::string name = unique_name("not-tensor");
  ScopedUnlink cleanup({name});
  auto seg = SharedSegment::create(name, 1024, {.kind = 1});
  REQUIRE(seg.is_ok());
  REQUIRE(seg->mark_ready().is_ok());
  auto t = SharedTensor::attach(name, true, in_ms(100));
  REQUIRE_FALSE(t.is_ok());
  CHECK(t.status().code() == StatusCode::corruption);
  CHECK(contains(t.status().message(), name));
}
