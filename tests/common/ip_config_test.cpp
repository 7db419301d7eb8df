#include "common/ip_config.h"

#include <catch2/catch.hpp>

using namespace dgld;

TEST_CASE("ip_config: addresses, ports, comments and blank lines") {
  auto r = parse_ip_config("# cluster\n10.0.0.1\n\n10.0.0.2 30060   # second\n  node-3.example.com 4000\n",
                           "ip.txt");
  REQUIRE(r.is_ok());
  REQUIRE(r->size() == 3);
  CHECK((*r)[0].host == "10.0.0.1");
  CHECK((*r)[0].base_port == kDefaultBasePort);
  CHECK((*r)[0].line == 2);
  CHECK((*r)[1].base_port == 30060);
  CHECK((*r)[1].line == 4);
  CHECK((*r)[2].host == "node-3.example.com");
  CHECK((*r)[2].base_port == 4000);
}

TEST_CASE("ip_config: the same host on several lines with distinct ports") {
  auto r = parse_ip_config("127.0.0.1 30050\n127.0.0.1 30060\r\n", "ip.txt");
  REQUIRE(r.is_ok());
  CHECK(r->size() == 2);
}

TEST_CASE("ip_config: every malformed form names file and line") {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"", "no machines"},
      {"# only a comment\n\n", "no machines"},
      {"10.0.0.1 30050 extra\n", "ip.txt:1: expected '<address> [<base_port>]', got 3 fields"},
      {"10.0.0.1\n10.0.0.1 x\n", "ip.txt:2: base port 'x' is not a number"},
      {"10.0.0.1 0\n", "ip.txt:1: base port '0'"},
      {"10.0.0.1 65536\n", "ip.txt:1: base port '65536'"},
      {"10.0.0.1 -5\n", "ip.txt:1: base port '-5'"},
      {"10.0.0.1 30050x\n", "base port '30050x'"},
      {"10.0.0.256\n", "ip.txt:1: '10.0.0.256' is not a valid IPv4 address"},
      {"10.0.0\n", "'10.0.0' is not a valid IPv4 address"},
      {"1.2.3.4.5\n", "not a valid IPv4"},
      {"fe80::1\n", "neither an IPv4 address nor a hostname"},
      {"host/name\n", "neither an IPv4 address nor a hostname"},
      {"-bad\n", "neither"},
      {"10.0.0.1 30050\n10.0.0.1 30050\n", "ip.txt:2: machine 10.0.0.1 port 30050 is already listed on line 1"},
  };
  for (const auto& c : cases) {
    INFO("input: " << c.text);
    auto r = parse_ip_config(c.text, "ip.txt");
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::invalid_argument);
    CHECK_THAT(r.status().message(), Catch::Contains(c.expect));
  }
}

TEST_CASE("ip_config: a missing file is an I/O error naming it") {
  auto r = load_ip_config("/nonexistent/ip_config.txt");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::io_error);
  CHECK_THAT(r.status().message(), Catch::Contains("/nonexistent/ip_config.txt"));
}
