#pragma once
// Test support for dgl-launch: the binaries, a small partitioned graph, the
// launcher started in a directory (and optionally a network namespace), and
// the checks that nothing of a job survives: processes found by the job id
// in their environment or command line, shared memory, ports.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace dgld::testing {

std::filesystem::path launch_bin();
std::filesystem::path fake_trainer();

// dgl-partition --generate `spec` into `dir`/parts/g.json (default: a small
// SBM graph), with dgl-partition's `flags` (--link-split, --add-reverse, ...).
inline constexpr const char* kSmallGraph = "sbm:nodes=2000,avg_degree=8,classes=4,feat_dim=8,seed=3";
void partition_small_graph(const std::filesystem::path& dir, int num_parts, const std::string& spec = kSmallGraph,
                           const std::vector<std::string>& flags = {});

// Writes `dir`/ip_config.txt: one "host port" line per machine.
void write_ip_config(const std::filesystem::path& dir, const std::vector<std::pair<std::string, int>>& machines);

// dgl-launch `args` run in `cwd` (through `env -C`), inside network namespace
// `netns` when given (through `ip netns exec`); both exec, so the PID is the launcher's.
Process start_launch(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                     const std::filesystem::path& log, const std::string& netns = "");

// PIDs of every process that belongs to the job: DGLD_JOB_ID=<job> in its
// environment, or the job id as an argument (the agents).
std::vector<pid_t> job_processes(const std::string& job_id);
// The job ids of a job's attempts under dgl-launch --max-restarts: the job's
// own and <job>-r1 .. <job>-r8.
std::vector<std::string> attempt_ids(const std::string& job_id);
// Waits up to `timeout` until no process of the job remains; what remains.
std::vector<pid_t> wait_job_gone(const std::string& job_id, std::chrono::milliseconds timeout);
// "pid: command line" of each, for failure messages.
std::string describe_pids(const std::vector<pid_t>& pids);

// The pid of role/rank recorded by machine m's agent in <workspace>/dgld-logs/<job>/machine-<m>.json.
std::optional<pid_t> recorded_pid(const std::filesystem::path& workspace, const std::string& job_id, int machine,
                                  const std::string& role, int rank);
std::optional<pid_t> recorded_agent_pid(const std::filesystem::path& workspace, const std::string& job_id, int machine);

// True while some socket of this network namespace listens on TCP `port`.
bool port_listened_on(int port);

std::string read_text(const std::filesystem::path& p);

// One --local job: the data (the launcher's working directory, `src`, with
// ip_config.txt and parts/g.json), the workspace `ws`, the ports (machine m
// at base + 10 m) and a job id. Whatever a failed assertion left running is
// killed by PID (found by the job id) on destruction.
// The launcher's exit after an event at `since` (a kill, a signal, a log
// line seen): waits up to `timeout`, prints "measured: <test>: launcher
// exited S s after the event" and returns the exit status and the time taken.
struct LauncherExit {
  std::optional<int> rc;
  std::chrono::duration<double> took;
};
LauncherExit wait_launcher_exit(Process& p, std::chrono::steady_clock::time_point since,
                                std::chrono::milliseconds timeout);

struct LocalJob {
  TempDir dir{"dgld-launch-local"};
  std::filesystem::path src = dir.path() / "src";
  std::filesystem::path ws = dir.path() / "ws";
  int base = free_port_range(24);
  std::string job_id;

  explicit LocalJob(int machines = 2, const std::string& graph_spec = kSmallGraph,
                    const std::vector<std::string>& partition_flags = {});
  ~LocalJob();

  // dgl-launch's arguments: --local, the job's files and id, `extra`, -- `command`.
  std::vector<std::string> args(const std::vector<std::string>& extra, const std::vector<std::string>& command) const;
  Process start(const std::vector<std::string>& extra,
                const std::vector<std::string>& command = {fake_trainer().string()});
  std::filesystem::path logs() const { return ws / "dgld-logs" / job_id; }
  // Catch2 checks: no process of the job, no shared-memory segment and no port left.
  void check_nothing_left() const;
};

}  // namespace dgld::testing
