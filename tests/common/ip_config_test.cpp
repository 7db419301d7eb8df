#include "common/ip_config.h"

#include <sstream>
#include <string>

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

TEST_CASE("ip_config: spare machines after the machines, invisible to the machine list") {
  const std::string text = "10.0.0.1\n10.0.0.2 30060\n\n# spares\n# spare 10.0.0.9\n# spare node-10 4000\n";
  auto all = parse_ip_config_with_spares(text, "ip.txt");
  REQUIRE(all.is_ok());
  REQUIRE(all->machines.size() == 2);
  REQUIRE(all->spares.size() == 2);
  CHECK(all->spares[0].host == "10.0.0.9");
  CHECK(all->spares[0].base_port == kDefaultBasePort);
  CHECK(all->spares[0].line == 5);
  CHECK(all->spares[1].host == "node-10");
  CHECK(all->spares[1].base_port == 4000);
  auto machines = parse_ip_config(text, "ip.txt");
  REQUIRE(machines.is_ok());
  CHECK(machines->size() == 2);

  // What DGL's reader (dgl.distributed.rpc.read_ip_config) keeps: lines of
  // one or two fields until the first line of any other count. Every spare
  // line has three or more, so DGL sees the machines and stops at the spares.
  std::istringstream in(text);
  std::string line;
  int dgl_machines = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    int fields = 0;
    for (std::string t; f >> t;) ++fields;
    if (fields != 1 && fields != 2) break;
    ++dgl_machines;
  }
  CHECK(dgl_machines == 2);
}

TEST_CASE("ip_config: a misplaced or malformed spare names its line") {
  auto before = parse_ip_config_with_spares("10.0.0.1\n# spare 10.0.0.9\n10.0.0.2\n", "ip.txt");
  REQUIRE_FALSE(before.is_ok());
  CHECK_THAT(before.status().message(), Catch::Contains("ip.txt:3: machine line after the spare on line 2"));
  auto tight = parse_ip_config_with_spares("10.0.0.1\n#spare 10.0.0.9\n", "ip.txt");
  REQUIRE_FALSE(tight.is_ok());
  CHECK_THAT(tight.status().message(), Catch::Contains("ip.txt:2: a spare machine is written '# spare <address>"));
  auto empty = parse_ip_config_with_spares("10.0.0.1\n# spare\n", "ip.txt");
  REQUIRE_FALSE(empty.is_ok());
  CHECK_THAT(empty.status().message(), Catch::Contains("ip.txt:2: '# spare' names no address"));
  auto dup = parse_ip_config_with_spares("10.0.0.1\n# spare 10.0.0.1\n", "ip.txt");
  REQUIRE_FALSE(dup.is_ok());
  CHECK_THAT(dup.status().message(), Catch::Contains("ip.txt:2: machine 10.0.0.1 port 30050 is already listed on line 1"));
  auto port = parse_ip_config_with_spares("10.0.0.1\n# spare 10.0.0.9 70000\n", "ip.txt");
  REQUIRE_FALSE(port.is_ok());
  CHECK_THAT(port.status().message(), Catch::Contains("ip.txt:2: base port '70000'"));
  // Other comments that merely mention spares are comments.
  CHECK(parse_ip_config_with_spares("10.0.0.1\n# the spares follow\n", "ip.txt").is_ok());
}

TEST_CASE("ip_config: a spare put in a machine's place keeps every line where it was") {
  const std::string text = "10.0.0.1\n10.0.0.2 30060\n# spare 10.0.0.9 31000\n";
  auto c = parse_ip_config_with_spares(text, "ip.txt");
  REQUIRE(c.is_ok());
  const std::string replaced = replace_machine_line(text, c->machines[1], c->spares[0], "ssh to it fails");
  auto r = parse_ip_config_with_spares(replaced, "job-ip.txt");
  REQUIRE(r.is_ok());
  REQUIRE(r->machines.size() == 2);
  CHECK(r->machines[0].host == "10.0.0.1");
  CHECK(r->machines[1].host == "10.0.0.9");
  CHECK(r->machines[1].base_port == 31000);
  CHECK(r->machines[1].line == 2);
  CHECK(r->spares.empty());
  CHECK_THAT(replaced, Catch::Contains("line 2 (was 10.0.0.2 30060) is the spare of line 3: ssh to it fails"));
}
