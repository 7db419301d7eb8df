// The example configs shipped in config/ must parse.
#include <catch2/catch.hpp>

#include "common/ip_config.h"

TEST_CASE("config/ip_config.example.txt parses") {
  auto r = dgld::load_ip_config(std::string(DGLD_SOURCE_ROOT) + "/config/ip_config.example.txt");
  REQUIRE(r.is_ok());
  CHECK(r->size() == 3);
  CHECK((*r)[2].host == "node-3.cluster.local");
}
