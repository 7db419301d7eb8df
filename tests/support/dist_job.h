#pragma once
// Test support: a distributed training job on loopback, started daemon by
// daemon (no dgl-launch): two simulated machines (two ip_config lines), one
// graph-server each, and the trainer-host processes a test starts (rank r
// on machine r / trainers_per_machine). Every process is stopped by PID when
// the job is destroyed, also when an assertion failed.

#include <sys/types.h>

#include <deque>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/partitioned_graph.h"
#include "tests/support/process.h"

namespace dgld::testing {

// The graph of distributed training tests, and it in 2 partitions made once
// per test program.
inline constexpr const char* kDistGraph = "sbm:nodes=8000,avg_degree=10,classes=4,feat_dim=16,seed=2";
PartitionedGraph& dist_dataset();

struct DistJob {
  struct Options {
    int trainers_per_machine = 1;
    int samplers_per_trainer = 0;
    std::filesystem::path part_config;  // empty: dist_dataset()
    bool with_secret = false;
    // Flags of every graph-server, replacing the defaults of the same name
    // (--heartbeat-interval-ms 200 --heartbeat-timeout-ms 2000).
    std::vector<std::string> server_flags;
    // Names shared memory (--job-id of servers and trainers); empty: each
    // process's default (graph name and base port).
    std::string job_id;
    bool start_servers = true;  // false: the test calls start_servers()
  };

  TempDir dir{"dgld-dist-train-job"};
  uint16_t base = free_port_range(24);
  std::filesystem::path ip_config = dir.path() / "ip_config.txt";
  Options options;
  int trainers_per_machine;
  std::deque<Process> servers;
  std::deque<Process> trainers;

  std::filesystem::path part_config;

  std::filesystem::path secret;  // the job's secret file; empty: none
  // The ip_config a server is started with, when not `ip_config` (a test
  // that puts a proxy on a machine's port moves that machine's server).
  std::map<int, std::filesystem::path> server_ip_config;

  explicit DistJob(int trainers_per_machine = 1, int samplers_per_trainer = 0,
                   std::filesystem::path part_config = dist_dataset().json, bool with_secret = false);
  explicit DistJob(Options options);
  ~DistJob();
  int num_trainers() const { return 2 * trainers_per_machine; }
  // The port machine m's server listens on as the trainers see it.
  uint16_t server_port(int m) const { return static_cast<uint16_t>(base + 10 * m); }
  // Starts both graph-servers (again, after stop) and waits until they listen.
  void start_servers();
  // SIGKILL to every trainer and server of the job (their sampler-workers
  // get SIGTERM from their trainer's death), each reaped.
  void kill_all();
  std::filesystem::path metrics() const { return dir.path() / "metrics.json"; }
  // The training flags every case shares (a small, quick model).
  std::vector<std::string> train_flags(int epochs) const;
  // `base` with the flags of `extra` (a flag followed by its value, or a
  // switch) replacing those of the same name.
  static std::vector<std::string> merge_flags(std::vector<std::string> base, const std::vector<std::string>& extra);
  Process& start_trainer(int rank, int epochs, const std::vector<std::string>& extra = {});
  // All trainers; rank 0 stops the servers at the end. Every one must exit 0.
  void run_all(int epochs, const std::vector<std::string>& extra = {});
  bool servers_stop_at_end = true;
  nlohmann::json read_metrics() const;
};

// The sampler-worker PIDs a trainer-host logged ("started K sampler-worker(s):
// 127.0.0.1:PORT (pid N), ..."); empty before that line.
std::vector<pid_t> logged_sampler_pids(const std::string& trainer_log);
// True while `pid` exists and is not a zombie.
bool pid_alive(pid_t pid);
// The parent of `pid` (from /proc), -1 when it is gone.
pid_t parent_pid(pid_t pid);

}  // namespace dgld::testing
