// Distributed data-parallel training end to end: two graph-server processes
// (two simulated machines on loopback), two trainer-host processes (ranks 0
// and 1) that sample through the servers, average gradients with c10d Gloo
// and sum evaluation counts; and a trainer killed mid-run making its peer fail
// with an error instead of hanging.
#include <catch2/catch.hpp>

#include <signal.h>

#include <deque>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "tests/support/partitioned_graph.h"
#include "tests/support/process.h"

using namespace dgld;
using namespace dgld::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

PartitionedGraph& dataset() {
  static PartitionedGraph d("sbm:nodes=8000,avg_degree=10,classes=4,feat_dim=16,seed=2", 2, "dgld-dist-train-data");
  return d;
}

fs::path trainer_host_bin() { return build_root() / "daemons/trainer_host/trainer-host"; }

struct Job {
  TempDir dir{"dgld-dist-train-job"};
  uint16_t base = free_port_range(24);
  fs::path ip_config = dir.path() / "ip_config.txt";
  std::deque<Process> servers;
  std::deque<Process> trainers;

  Job() {
    std::ofstream(ip_config) << "127.0.0.1 " << base << "\n127.0.0.1 " << base + 10 << "\n";
    for (int id = 0; id < 2; ++id) {
      servers.push_back(Process::start(
          {graph_server_bin().string(), "--part-config", dataset().json.string(), "--ip-config", ip_config.string(),
           "--server-id", std::to_string(id), "--num-servers", "1", "--num-clients", "2",
           "--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "2000"},
          dir.path() / ("server" + std::to_string(id) + ".log")));
    }
    for (auto& s : servers) REQUIRE(s.wait_for_log("listening on", 60s));
  }
  ~Job() {
    for (auto& t : trainers) {
      if (t.running()) t.signal(SIGKILL);
    }
    for (auto& s : servers) s.signal(SIGTERM);
    for (auto& s : servers) s.wait(10s);
  }
  fs::path metrics() const { return dir.path() / "metrics.json"; }
  Process& start_trainer(int rank, int epochs, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {trainer_host_bin().string(),
                                     "--ip-config", ip_config.string(),
                                     "--part-config", dataset().json.string(),
                                     "--machine-id", std::to_string(rank),
                                     "--num-servers", "1",
                                     "--rank", std::to_string(rank),
                                     "--num-trainers", "2",
                                     "--rendezvous-port", std::to_string(base + 20),
                                     "--collective-timeout-s", "20",
                                     "--num-epochs", std::to_string(epochs),
                                     "--fan-out", "5,10",
                                     "--batch-size", "200",
                                     "--batch-size-eval", "500",
                                     "--num-hidden", "32",
                                     "--lr", "0.01",
                                     "--eval-every", "10",
                                     "--num-threads", "2",
                                     "--seed", "7",
                                     "--metrics-out", metrics().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    trainers.push_back(Process::start(argv, dir.path() / ("trainer" + std::to_string(rank) + ".log"),
                                      {{"OMP_NUM_THREADS", "2"}}));
    return trainers.back();
  }
};

}  // namespace

TEST_CASE("dist trainer: two trainers train data-parallel and agree on accuracy", "[dist]") {
  Job job;
  auto& t0 = job.start_trainer(0, 30, {"--shutdown-servers"});
  auto& t1 = job.start_trainer(1, 30);
  const auto rc1 = t1.wait(80s);
  const auto rc0 = t0.wait(20s);
  INFO("trainer 0 log:\n" << t0.log());
  INFO("trainer 1 log:\n" << t1.log());
  REQUIRE(rc0 == std::optional<int>(0));
  REQUIRE(rc1 == std::optional<int>(0));
  auto text = read_file(job.metrics());
  REQUIRE(text.is_ok());
  auto j = nlohmann::json::parse(*text);
  CHECK(j["num_trainers"] == 2);
  CHECK(j["rank"] == 0);
  REQUIRE(j["epochs"].size() == 30);
  CHECK(j["epochs"][0]["allreduce_s"].get<double>() > 0);
  CHECK(j["epochs"][29]["loss"].get<double>() < j["epochs"][0]["loss"].get<double>());
  REQUIRE(j["evals"].size() == 3);
  CHECK(j["test_acc"].get<double>() > 0.5);
  CHECK(j["val_acc"].get<double>() > 0.5);
  // Both trainers report the same (allreduced) accuracy.
  const std::string acc = "test acc " + fmt::format("{:.4f}", j["test_acc"].get<double>());
  CHECK(t0.log().find(acc) != std::string::npos);
  CHECK(t1.log().find(acc) != std::string::npos);
  // Rank 0 was asked to stop the servers once everyone was done.
  for (auto& s : job.servers) CHECK(s.wait(20s).has_value());
}

TEST_CASE("dist trainer: a killed trainer makes its peer fail, not hang", "[dist]") {
  // Rank 0 also hosts the rendezvous store; either loss must end the other.
  const int victim = GENERATE(1, 0);
  const int survivor = 1 - victim;
  Job job;
  job.start_trainer(0, 1000);
  job.start_trainer(1, 1000);
  Process& dead = job.trainers[static_cast<size_t>(victim)];
  Process& alive = job.trainers[static_cast<size_t>(survivor)];
  INFO("killing rank " << victim);
  REQUIRE(alive.wait_for_log("Epoch 00001 | Loss", 60s));
  dead.signal(SIGKILL);
  REQUIRE(dead.wait(10s).has_value());
  const auto t_kill = std::chrono::steady_clock::now();
  const auto rc = alive.wait(40s);
  const auto waited = std::chrono::steady_clock::now() - t_kill;
  INFO("surviving trainer's log:\n" << alive.log());
  REQUIRE(rc.has_value());
  INFO("surviving trainer exit code " << *rc);
  CHECK(*rc != 0);
  CHECK(waited < 35s);
  CHECK(alive.log().find("rank " + std::to_string(survivor) + " of 2") != std::string::npos);
  CHECK(alive.log().find("error trainer:") != std::string::npos);
  CHECK(alive.log().find("Epoch 00999") == std::string::npos);
}
