#include "common/status.h"

#include <catch2/catch.hpp>

using namespace dgld;

namespace {
Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("value must be positive, got " + std::to_string(v));
  return v;
}
Result<int> doubled(int v) {
  DGLD_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}
Status check(int v) {
  DGLD_RETURN_IF_ERROR(parse_positive(v).status());
  return Status::ok();
}
}  // namespace

TEST_CASE("Status carries code and message") {
  Status ok;
  CHECK(ok.is_ok());
  CHECK(ok.to_string() == "ok");
  Status e = not_found("tensor 'x'");
  CHECK_FALSE(e.is_ok());
  CHECK(e.code() == StatusCode::not_found);
  CHECK(e.to_string() == "not found: tensor 'x'");
  CHECK(e.with_context("pull").message() == "pull: tensor 'x'");
}

TEST_CASE("Result propagates values and errors") {
  REQUIRE(doubled(4).is_ok());
  CHECK(doubled(4).value() == 8);
  auto bad = doubled(-1);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == StatusCode::invalid_argument);
  CHECK(bad.status().message().find("-1") != std::string::npos);
  CHECK(check(1).is_ok());
  CHECK(check(0).code() == StatusCode::invalid_argument);
}
