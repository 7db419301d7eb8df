#pragma once
// dgl-launch's options and the job plan made from them: for every machine of
// the ip_config (machine m = line m = partition m), which processes run there
// with which environment, which files it needs and which ports must be free.
// Pure: no I/O beyond what the caller already loaded, so tests check every
// variable the daemons read (docs/operations.md lists them).

#include <map>
#include <string>
#include <vector>

#include "common/ip_config.h"
#include "common/logging.h"
#include "common/part_config.h"
#include "common/status.h"

namespace dgld::launch {

struct LaunchOptions {
  std::string workspace;         // directory on every machine; relative paths below are relative to it
  int num_trainers = 1;          // per machine
  int num_samplers = 0;          // per trainer (trainer-host starts them)
  int num_servers = 1;           // per machine
  int num_server_threads = 2;
  int num_omp_threads = 0;       // 0: cores of the machine / num_trainers
  std::string part_config;       // read here relative to the current directory, there relative to workspace
  std::string ip_config;         // likewise
  std::string graph_format;      // DGL's --graph_format, passed on as DGL_GRAPH_FORMAT
  std::vector<std::string> extra_envs;  // K=V, to every process
  int ssh_port = 0;              // 0: ssh's default
  std::string ssh_username;
  std::string identity_file;
  std::vector<std::string> ssh_options;  // extra `ssh -o` options, K=V
  bool local = false;            // run every machine's processes on this host, no ssh
  bool external_servers = false; // graph-servers already run (systemd): start trainers only, leave servers alone
  std::string write_server_env;  // write each server's environment file here (for systemd) and exit
  int server_metrics_port = 0;   // >0: the graph-servers started here serve Prometheus metrics from this port
  bool no_copy = false;          // shared filesystem: copy nothing
  std::string copy_method = "auto";  // auto (rsync when both sides have it) | rsync | scp
  std::string job_id;            // empty: <graph>-<random>
  std::string secret_file;       // the job's shared secret (mode 0600); empty: a fresh random one per job
  bool no_auth = false;          // no shared secret: processes accept unauthenticated connections
  std::string graph_server_bin;  // empty: next to dgl-launch, else the build tree, else PATH
  std::string agent_bin;         // dgl-launch on the machines; empty: this executable
  int grace_ms = 3000;           // SIGTERM, then SIGKILL after this long
  int connect_timeout_s = 10;
  int start_timeout_s = 120;     // servers listening
  int copy_timeout_s = 3600;
  int agent_timeout_s = 30;      // an agent that hears nothing (not even a ping) for this long stops the job there
  int max_restarts = 0;          // a failed job is started again up to this often (docs/reliability.md)
  double restart_backoff_s = 1;  // the wait before the first restart, doubled for each next one (at most 60 s)
  bool server_log_level_set = false;
  LogOptions log;
  std::vector<std::string> command;  // the trainer command (after "--")
};

// Parses argv; exit_code >= 0: exit right away (help, version, usage error printed).
struct ParsedLaunchOptions {
  LaunchOptions options;
  bool agent = false;            // --machine-agent: run as a machine's agent
  bool cleanup = false;          // with --machine-agent: only kill what is left of the job there
  bool keep_shm = false;         // with --cleanup: the job's servers run on (external), leave their shared memory
  std::string agent_job_id;
  int agent_machine = -1;
  int exit_code = -1;
};
ParsedLaunchOptions parse_launch_options(int argc, const char* const argv[]);

struct ProcessSpec {
  std::string role;              // "server" | "trainer"
  int rank = 0;                  // server: global server id; trainer: global trainer rank
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // on top of the agent's environment
};

struct Endpoint {
  std::string host;
  int port = 0;
  std::string what;  // who binds it, for messages ("" for a graph-server's own port)
};

struct MachinePlan {
  int machine = 0;
  bool external_servers = false;       // servers not started here: server_ports must already listen
  MachineAddress address;
  std::string label;             // host, or host:base_port when a host is listed twice
  std::vector<ProcessSpec> servers;
  std::vector<ProcessSpec> trainers;
  std::vector<std::string> files;      // needed there: ip_config, the JSON, this partition's files
  std::vector<Endpoint> server_ports;  // base_port + j
  std::vector<Endpoint> other_ports;   // must be free too (machine 0: the trainers' rendezvous; metrics ports)
};

struct JobPlan {
  std::string job_id;
  std::string log_dir;           // relative to the workspace: dgld-logs/<job_id>
  std::string metrics_out;       // the trainer command's --metrics-out, "" when absent
  std::vector<MachinePlan> machines;
};

// The environment file of every graph-server of the job, for systemd
// (config/systemd/dgld-graph-server@.service): "machine-<m>/<job>-<server id>.env"
// -> its text. Paths are made absolute with the workspace; no DGLD_MACHINE_ID, so
// a launcher's teardown sweep never matches these servers.
std::map<std::string, std::string> server_env_files(const LaunchOptions& o, const JobPlan& plan);

// Checks the options on their own (counts, K=V syntax, a command present).
Status validate_launch_options(const LaunchOptions& o);

// The plan for `machines` (the parsed ip_config) and `config` (the JSON).
// Fails when the machine count is not num_parts, naming both files.
Result<JobPlan> make_job_plan(const LaunchOptions& o, const std::vector<MachineAddress>& machines,
                              const PartitionConfig& config);

// Where a partition's file lives, as a path relative to the workspace (or
// absolute): the JSON's directory joined with the file's name in the JSON.
std::string part_file_path(const std::string& part_config, const std::string& relative);

// A fresh job id: graph name (characters outside [A-Za-z0-9_-] dropped) and 8 random hex digits.
std::string make_job_id(const std::string& graph_name);
// Job ids name shared-memory segments and directories: [A-Za-z0-9_-], 1..64 characters.
Status validate_job_id(const std::string& id);

// The value after --metrics-out (or --metrics_out, --metrics-out=...) in a command, or "".
std::string find_metrics_out(const std::vector<std::string>& command);

}  // namespace dgld::launch
