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
