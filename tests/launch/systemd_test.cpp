// config/systemd/: the units pass `systemd-analyze verify` (with ExecStart's
// @bindir@ pointed at this build's graph-server, as meson install does with its bindir), the sysusers and
// tmpfiles snippets apply to an empty root, and the unit reads what
// `dgl-launch --write-server-env` writes. Skipped (exit 77) without systemd-analyze.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <fstream>
#include <iostream>
#include <regex>

#include "launcher/launch/subprocess.h"
#include "tests/launch/launch_util.h"
#include "tests/support/partitioned_graph.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

fs::path units() { return source_root() / "config/systemd"; }

// The units as installed: ExecStart at this build's graph-server.
void install_units(const fs::path& dir, const std::string& edit_from = "", const std::string& edit_to = "") {
  for (std::string name : {"dgld-graph-server@.service", "dgld.target"}) {
    const bool templ = fs::exists(units() / (name + ".in"));
    std::string text = read_text(units() / (templ ? name + ".in" : name));
    text = std::regex_replace(text, std::regex("@bindir@/graph-server"), graph_server_bin().string());
    if (!edit_from.empty()) text = std::regex_replace(text, std::regex(edit_from), edit_to);
    std::ofstream(dir / name) << text;
  }
}

launch::CommandResult verify(const fs::path& dir) {
  auto r = launch::run_command({"systemd-analyze", "verify", "--man=no", (dir / "dgld.target").string(),
                                (dir / "dgld-graph-server@.service").string()},
                               60s);
  REQUIRE(r.is_ok());
  return *r;
}

}  // namespace

TEST_CASE("systemd: the units verify cleanly", "[launch][systemd]") {
  TempDir dir("dgld-systemd");
  install_units(dir.path());
  const auto r = verify(dir.path());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.empty());  // not even a warning
}

TEST_CASE("systemd: verify catches a broken unit (the check is not vacuous)", "[launch][systemd]") {
  TempDir dir("dgld-systemd");
  install_units(dir.path(), "\nRestart=on-failure", "\nRestart=sometimes");
  const auto r = verify(dir.path());
  CHECK_THAT(r.output, Catch::Contains("restart specifier"));
  TempDir dir2("dgld-systemd");
  install_units(dir2.path(), "ExecStart=[^\n]*", "ExecStart=/nonexistent/graph-server $DGLD_GRAPH_SERVER_ARGS");
  const auto r2 = verify(dir2.path());
  CHECK(r2.status != 0);
  CHECK_THAT(r2.output, Catch::Contains("/nonexistent/graph-server"));
}

TEST_CASE("systemd: sysusers and tmpfiles snippets apply", "[launch][systemd]") {
  TempDir root("dgld-systemd-root");
  fs::create_directories(root.path() / "etc");
  auto users = launch::run_command({"systemd-sysusers", "--dry-run", "--root=" + root.path().string(),
                                    (units() / "dgld.sysusers").string()},
                                   30s);
  REQUIRE(users.is_ok());
  INFO(users->output);
  CHECK(users->status == 0);
  CHECK_THAT(users->output, Catch::Contains("Creating user 'dgld'"));
  auto tmp = launch::run_command({"systemd-tmpfiles", "--create", "--root=" + root.path().string(),
                                  (units() / "dgld.tmpfiles").string()},
                                 30s);
  REQUIRE(tmp.is_ok());
  INFO(tmp->output);
  CHECK(tmp->status == 0);
  CHECK(fs::is_directory(root.path() / "etc/dgld"));
}

TEST_CASE("systemd: the unit reads the files dgl-launch --write-server-env writes", "[launch][systemd]") {
  const std::string unit = read_text(units() / "dgld-graph-server@.service.in");
  CHECK_THAT(unit, Catch::Contains("EnvironmentFile=/etc/dgld/%i.env"));
  CHECK_THAT(unit, Catch::Contains("ExecStart=@bindir@/graph-server $DGLD_GRAPH_SERVER_ARGS"));
  TempDir dir("dgld-systemd-env");
  partition_small_graph(dir.path(), 2);
  write_ip_config(dir.path(), {{"10.0.0.1", 30050}, {"10.0.0.2", 30050}});
  auto p = start_launch({"--workspace", "/var/lib/dgld/products", "--ip-config", "ip_config.txt", "--part-config",
                         "parts/g.json", "--job-id", "products", "--num-servers", "2", "--num-trainers", "4",
                         "--write-server-env", (dir.path() / "env").string()},
                        dir.path(), dir.path() / "write.log");
  REQUIRE(p.wait(30s) == std::optional<int>(0));
  // Instance products-3 = machine 1, server 1.
  const std::string env = read_text(dir.path() / "env/machine-1/products-3.env");
  INFO(env);
  for (const char* line : {"DGL_SERVER_ID=3\n", "DGL_NUM_SERVER=2\n", "DGL_NUM_CLIENT=8\n", "DGLD_JOB_ID=products\n",
                           "DGL_CONF_PATH=/var/lib/dgld/products/parts/g.json\n",
                           "DGL_IP_CONFIG=/var/lib/dgld/products/ip_config.txt\n",
                           "DGLD_GRAPH_SERVER_ARGS=--num-server-threads 2\n"}) {
    CHECK_THAT(env, Catch::Contains(line));
  }
  CHECK_THAT(env, Catch::Contains("systemctl enable --now dgld-graph-server@products-3"));
}

int main(int argc, char** argv) {
  const char* path = std::getenv("PATH");
  if (launch::find_executable("systemd-analyze", path ? path : "", {}).empty()) {
    std::cout << "SKIP: systemd-analyze is not installed (Debian package systemd)\n";
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
