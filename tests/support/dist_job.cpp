#include "tests/support/dist_job.h"

#include <signal.h>

#include <algorithm>
#include <fstream>

#include <catch2/catch.hpp>

#include "client/local_partition.h"
#include "common/file_util.h"
#include "common/ip_config.h"
#include "common/part_config.h"
#include "common/net/auth.h"

namespace dgld::testing {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

PartitionedGraph& dist_dataset() {
  static PartitionedGraph d(kDistGraph, 2, "dgld-dist-train-data");
  return d;
}

DistJob::DistJob(int trainers_per_machine, int samplers_per_trainer, fs::path part_config, bool with_secret)
    : DistJob(Options{.trainers_per_machine = trainers_per_machine,
                      .samplers_per_trainer = samplers_per_trainer,
                      .part_config = std::move(part_config),
                      .with_secret = with_secret}) {}

DistJob::DistJob(Options o)
    : options(std::move(o)),
      trainers_per_machine(options.trainers_per_machine),
      part_config(options.part_config.empty() ? dist_dataset().json : options.part_config) {
  if (options.with_secret) {
    secret = dir.path() / "job.secret";
    REQUIRE(net::write_new_secret_file(secret).is_ok());
  }
  std::ofstream(ip_config) << "127.0.0.1 " << server_port(0) << "\n127.0.0.1 " << server_port(1) << "\n";
  if (options.start_servers) start_servers();
}

void DistJob::start_servers() {
  servers.clear();
  const int clients = 2 * trainers_per_machine * (1 + options.samplers_per_trainer);
  for (int id = 0; id < 2; ++id) {
    const auto own = server_ip_config.find(id);
    std::vector<std::string> argv = {graph_server_bin().string(), "--part-config", part_config.string(),
                                     "--ip-config", (own != server_ip_config.end() ? own->second : ip_config).string(),
                                     "--server-id", std::to_string(id),
                                     "--num-servers", "1", "--num-clients", std::to_string(clients),
                                     "--num-samplers", std::to_string(options.samplers_per_trainer)};
    for (const auto& f : merge_flags({"--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "2000"},
                                     options.server_flags)) {
      argv.push_back(f);
    }
    if (!options.job_id.empty()) argv.insert(argv.end(), {"--job-id", options.job_id});
    if (!secret.empty()) argv.insert(argv.end(), {"--secret-file", secret.string()});
    servers.push_back(Process::start(argv, dir.path() / ("server" + std::to_string(id) + ".log")));
  }
  for (auto& s : servers) {
    INFO("graph-server log:\n" << s.log());
    REQUIRE(s.wait_for_log("listening on", 60s));
  }
}

DistJob::~DistJob() {
  for (auto& t : trainers) {
    if (t.running()) t.signal(SIGKILL);
  }
  for (auto& s : servers) s.signal(SIGTERM);
  for (auto& s : servers) s.wait(10s);
  // What a server killed with SIGKILL could not unlink: the shared memory of
  // the job (its --job-id, or each machine's default job id).
  std::vector<std::string> jobs;
  if (!options.job_id.empty()) {
    jobs.push_back(options.job_id);
  } else if (auto config = load_part_config(part_config); config.is_ok()) {
    if (auto machines = load_ip_config(ip_config); machines.is_ok()) {
      for (const auto& m : *machines) jobs.push_back(client::default_job_id(*config, m));
    }
  }
  std::error_code ec;
  for (const auto& job : jobs) {
    for (const auto& n : shm_segments("dgld." + job + ".m")) fs::remove(fs::path("/dev/shm") / n, ec);
  }
}

void DistJob::kill_all() {
  for (auto& t : trainers) t.signal(SIGKILL);
  for (auto& s : servers) s.signal(SIGKILL);
  for (auto& t : trainers) t.wait(10s);
  for (auto& s : servers) s.wait(10s);
}

std::vector<std::string> DistJob::train_flags(int epochs) const {
  return {"--rendezvous-port", std::to_string(base + 20),
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
}

std::vector<std::string> DistJob::merge_flags(std::vector<std::string> base, const std::vector<std::string>& extra) {
  for (size_t i = 0; i < extra.size(); ++i) {
    const bool has_value = i + 1 < extra.size() && extra[i + 1].rfind("--", 0) != 0;
    auto at = std::find(base.begin(), base.end(), extra[i]);
    if (at != base.end() && has_value && at + 1 != base.end()) {
      *(at + 1) = extra[i + 1];
    } else if (at == base.end()) {
      base.push_back(extra[i]);
      if (has_value) base.push_back(extra[i + 1]);
    }
    if (has_value) ++i;
  }
  return base;
}

Process& DistJob::start_trainer(int rank, int epochs, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {trainer_host_bin().string(),
                                   "--ip-config", ip_config.string(),
                                   "--part-config", part_config.string(),
                                   "--machine-id", std::to_string(rank / trainers_per_machine),
                                   "--num-servers", "1",
                                   "--rank", std::to_string(rank),
                                   "--num-trainers", std::to_string(num_trainers())};
  const auto flags = train_flags(epochs);
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv = merge_flags(std::move(argv), extra);  // a test may replace any of them (--ip-config, ...)
  std::map<std::string, std::string> env = {{"OMP_NUM_THREADS", "2"}};
  if (!secret.empty()) env["DGLD_SECRET_FILE"] = secret.string();
  if (!options.job_id.empty()) argv.insert(argv.end(), {"--job-id", options.job_id});
  trainers.push_back(Process::start(argv, dir.path() / ("trainer" + std::to_string(rank) + ".log"), env));
  return trainers.back();
}

void DistJob::run_all(int epochs, const std::vector<std::string>& extra) {
  trainers.clear();
  for (int r = 0; r < num_trainers(); ++r) {
    auto flags = extra;
    if (r == 0 && servers_stop_at_end) flags.push_back("--shutdown-servers");
    start_trainer(r, epochs, flags);
  }
  for (auto& t : trainers) {
    const auto rc = t.wait(120s);
    INFO("trainer log:\n" << t.log());
    REQUIRE(rc == std::optional<int>(0));
  }
}

nlohmann::json DistJob::read_metrics() const {
  auto text = read_file(metrics());
  REQUIRE(text.is_ok());
  return nlohmann::json::parse(*text);
}

std::vector<pid_t> logged_sampler_pids(const std::string& trainer_log) {
  std::vector<pid_t> pids;
  const auto at = trainer_log.find(" sampler-worker(s): ");
  if (at == std::string::npos) return pids;
  const auto eol = trainer_log.find('\n', at);
  const std::string line = trainer_log.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
  for (size_t p = line.find("(pid "); p != std::string::npos; p = line.find("(pid ", p + 1)) {
    pids.push_back(static_cast<pid_t>(std::stol(line.substr(p + 5))));
  }
  return pids;
}

namespace {
// "pid (comm) S PPID ...": the fields after the last ')' (the command may hold one); empty if gone.
std::string stat_after_comm(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return {};
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? std::string() : stat.substr(close + 2);
}
}  // namespace

bool pid_alive(pid_t pid) {
  const std::string s = stat_after_comm(pid);
  return !s.empty() && s[0] != 'Z';
}

pid_t parent_pid(pid_t pid) {
  const std::string s = stat_after_comm(pid);
  return s.size() > 2 ? static_cast<pid_t>(std::atol(s.c_str() + 2)) : -1;
}

}  // namespace dgld::testing
