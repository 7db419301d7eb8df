#pragma once
// The machine agent's state and its parts (agent.h). Private to dgl-launch:
//   agent.cpp            the agent's loop, its messages to and from dgl-launch, the entry points
//   agent_io.cpp         stdin, signals and the children's output
//   agent_checks.cpp     preparing and checking the workspace, ports, interfaces, versions
//   agent_processes.cpp  starting, probing, reaping and stopping the job's processes

#include "launcher/launch/agent.h"
#include "launcher/launch/plan.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/cli.h"
#include "common/file_util.h"
#include "common/ip_config.h"
#include "common/part_config.h"
#include "dgld_version.h"
#include "launcher/launch/files.h"
#include "launcher/launch/protocol.h"
#include "launcher/launch/subprocess.h"
#include "common/job_env.h"

namespace dgld::launch::agent_side {
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr size_t kMaxFetchBytes = 64u << 20;

struct Child {
  ProcessSpec spec;
  Subprocess proc;
  std::string buf;
  int log_fd = -1;
  std::optional<int> status;
  Clock::time_point exited_at;
  bool reported = false;
  ~Child() {
    if (log_fd >= 0) ::close(log_fd);
  }
};

struct Draining {
  pid_t pgid;
  Clock::time_point kill_at;
};

// The machine's checks (agent_checks.cpp).
// "graph-server 0.1.0\n" -> "0.1.0".
std::string version_of(const std::string& output, const std::string& program);
// A program of this project (its name is one of dgld's daemons).
bool is_dgld_program(const fs::path& p);
// Why a server of this machine could not listen on `e`; "" when it can.
std::string port_problem(const Endpoint& e);
// The network interface that holds `host`'s address here; "" if none does.
std::string interface_of(const std::string& host);
// Whether something accepts connections on `e` within `timeout`.
bool is_listening(const Endpoint& e, std::chrono::milliseconds timeout);

struct SweepResult {
  int killed = 0;
  int shm_removed = 0;
};

// The job's processes left on this machine and its shared memory (agent_processes.cpp).
SweepResult sweep_job(const std::string& job_id, int machine, std::chrono::milliseconds grace, bool keep_shm);

class Agent {
 public:
  Agent(std::string job_id, int machine, int silence_timeout_s, LogOptions log)
      : job_id_(std::move(job_id)), machine_(machine), silence_timeout_(std::chrono::seconds(silence_timeout_s)),
        log_opts_(std::move(log)) {}

  int run();

 private:
  std::shared_ptr<spdlog::logger> log() { return logger("launcher"); }

  void emit(const json& j);

  void fail(const std::string& phase, const std::string& message) {
    log()->error("{}: {}", phase, message);
    emit({{"ev", "fail"}, {"phase", phase}, {"message", message}});
  }

  void request_stop(const std::string& reason) {
    if (!stop_reason_) stop_reason_ = reason;
  }

  // One poll over stdin, the signal fd and every child's output.
  void pump(std::chrono::milliseconds timeout);

  void read_stdin();

  void read_signals();

  void read_child(Child& c);

  // Complete lines (or, at the end, the rest) of a child's output: to its log and to the launcher.
  void flush_child(Child& c, bool all);

  void send_output(Child& c, const std::string& line) {
    if (c.log_fd >= 0) write_all(c.log_fd, line + "\n");
    emit({{"ev", "out"}, {"role", c.spec.role}, {"rank", c.spec.rank}, {"line", line}});
  }

  void on_line(const std::string& line);

  void prepare(const json& j);

  // Everything that must hold before any process starts; all problems in one message.
  void check();

  void check_configs(std::vector<std::string>& problems);

  // Resolves argv[0] of `procs` (PATH, or relative to the workspace) and checks dgld programs' versions.
  void check_program(std::vector<ProcessSpec>& procs, const std::string& what, bool must_be_dgld,
                     std::vector<std::string>& problems);

  void start(const std::string& group);

  void probe_servers();

  void reap();

  void drain_groups();

  bool any_running() const {
    return std::any_of(children_.begin(), children_.end(), [](const auto& c) { return !c->status; });
  }

  void pump_until(Clock::time_point deadline);

  void stop(const std::string& reason);

  void fetch(const std::string& path);

  // <log_dir>/machine-<m>.json: the job id, this agent and every process it started.
  void write_record();

  std::string job_id_;
  int machine_;
  std::chrono::seconds silence_timeout_;
  Clock::time_point last_input_;
  LogOptions log_opts_;
  AgentSpec spec_;
  bool have_spec_ = false;
  fs::path ws_, log_dir_;
  fs::path secret_path_;  // the job's secret (mode 0600), given to every process; empty: none
  int sigfd_ = -1;
  bool stdin_closed_ = false, out_broken_ = false;
  std::string in_buf_;
  std::optional<std::string> stop_reason_;
  std::vector<std::unique_ptr<Child>> children_;
  std::vector<Draining> draining_;
  bool probing_ = false;
  std::vector<bool> ready_;
  Clock::time_point probe_deadline_, next_probe_;
};

}  // namespace dgld::launch::agent_side
