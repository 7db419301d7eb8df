#include "common/cli.h"

#include <catch2/catch.hpp>

using namespace dgld;
namespace po = boost::program_options;

TEST_CASE("cli: DGL's underscore flags are accepted and the command after -- is kept") {
  po::options_description desc;
  int trainers = 0;
  std::string ip;
  desc.add_options()("num-trainers", po::value(&trainers))("ip-config", po::value(&ip));
  const char* argv[] = {"dgl-launch", "--num_trainers", "4", "--ip_config=ip.txt", "--", "trainer-host",
                        "--num_epochs", "3"};
  po::variables_map vm;
  std::vector<std::string> rest;
  REQUIRE(parse_command_line(8, argv, "dgl-launch", "", desc, vm, &rest) == CliOutcome::run);
  CHECK(trainers == 4);
  CHECK(ip == "ip.txt");
  CHECK(rest == std::vector<std::string>{"trainer-host", "--num_epochs", "3"});
}

TEST_CASE("cli: unknown flags and bad values are errors") {
  po::options_description desc;
  int n = 0;
  desc.add_options()("num-parts", po::value(&n));
  po::variables_map vm1, vm2;
  const char* a1[] = {"dgl-partition", "--bogus"};
  CHECK(parse_command_line(2, a1, "dgl-partition", "", desc, vm1) == CliOutcome::exit_error);
  const char* a2[] = {"dgl-partition", "--num-parts", "two"};
  CHECK(parse_command_line(3, a2, "dgl-partition", "", desc, vm2) == CliOutcome::exit_error);
}

TEST_CASE("cli: DGL environment variables fill flags that were not given") {
  po::options_description desc;
  int id = -1;
  std::string conf;
  desc.add_options()("server-id", po::value(&id)->default_value(-1))("part-config", po::value(&conf));
  ::setenv("DGLD_TEST_SERVER_ID", "3", 1);
  ::setenv("DGLD_TEST_CONF", "/data/g.json", 1);
  ::setenv("DGLD_TEST_BAD", "3x", 1);
  std::string err;
  {
    po::variables_map vm;
    const char* argv[] = {"graph-server"};
    REQUIRE(parse_command_line(1, argv, "graph-server", "", desc, vm) == CliOutcome::run);
    CHECK(flag_from_env(vm, "server-id", "DGLD_TEST_SERVER_ID", id, err));
    CHECK(flag_from_env(vm, "part-config", "DGLD_TEST_CONF", conf, err));
    CHECK(id == 3);
    CHECK(conf == "/data/g.json");
    CHECK_FALSE(flag_from_env(vm, "server-id", "DGLD_TEST_BAD", id, err));
    CHECK_THAT(err, Catch::Contains("DGLD_TEST_BAD='3x' is not a valid value for --server-id"));
  }
  {
    po::variables_map vm;
    const char* argv[] = {"graph-server", "--server-id", "7"};
    REQUIRE(parse_command_line(3, argv, "graph-server", "", desc, vm) == CliOutcome::run);
    CHECK(flag_from_env(vm, "server-id", "DGLD_TEST_SERVER_ID", id, err));
    CHECK(id == 7);  // the flag wins
  }
}
