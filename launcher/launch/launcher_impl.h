#pragma once
// dgl-launch's side of a job (launcher.h): the Launcher that starts a machine
// agent on every machine, copies the files, runs the phases and tears the job
// down, and what it keeps per agent and per process. Private to dgl-launch:
//   launcher.cpp         the run, local checks, the entry points
//   launcher_agents.cpp  ssh, the agents' messages and their end
//   launcher_copy.cpp    copying each machine its files
//   launcher_phases.cpp  the job's phases, metrics, teardown and clean-up
//   launcher_restarts.cpp --max-restarts: the attempts, spares, the report

#include "launcher/launch/launcher.h"
#include "launcher/launch/plan.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/checkpoint_store.h"
#include "common/cli.h"
#include "common/file_util.h"
#include "common/ip_config.h"
#include "common/job_env.h"
#include "common/part_config.h"
#include "common/net/auth.h"
#include "common/stop_signals.h"
#include "dgld_paths.h"
#include "dgld_version.h"
#include "launcher/launch/agent.h"
#include "launcher/launch/files.h"
#include "launcher/launch/protocol.h"
#include "launcher/launch/restarts.h"
#include "launcher/launch/subprocess.h"

namespace dgld::launch::driver {
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr size_t kTailLines = 12;

struct Event {
  enum class Kind { line, eof, err_line, signal, copied } kind;
  int machine = -1;
  std::string text;
  Status status;
};

// Events from the reader, copy and signal threads to the one thread that acts on them.
class EventQueue {
 public:
  void push(Event e) {
    {
      std::lock_guard lock(mu_);
      q_.push_back(std::move(e));
    }
    cv_.notify_one();
  }
  std::optional<Event> pop_until(Clock::time_point deadline) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return !q_.empty(); })) return std::nullopt;
    Event e = std::move(q_.front());
    q_.pop_front();
    return e;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> q_;
};

// An agent that gave no line for this long (it answers the launcher's ping
// every 2 s) is taken for lost when the job stops.
inline constexpr std::chrono::milliseconds kAgentSilent{5000};

struct AgentConn {
  int machine = 0;
  std::string label;
  std::string where;  // "host H (machine m, <ip_config> line L)", for errors about the machine
  Subprocess proc;
  std::thread out_reader, err_reader;
  // The last lines of ssh's / the agent's stderr, kept by its reader thread
  // (not the event loop) so that the message of an agent that ended can wait
  // for them: stdout's end may be handled before stderr's last lines are.
  std::mutex err_mu;
  std::deque<std::string> err_tail;
  std::atomic<bool> err_done{false};
  std::mutex write_mu;  // the launcher's thread and the pinger write to stdin
  json prepared_info;
  std::atomic<bool> eof{false};
  // When its stdout last gave a line (a pong every 2 s at least), by the
  // reader thread: an agent silent for longer than kAgentSilent at the stop is
  // taken for lost, and cleaned up after at once.
  std::atomic<Clock::rep> heard{Clock::now().time_since_epoch().count()};
  bool hello = false, prepared = false, copied = false, checked = false, servers_ready = false,
       trainers_ready = false, stopped = false, fetch_done = false;
  std::optional<std::string> fetched;
};

struct ProcInfo {
  std::string label;
  int machine = 0;
  pid_t pid = 0;
  std::deque<std::string> tail;
};

// Single-quotes `s` for a POSIX shell.
inline std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./=:,+@") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

inline std::string tail_text(const std::deque<std::string>& tail) {
  std::string out;
  for (const auto& l : tail) out += "\n    | " + l;
  return out;
}

inline fs::path self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path("dgl-launch") : p;
}

// graph-server beside dgl-launch (installed), or in the build tree, or the installed package's, or by name.
inline std::string default_graph_server(const fs::path& exe) {
  const fs::path dir = exe.parent_path();
  for (const fs::path& p : {dir / "graph-server", dir / "../../daemons/graph_server/graph-server",
                            fs::path(DGLD_INSTALL_BINDIR) / "graph-server"}) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  }
  return "graph-server";
}

class Launcher {
 public:
  explicit Launcher(LaunchOptions o) : o_(std::move(o)) {}

  int run();

 private:
  std::shared_ptr<spdlog::logger> log() { return logger("launcher"); }

  // ------------------------------------------------------------ local checks
  Status prepare_local();

  fs::path local_path(const std::string& p) const {
    return fs::path(p).is_absolute() ? fs::path(p) : cwd_ / p;
  }

  // ------------------------------------------------------------ agents
  // ssh's connection sharing: the agent's connection is the master of its
  // machine's control socket; copies reuse it (client: no new handshake) and
  // fall back to a connection of their own when it is gone; the clean-up of
  // an agent that did not confirm the stop opens its own (none: the master
  // may hang on a dead link until ssh's keep-alive gives up).
  enum class Mux { master, client, none };

  // ssh -o options; the user's --ssh-option first, so they win (ssh keeps the first value).
  std::vector<std::string> ssh_options(int machine, Mux mux) const;

  std::vector<std::string> ssh_command(int machine, Mux mux) const;

  std::string remote_target(const MachinePlan& m) const {
    return o_.ssh_username.empty() ? m.address.host : o_.ssh_username + "@" + m.address.host;
  }

  // dgl-launch --machine-agent on machine m: directly with --local, else through ssh.
  std::vector<std::string> agent_command(const MachinePlan& m, const std::vector<std::string>& extra,
                                         Mux mux = Mux::client) const;

  AgentSpec spec_for(const MachinePlan& m) const;

  void start_agents();

  void send(AgentConn& a, const json& j);

  void send_all(const json& j) {
    for (auto& a : agents_) send(*a, j);
  }

  bool all(bool AgentConn::*flag) const {
    return std::all_of(agents_.begin(), agents_.end(), [&](const auto& a) { return (*a).*flag; });
  }

  std::string missing(bool AgentConn::*flag) const;

  // Acts on events until `done` holds; false on a failure, a signal or the deadline.
  bool wait_for(const std::function<bool()>& done, Clock::time_point deadline,
                const std::function<FailureCause()>& on_timeout);

  bool wait_all(bool AgentConn::*flag, std::chrono::seconds timeout, const std::string& what);

  void handle(const Event& ev);

  void on_eof(AgentConn& a);

  void on_message(AgentConn& a, const json& j);

  void on_exit(AgentConn& a, const std::string& role, int rank, int status);

  int total_trainers() const { return o_.num_trainers * static_cast<int>(plan_.machines.size()); }

  // The attempt's first failure stops it; `cause` (with the message) decides
  // whether the job starts again (restarts.h).
  void fail(FailureCause cause);
  void fail(std::string message) {
    FailureCause c;
    c.kind = FailureCause::Kind::other;
    c.message = std::move(message);
    fail(std::move(c));
  }
  FailureCause machine_failure(FailureCause::Kind kind, int machine, std::string message) const;

  // ------------------------------------------------------------ copying
  // rsync of `sources` into `dest` on machine m; `relative`: sources hold "/./" and keep their path below it (-R).
  std::vector<std::string> rsync_command(const std::vector<std::string>& sources, const MachinePlan& m,
                                         const std::string& dest, bool relative) const;

  std::vector<std::string> scp_command(const fs::path& from, const MachinePlan& m, const fs::path& to) const;

  Status copy_to_machine(const MachinePlan& m, const json& prepared, Clock::time_point deadline);

  Status copy_locally();

  bool copy_files();

  // ------------------------------------------------------------ phases
  void run_phases();

  void fetch_metrics();

  void teardown();

  // A machine whose agent did not confirm the stop (killed, its connection
  // lost, silent): a new connection runs `dgl-launch --machine-agent
  // --cleanup` there, which kills what the job left by job id (any thread);
  // then its report (the launcher's thread: logs, marks it unreachable).
  struct CleanUp {
    Result<CommandResult> run;
    std::optional<json> cleaned;
  };
  CleanUp run_clean_up(const AgentConn& a) const;
  void report_clean_up(const AgentConn& a, const CleanUp& c);

  // ------------------------------------------------------------ restarts
  // plan_ for attempt_: its job id (<job>-r<k> after the first), the
  // machines with spares in place (then an ip_config of its own in the
  // attempt's log directory), DGLD_RESTART; and the ssh control directory.
  Status plan_attempt();
  // Per-attempt state back to its start, for the next attempt.
  void reset_attempt();
  // After a failed attempt (teardown took teardown_s): decides, replaces a
  // lost machine by a spare, backs off; false: the job ends here.
  bool prepare_restart(double teardown_s);
  // ssh reaches `a` and runs dgl-launch there (always true with --local).
  bool probe(const MachineAddress& a);
  // Machine m's place to the next reachable spare; false when none is left.
  bool replace_with_spare(int m, const std::string& why, RestartRecord& record);
  // Waits `seconds`; false when a signal came first.
  bool wait_backoff(double seconds);
  // A trainer's "dgld-progress" line: checkpoints committed, runs resumed.
  void on_progress(const ProgressEvent& e);
  void report_restarts();

  LaunchOptions o_;
  JobPlan plan_;
  fs::path cwd_;
  fs::path control_dir_;  // ssh control sockets, one per machine (removed at the end)
  bool local_rsync_ = false;
  std::string secret_;  // the job's shared secret; empty with --no-auth
  EventQueue q_;
  std::vector<std::unique_ptr<AgentConn>> agents_;
  std::map<std::pair<std::string, int>, ProcInfo> procs_;
  std::optional<std::string> failure_;
  FailureCause cause_;
  Clock::time_point failed_at_;
  std::string signal_name_;
  bool started_any_ = false, stopping_ = false;
  // Across attempts (launcher_restarts.cpp).
  IpConfig ip_;                            // as read: the machines and the spares
  std::string ip_text_;                    // the ip_config, spares in place once one is used
  bool replaced_any_ = false;
  std::vector<MachineAddress> machines_;   // this attempt's machines
  std::vector<MachineAddress> spares_left_;
  PartitionConfig config_;
  std::string base_job_id_;
  std::string attempt_ip_config_;          // the ip_config this attempt's processes read
  int attempt_ = 0;
  bool started_any_job_ = false;           // some attempt started a process (the exit code)
  Clock::time_point job_start_;
  std::vector<RestartRecord> restarts_;
  std::optional<FailureCause> previous_cause_;
  std::map<int, int> start_failures_;      // machine -> attempts in a row its processes failed to start
  std::set<int> unreachable_;              // machines ssh could not reach to clean up after this attempt
  int restarts_in_a_row_ = 0;              // restarts since an attempt last committed a checkpoint
  std::optional<CheckpointPosition> newest_checkpoint_, checkpoint_at_attempt_start_;
  std::optional<Clock::time_point> work_since_;  // the last point this attempt's training would restart from
  std::optional<Clock::time_point> trainers_started_at_;
  int trainers_done_ = 0;
  std::atomic<bool> cancel_copies_{false};
  std::vector<std::thread> copiers_;
  std::thread pinger_;
  std::mutex ping_mu_;
  std::condition_variable ping_cv_;
  bool ping_stop_ = false;
};

}  // namespace dgld::launch::driver
