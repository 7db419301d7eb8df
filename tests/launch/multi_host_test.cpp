// dgl-launch over real ssh: two hosts in network namespaces, each with its own
// sshd (key-only) and its own workspace directory behind the same path, and
// the launcher in a third namespace. Traffic goes only to the 10.213.0.x
// addresses the test creates. Skipped (exit 77) only where network
// namespaces cannot be created.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "launcher/launch/files.h"
#include "tests/launch/launch_util.h"
#include "tests/launch/virtual_hosts.h"
#include "tests/support/partitioned_graph.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct Cluster {
  VirtualHosts hosts{2, 1};  // hosts 0 and 1 run sshd; host 2 refuses ssh
  std::string job_id = "mh" + std::to_string(::getpid()) + "-" + std::to_string(counter()++);
  fs::path workspace = hosts.workspace();

  Cluster() {
    partition_small_graph(hosts.src(), 2);
    write_ip_config(hosts.src(), {{hosts.address(0), 30050}, {hosts.address(1), 30050}});
  }
  ~Cluster() {
    for (pid_t pid : job_processes(job_id)) ::kill(pid, SIGKILL);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }

  Process start(const std::vector<std::string>& extra, const std::vector<std::string>& command,
                const std::string& log_name = "launch.log") {
    std::vector<std::string> a = {"--workspace", workspace.string(), "--ip-config", "ip_config.txt",
                                  "--part-config", "parts/g.json", "--job-id", job_id};
    const auto ssh = hosts.ssh_flags();
    a.insert(a.end(), ssh.begin(), ssh.end());
    a.insert(a.end(), extra.begin(), extra.end());
    a.push_back("--");
    a.insert(a.end(), command.begin(), command.end());
    return start_launch(a, hosts.src(), hosts.src() / log_name, hosts.launcher_ns());
  }

  fs::path logs(int host) const { return hosts.host_dir(host) / "dgld-logs" / job_id; }

  // No process of the job anywhere, nothing but sshd in the hosts' namespaces, no shared memory.
  void check_nothing_left() {
    auto left = wait_job_gone(job_id, 5s);
    INFO("processes of the job still running:\n" << describe_pids(left));
    CHECK(left.empty());
    for (int h = 0; h < 2; ++h) {
      std::vector<pid_t> on;
      for (int i = 0; i < 50; ++i) {
        on = hosts.processes_on(h);
        if (on.empty()) break;
        std::this_thread::sleep_for(100ms);
      }
      INFO("host " << h << " still runs:\n" << describe_pids(on));
      CHECK(on.empty());
    }
    CHECK(launch::job_shm_segments(job_id, -1).empty());
  }
};

std::vector<std::string> trainer_command(int epochs) {
  return {trainer_host_bin().string(), "--num-epochs", std::to_string(epochs), "--fan-out", "5,10", "--batch-size",
          "100", "--num-hidden", "16", "--lr", "0.01", "--eval-every", "0", "--no-progress", "--collective-timeout-s",
          "30", "--metrics-out", "metrics.json"};
}

}  // namespace

TEST_CASE("multi-host: partitions copied per host, training completes, metrics come back", "[launch][ssh]") {
  Cluster c;
  auto p = c.start({"--num-samplers", "1"}, trainer_command(3));
  const auto rc = p.wait(180s);
  const std::string log = p.log();
  INFO(log);
  REQUIRE(rc == std::optional<int>(0));
  // Each host got its own partition only, plus the JSON and the ip_config.
  for (int h = 0; h < 2; ++h) {
    const fs::path d = c.hosts.host_dir(h);
    CHECK(fs::exists(d / "ip_config.txt"));
    CHECK(fs::exists(d / "parts/g.json"));
    for (const char* f : {"graph.dgld", "node_feat.dgld", "edge_feat.dgld"}) {
      CHECK(fs::exists(d / ("parts/part" + std::to_string(h)) / f));
      CHECK_FALSE(fs::exists(d / ("parts/part" + std::to_string(1 - h)) / f));
    }
    CHECK(fs::exists(c.logs(h) / ("server-" + std::to_string(h) + ".log")));
    CHECK(fs::exists(c.logs(h) / ("trainer-" + std::to_string(h) + ".log")));
  }
  CHECK_FALSE(fs::exists(c.hosts.workspace() / "parts"));  // nothing landed on the launcher's side of the path
  CHECK_THAT(log, Catch::Contains(c.hosts.address(1) + "/trainer/1: "));
  CHECK_THAT(log, Catch::Contains("done (rank 1 of 2)"));
  CHECK_THAT(log, Catch::Contains("rsync --checksum: 5 of 5 file(s) transferred"));
  auto metrics = nlohmann::json::parse(read_text(c.hosts.src() / "metrics.json"));
  CHECK(metrics["num_trainers"] == 2);
  CHECK(metrics["epochs"].size() == 3);
  c.check_nothing_left();

  // Again: every file is already there with the same checksum, nothing is sent.
  c.job_id += "b";
  auto p2 = c.start({}, {fake_trainer().string()}, "launch2.log");
  REQUIRE(p2.wait(120s) == std::optional<int>(0));
  CHECK_THAT(p2.log(), Catch::Contains("rsync --checksum: 0 of 5 file(s) transferred"));
  c.check_nothing_left();
}

TEST_CASE("multi-host: dgl-partition --distributed partitions across 2 hosts, each keeps its partition, then trains",
          "[launch][ssh][distributed]") {
  Cluster c;
  // The chunked graph at the same path on both hosts (each rank reads its own block).
  const fs::path chunks = c.hosts.src() / "chunks";
  auto to = Process::start({partition_bin().string(), "--generate", "sbm:nodes=4000,avg_degree=8,classes=4,feat_dim=8,seed=5",
                            "--to-chunks", "2", "--graph-name", "g", "--output", chunks.string()},
                           c.hosts.src() / "to-chunks.log");
  REQUIRE(to.wait(120s) == std::optional<int>(0));
  for (int h = 0; h < 2; ++h) fs::copy(chunks, c.hosts.host_dir(h) / "chunks", fs::copy_options::recursive);
  std::vector<std::string> argv = {"/usr/sbin/ip", "netns", "exec", c.hosts.launcher_ns(), partition_bin().string(),
                                   "--distributed", "--ip-config", (c.hosts.src() / "ip_config.txt").string(),
                                   "--chunks", (c.workspace / "chunks").string(), "--output",
                                   (c.workspace / "dparts").string()};
  const auto ssh = c.hosts.ssh_flags();
  argv.insert(argv.end(), ssh.begin(), ssh.end());
  auto part = Process::start(argv, c.hosts.src() / "distributed.log");
  const auto rc = part.wait(240s);
  INFO(part.log());
  REQUIRE(rc == std::optional<int>(0));
  CHECK_THAT(part.log(), Catch::Contains("distributed partition: 2 ranks, 4000 nodes"));
  // Each host holds its own partition and the config, and not the other partition.
  for (int h = 0; h < 2; ++h) {
    const fs::path d = c.hosts.host_dir(h) / "dparts";
    CHECK(fs::exists(d / "g.json"));
    CHECK(fs::exists(d / ("part" + std::to_string(h)) / "graph.dgld"));
    CHECK_FALSE(fs::exists(d / ("part" + std::to_string(1 - h))));
  }
  CHECK_FALSE(fs::exists(c.hosts.workspace() / "dparts"));  // nothing on the launcher's side

  // Training on the partitions where they are (dgl-launch --no-copy: the
  // ip_config must be on every host too).
  for (int h = 0; h < 2; ++h) fs::copy_file(c.hosts.src() / "ip_config.txt", c.hosts.host_dir(h) / "ip_config.txt");
  fs::create_directories(c.hosts.src() / "dparts");
  fs::copy_file(c.hosts.host_dir(0) / "dparts" / "g.json", c.hosts.src() / "dparts" / "g.json");
  std::vector<std::string> args = {"--workspace", c.workspace.string(), "--ip-config", "ip_config.txt",
                                   "--part-config", "dparts/g.json", "--job-id", c.job_id, "--no-copy"};
  args.insert(args.end(), ssh.begin(), ssh.end());
  args.push_back("--");
  const auto cmd = trainer_command(3);
  args.insert(args.end(), cmd.begin(), cmd.end());
  auto train = start_launch(args, c.hosts.src(), c.hosts.src() / "train.log", c.hosts.launcher_ns());
  const auto trc = train.wait(180s);
  INFO(train.log());
  REQUIRE(trc == std::optional<int>(0));
  CHECK_THAT(train.log(), Catch::Contains("done (rank 1 of 2)"));
  c.check_nothing_left();
}

TEST_CASE("multi-host: a Python training script (DGL's API on the dgld package) trains over ssh", "[launch][ssh][python]") {
  const fs::path package = build_root() / "python" / "dgld";
  bool built = false;
  if (fs::exists(package)) {
    for (const auto& e : fs::directory_iterator(package)) built |= e.path().filename().string().rfind("_C.", 0) == 0;
  }
  if (!built) {
    WARN("the dgld Python package is not built (-Dpython_package): nothing to run");
    return;
  }
  Cluster c;
  const std::string script = (source_root() / "examples/python/train_dist.py").string();
  auto p = c.start({"--extra-envs", "PYTHONPATH=" + (build_root() / "python").string()},
                   {"/usr/bin/python3", script, "--graph_name", "g", "--ip_config", "ip_config.txt", "--part_config",
                    "parts/g.json", "--num_epochs", "3", "--fan_out", "5,10", "--batch_size", "100", "--lr", "0.01",
                    "--eval_every", "0", "--log_every", "0", "--metrics_out", "metrics.json"});
  const auto rc = p.wait(180s);
  const std::string log = p.log();
  INFO(log);
  REQUIRE(rc == std::optional<int>(0));
  CHECK_THAT(log, Catch::Contains(c.hosts.address(1) + "/trainer/1: Part 1, Epoch Time(s)"));
  CHECK_THAT(log, Catch::Contains(c.hosts.address(0) + "/trainer/0: Part 0, Val Acc"));
  auto metrics = nlohmann::json::parse(read_text(c.hosts.src() / "metrics.json"));
  CHECK(metrics["num_trainers"] == 2);
  CHECK(metrics["epochs"].size() == 3);
  CHECK(metrics["test_acc"].get<double>() > 0.0);
  c.check_nothing_left();
}

TEST_CASE("multi-host: scp copies what differs (by checksum) when rsync is not used", "[launch][ssh]") {
  Cluster c;
  auto p = c.start({"--copy-method", "scp"}, {fake_trainer().string()});
  const auto rc = p.wait(120s);
  INFO(p.log());
  REQUIRE(rc == std::optional<int>(0));
  CHECK_THAT(p.log(), Catch::Contains("scp: 5 file(s) copied, 0 already there"));
  CHECK(fs::exists(c.hosts.host_dir(1) / "parts/part1/graph.dgld"));
  CHECK_FALSE(fs::exists(c.hosts.host_dir(1) / "parts/part0/graph.dgld"));
  c.check_nothing_left();
  // One file changed here: only it is copied again.
  std::ofstream(c.hosts.src() / "ip_config.txt", std::ios::app) << "# changed\n";
  c.job_id += "b";
  auto p2 = c.start({"--copy-method", "scp"}, {fake_trainer().string()}, "launch2.log");
  REQUIRE(p2.wait(120s) == std::optional<int>(0));
  CHECK_THAT(p2.log(), Catch::Contains("scp: 1 file(s) copied, 4 already there with the same checksum"));
  CHECK_THAT(read_text(c.hosts.host_dir(1) / "ip_config.txt"), Catch::Contains("# changed"));
  c.check_nothing_left();
}

TEST_CASE("multi-host: kill -9 of a remote trainer stops the job everywhere within 10 s", "[launch][ssh]") {
  Cluster c;
  auto p = c.start({"--num-samplers", "1"}, trainer_command(100000));
  REQUIRE(p.wait_for_log(c.hosts.address(1) + "/trainer/1: ", 120s));
  REQUIRE(p.wait_for_log("Epoch 00001", 120s));
  auto victim = recorded_pid(c.hosts.host_dir(1), c.job_id, 1, "trainer", 1);
  REQUIRE(victim.has_value());
  ::kill(*victim, SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  const auto [rc, took] = wait_launcher_exit(p, t0, 30s);
  INFO(p.log());
  REQUIRE(rc.has_value());
  CHECK(*rc == 1);
  CHECK(took < 10s);
  CHECK_THAT(p.log(), Catch::Contains(c.hosts.address(1) + " (machine 1): trainer 1 (pid " + std::to_string(*victim) +
                                      ") was killed by SIGKILL"));
  c.check_nothing_left();
}

TEST_CASE("multi-host: SIGINT to the launcher stops the job everywhere within 5 s", "[launch][ssh]") {
  Cluster c;
  auto p = c.start({"--num-samplers", "1"}, trainer_command(100000));
  REQUIRE(p.wait_for_log("Epoch 00001", 120s));
  p.signal(SIGINT);
  const auto t0 = std::chrono::steady_clock::now();
  const auto [rc, took] = wait_launcher_exit(p, t0, 30s);
  INFO(p.log());
  REQUIRE(rc == std::optional<int>(130));
  CHECK(took < 5s);
  CHECK_THAT(p.log(), Catch::Contains("interrupted by SIGINT"));
  c.check_nothing_left();
}

TEST_CASE("multi-host: bad input fails before anything starts, naming the host", "[launch][ssh]") {
  Cluster c;
  std::vector<std::string> extra;
  std::vector<std::string> command = {fake_trainer().string()};
  std::string expect;
  SECTION("a host that refuses ssh") {
    write_ip_config(c.hosts.src(), {{c.hosts.address(0), 30050}, {c.hosts.address(2), 30050}});
    extra = {"--connect-timeout-s", "5"};
    expect = "host " + c.hosts.address(2) +
             " (machine 1, ip_config.txt line 2): cannot start the machine agent over ssh: ssh failed (exit 255)";
  }
  SECTION("a workspace that is not writable") {
    c.workspace = c.hosts.readonly_workspace();
    expect = "workspace " + c.hosts.readonly_workspace().string() + " is not writable: Read-only file system";
  }
  SECTION("a partition missing on a host with --no-copy") {
    for (int h = 0; h < 2; ++h) fs::copy(c.hosts.src(), c.hosts.host_dir(h), fs::copy_options::recursive);
    fs::remove(c.hosts.host_dir(1) / "parts/part1/graph.dgld");
    extra = {"--no-copy"};
    expect = "host " + c.hosts.address(1) + " (machine 1, ip_config.txt line 2): partition 1 file " +
             (c.hosts.workspace() / "parts/part1/graph.dgld").string() + " is missing";
  }
  SECTION("a trainer command that is not found") {
    command = {"trainer-host-missing"};
    expect = "trainer command 'trainer-host-missing' not found in PATH";
  }
  auto p = c.start(extra, command);
  const auto rc = p.wait(90s);
  INFO(p.log());
  REQUIRE(rc == std::optional<int>(2));
  CHECK_THAT(p.log(), Catch::Contains(expect));
  CHECK_THAT(p.log(), Catch::Contains("failed before anything started"));
  c.check_nothing_left();
}

int main(int argc, char** argv) {
  const std::string why = VirtualHosts::unavailable();
  if (!why.empty()) {
    std::cout << "SKIP: the multi-host dgl-launch tests need network namespaces: " << why << "\n";
    return 77;  // meson: skipped
  }
  return Catch::Session().run(argc, argv);
}
