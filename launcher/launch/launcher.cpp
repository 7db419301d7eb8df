#include "launcher/launch/launcher.h"

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

#include "common/file_util.h"
#include "common/net/auth.h"
#include "common/stop_signals.h"
#include "dgld_version.h"
#include "launcher/launch/agent.h"
#include "launcher/launch/files.h"
#include "launcher/launch/protocol.h"
#include "launcher/launch/subprocess.h"

namespace dgld::launch {
namespace {
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

struct AgentConn {
  int machine = 0;
  std::string label;
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
std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./=:,+@") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string tail_text(const std::deque<std::string>& tail) {
  std::string out;
  for (const auto& l : tail) out += "\n    | " + l;
  return out;
}

fs::path self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path("dgl-launch") : p;
}

// graph-server beside dgl-launch (installed), or in the build tree, or by name.
std::string default_graph_server(const fs::path& exe) {
  const fs::path dir = exe.parent_path();
  for (const fs::path& p : {dir / "graph-server", dir / "../../daemons/graph_server/graph-server"}) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  }
  return "graph-server";
}

class Launcher {
 public:
  explicit Launcher(LaunchOptions o) : o_(std::move(o)) {}

  int run() {
    StopSignals signals;  // first, before any thread: SIGINT/SIGTERM blocked everywhere
    const auto t0 = Clock::now();
    if (Status st = prepare_local(); !st.is_ok()) {
      log()->error("failed before anything started: {}", st.message());
      return kExitNotStarted;
    }
    signals.watch([this](const std::string& sig) {
      q_.push({Event::Kind::signal, -1, sig, {}});
    });
    log()->info("job {}: {} machine(s), {} graph-server(s) and {} trainer(s) each{}; workspace {}, logs in {}/{}",
                plan_.job_id, plan_.machines.size(), o_.num_servers, o_.num_trainers,
                o_.num_samplers ? fmt::format(" ({} sampler-worker(s) per trainer)", o_.num_samplers) : "",
                o_.workspace, o_.workspace, plan_.log_dir);
    run_phases();
    teardown();
    signals.unwatch();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (signal_name_.size()) {
      log()->error("job {} interrupted by {} after {:.1f} s; every process stopped", plan_.job_id, signal_name_, secs);
      return 128 + (signal_name_ == "SIGINT" ? SIGINT : SIGTERM);
    }
    if (failure_) {
      log()->error("job {} failed{}: {}", plan_.job_id, started_any_ ? "" : " before anything started", *failure_);
      return started_any_ ? kExitJobFailed : kExitNotStarted;
    }
    log()->info("job {} finished in {:.1f} s: {} trainer(s) exited 0", plan_.job_id, secs, trainers_done_);
    return kExitOk;
  }

 private:
  std::shared_ptr<spdlog::logger> log() { return logger("launcher"); }

  // ------------------------------------------------------------ local checks
  Status prepare_local() {
    std::error_code ec;
    cwd_ = fs::current_path(ec);
    if (o_.local) o_.workspace = fs::absolute(o_.workspace, ec).lexically_normal().string();
    const fs::path exe = self_exe();
    if (o_.agent_bin.empty()) o_.agent_bin = exe.string();
    if (o_.graph_server_bin.empty()) o_.graph_server_bin = default_graph_server(exe);
    DGLD_ASSIGN_OR_RETURN(auto machines, load_ip_config(local_path(o_.ip_config)));
    DGLD_ASSIGN_OR_RETURN(auto config, load_part_config(local_path(o_.part_config)));
    DGLD_ASSIGN_OR_RETURN(plan_, make_job_plan(o_, machines, config));
    if (!o_.no_auth) {
      if (o_.secret_file.empty()) {
        const net::AuthNonce key = net::random_nonce();
        for (uint8_t b : key) secret_ += fmt::format("{:02x}", b);
      } else {
        DGLD_ASSIGN_OR_RETURN(auto secret, net::load_secret_file(local_path(o_.secret_file)));
        secret_.assign(secret->key().begin(), secret->key().end());
      }
    }
    if (!o_.no_copy) {
      for (const auto& m : plan_.machines) {
        for (const auto& f : m.files) {
          if (!fs::is_regular_file(local_path(f), ec)) {
            return not_found(fmt::format("{} for machine {} ({}) is missing here: {} (copying needs it; "
                                         "--no-copy if every machine already has its files)",
                                         f == o_.ip_config ? "ip_config" : f == o_.part_config ? "partition config"
                                                                                               : "partition file",
                                         m.machine, m.label, local_path(f).string()));
          }
        }
      }
    }
    if (!o_.local) {
      const char* path = std::getenv("PATH");
      if (find_executable("ssh", path ? path : "", {}).empty()) {
        return not_found("ssh (the OpenSSH client) is not installed here; --local runs on this machine only");
      }
      local_rsync_ = !find_executable("rsync", path ? path : "", {}).empty();
      std::string tmpl = (fs::temp_directory_path() / "dgl-launch-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) == nullptr) return io_error("cannot create a directory for ssh control sockets: " + errno_string());
      control_dir_ = tmpl;
    }
    return Status::ok();
  }

  fs::path local_path(const std::string& p) const {
    return fs::path(p).is_absolute() ? fs::path(p) : cwd_ / p;
  }

  // ------------------------------------------------------------ agents
  // How a mux role: the agent's connection is the master of its machine's
  // control socket; copies and the clean-up reuse it (no new handshake) and
  // fall back to a connection of their own when it is gone.
  enum class Mux { master, client };

  // ssh -o options; the user's --ssh-option first, so they win (ssh keeps the first value).
  std::vector<std::string> ssh_options(int machine, Mux mux) const {
    std::vector<std::string> v;
    for (const auto& kv : o_.ssh_options) v.insert(v.end(), {"-o", kv});
    v.insert(v.end(), {"-o", "BatchMode=yes", "-o", fmt::format("ConnectTimeout={}", o_.connect_timeout_s), "-o",
                       "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"});
    if (!o_.identity_file.empty()) v.insert(v.end(), {"-i", o_.identity_file, "-o", "IdentitiesOnly=yes"});
    if (!control_dir_.empty()) {
      v.insert(v.end(), {"-o", fmt::format("ControlPath={}/m{}", control_dir_.string(), machine), "-o",
                         mux == Mux::master ? "ControlMaster=yes" : "ControlMaster=no", "-o", "ControlPersist=no"});
    }
    return v;
  }

  std::vector<std::string> ssh_command(int machine, Mux mux) const {
    std::vector<std::string> v = {"ssh", "-T", "-x", "-a"};
    if (o_.ssh_port) v.insert(v.end(), {"-p", std::to_string(o_.ssh_port)});
    if (!o_.ssh_username.empty()) v.insert(v.end(), {"-l", o_.ssh_username});
    auto opts = ssh_options(machine, mux);
    v.insert(v.end(), opts.begin(), opts.end());
    return v;
  }

  std::string remote_target(const MachinePlan& m) const {
    return o_.ssh_username.empty() ? m.address.host : o_.ssh_username + "@" + m.address.host;
  }

  // dgl-launch --machine-agent on machine m: directly with --local, else through ssh.
  std::vector<std::string> agent_command(const MachinePlan& m, const std::vector<std::string>& extra,
                                         Mux mux = Mux::client) const {
    std::vector<std::string> argv = {o_.agent_bin, "--machine-agent", "--job-id", plan_.job_id,
                                     "--machine", std::to_string(m.machine), "--log-level", o_.log.level};
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (o_.local) return argv;
    std::vector<std::string> quoted;
    for (const auto& x : argv) quoted.push_back(shell_quote(x));
    std::vector<std::string> ssh = ssh_command(m.machine, mux);
    ssh.push_back(m.address.host);
    ssh.push_back("exec " + join(quoted, " "));
    return ssh;
  }

  AgentSpec spec_for(const MachinePlan& m) const {
    AgentSpec s;
    s.version = DGLD_VERSION;
    s.job_id = plan_.job_id;
    s.machine = m.machine;
    s.label = m.label;
    s.workspace = o_.workspace;
    s.log_dir = plan_.log_dir;
    s.part_config = o_.part_config;
    s.ip_config = o_.ip_config;
    s.grace_ms = o_.grace_ms;
    s.start_timeout_ms = o_.start_timeout_s * 1000;
    // A host's cores shared by every trainer it runs: --local, or several
    // ip_config lines naming one host, puts several machines' trainers there.
    int machines_on_host = 0;
    for (const auto& other : plan_.machines) machines_on_host += other.address.host == m.address.host ? 1 : 0;
    s.omp_threads_auto_divisor = o_.num_omp_threads > 0 ? 0 : o_.num_trainers * std::max(1, machines_on_host);
    s.hash_files = !o_.no_copy && !o_.local && !(o_.copy_method != "scp" && local_rsync_);
    s.external_servers = m.external_servers;
    s.secret = secret_;
    s.files = m.files;
    s.servers = m.servers;
    s.trainers = m.trainers;
    s.server_ports = m.server_ports;
    s.other_ports = m.other_ports;
    return s;
  }

  void start_agents() {
    for (const auto& m : plan_.machines) {
      auto a = std::make_unique<AgentConn>();
      a->machine = m.machine;
      a->label = m.label;
      SpawnOptions so;
      so.pipe_stdin = true;
      so.separate_stderr = true;
      so.parent_death_signal = SIGTERM;
      so.argv = agent_command(m, {"--agent-timeout-s", std::to_string(o_.agent_timeout_s)}, Mux::master);
      log()->debug("machine {}: {}", m.machine, join(so.argv, " "));
      auto proc = Subprocess::spawn(so);
      if (!proc.is_ok()) {
        fail(fmt::format("host {} (machine {}): cannot start {}: {}", m.label, m.machine,
                         o_.local ? "the machine agent" : "ssh", proc.status().message()));
        agents_.push_back(std::move(a));
        agents_.back()->eof = agents_.back()->stopped = true;
        continue;
      }
      a->proc = std::move(*proc);
      const int out_fd = a->proc.stdout_fd(), err_fd = a->proc.stderr_fd(), mi = m.machine;
      a->out_reader = std::thread([this, out_fd, mi] {
        std::string buf, line;
        while (read_line(out_fd, buf, line)) q_.push({Event::Kind::line, mi, std::move(line), {}});
        q_.push({Event::Kind::eof, mi, "", {}});
      });
      a->err_reader = std::thread([this, err_fd, mi, ap = a.get()] {
        std::string buf, line;
        while (read_line(err_fd, buf, line, 1 << 20)) {
          {
            std::lock_guard lock(ap->err_mu);
            ap->err_tail.push_back(line);
            if (ap->err_tail.size() > kTailLines) ap->err_tail.pop_front();
          }
          q_.push({Event::Kind::err_line, mi, std::move(line), {}});
        }
        ap->err_done = true;
      });
      json prepare = to_json(spec_for(m));
      prepare["op"] = "prepare";
      agents_.push_back(std::move(a));
      send(*agents_.back(), prepare);
    }
  }

  void send(AgentConn& a, const json& j) {
    std::lock_guard lock(a.write_mu);
    if (a.eof || a.proc.stdin_fd() < 0) return;
    if (!write_all(a.proc.stdin_fd(), encode_line(j) + "\n")) {
      log()->debug("{}: cannot write to the agent: {}", a.label, errno_string());
    }
  }

  void send_all(const json& j) {
    for (auto& a : agents_) send(*a, j);
  }

  bool all(bool AgentConn::*flag) const {
    return std::all_of(agents_.begin(), agents_.end(), [&](const auto& a) { return (*a).*flag; });
  }

  std::string missing(bool AgentConn::*flag) const {
    std::vector<std::string> v;
    for (const auto& a : agents_) {
      if (!((*a).*flag)) v.push_back(fmt::format("{} (machine {})", a->label, a->machine));
    }
    return join(v, ", ");
  }

  // Acts on events until `done` holds; false on a failure, a signal or the deadline.
  bool wait_for(const std::function<bool()>& done, Clock::time_point deadline, const std::function<std::string()>& on_timeout) {
    for (;;) {
      if (failure_ || !signal_name_.empty()) return false;
      if (done()) return true;
      auto ev = q_.pop_until(deadline);
      if (!ev) {
        fail(on_timeout());
        return false;
      }
      handle(*ev);
    }
  }

  bool wait_all(bool AgentConn::*flag, std::chrono::seconds timeout, const std::string& what) {
    return wait_for([&] { return all(flag); }, Clock::now() + timeout, [&] {
      return fmt::format("no answer within {} s {} from {}", timeout.count(), what, missing(flag));
    });
  }

  void handle(const Event& ev) {
    if (ev.kind == Event::Kind::signal) {
      if (signal_name_.empty()) {
        signal_name_ = ev.text;
        log()->warn("received {}: stopping every process on every machine", ev.text);
      }
      return;
    }
    AgentConn& a = *agents_[static_cast<size_t>(ev.machine)];
    switch (ev.kind) {
      case Event::Kind::line: {
        auto j = decode_line(ev.text);
        if (!j.is_ok()) {
          log()->warn("{}: unexpected output on the agent's channel: {}", a.label, ev.text.substr(0, 300));
        } else {
          on_message(a, *j);
        }
        break;
      }
      case Event::Kind::err_line:
        log()->debug("{}/agent: {}", a.label, ev.text);
        break;
      case Event::Kind::eof:
        on_eof(a);
        break;
      case Event::Kind::copied:
        a.copied = true;
        if (!ev.status.is_ok()) fail(ev.status.message());
        break;
      case Event::Kind::signal:
        break;
    }
  }

  void on_eof(AgentConn& a) {
    a.eof = true;
    if (a.stopped) return;
    const auto st = a.proc.wait_for(2s);
    std::string how;
    if (!st) {
      how = "its output ended";
    } else if (!o_.local && *st == 255) {
      how = "ssh failed (exit 255)";
    } else if (*st == 127) {
      how = fmt::format("{} was not found there (exit 127)", o_.agent_bin);
    } else {
      how = (o_.local ? "the agent " : "the agent or ssh ") + describe_exit(*st);
    }
    // Its stderr ends with it (ssh's last words: "Connection refused"), or
    // stays open in a process it left behind: a bounded wait either way.
    for (const auto until = Clock::now() + 1s; !a.err_done && Clock::now() < until;) {
      std::this_thread::sleep_for(10ms);
    }
    std::string tail;
    {
      std::lock_guard lock(a.err_mu);
      for (const auto& l : a.err_tail) tail += "\n    | " + l;
    }
    if (!a.hello) {
      fail(fmt::format("host {} (machine {}): cannot start the machine agent{}: {}{}", a.label, a.machine,
                       o_.local ? "" : " over ssh", how, tail));
    } else {
      fail(fmt::format("host {} (machine {}): lost the connection to its machine agent: {}{}", a.label, a.machine, how,
                       tail));
    }
  }

  void on_message(AgentConn& a, const json& j) {
    const std::string ev = j.value("ev", "");
    if (ev == "out") {
      const std::string role = j.value("role", ""), line = j.value("line", "");
      const int rank = j.value("rank", -1);
      std::string text = fmt::format("{}/{}/{}: {}\n", a.label, role, rank, line);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      auto& tail = procs_[{role, rank}].tail;
      tail.push_back(line);
      if (tail.size() > kTailLines) tail.pop_front();
    } else if (ev == "hello") {
      a.hello = true;
      const std::string v = j.value("version", "");
      if (v != DGLD_VERSION) {
        fail(fmt::format("host {} (machine {}): {} there is version {} but this dgl-launch is {}: install the same "
                         "dgld build on every machine", a.label, a.machine, o_.agent_bin, v, DGLD_VERSION));
      }
    } else if (ev == "prepared") {
      a.prepared = true;
      a.prepared_info = j;
    } else if (ev == "checked") {
      a.checked = true;
    } else if (ev == "ready") {
      (j.value("group", "") == "servers" ? a.servers_ready : a.trainers_ready) = true;
    } else if (ev == "started") {
      started_any_ = true;
      auto& p = procs_[{j.value("role", ""), j.value("rank", -1)}];
      p.label = a.label;
      p.machine = a.machine;
      p.pid = j.value("pid", 0);
    } else if (ev == "exit") {
      on_exit(a, j.value("role", ""), j.value("rank", -1), j.value("status", -1));
    } else if (ev == "file") {
      auto data = base64_decode(j.value("data", ""));
      if (data.is_ok()) a.fetched = std::move(*data);
      a.fetch_done = true;
    } else if (ev == "fail") {
      const std::string phase = j.value("phase", ""), message = j.value("message", "");
      if (phase == "fetch") {
        a.fetch_done = true;
        log()->warn("host {} (machine {}): {}", a.label, a.machine, message);
      } else {
        fail(fmt::format("host {} (machine {}): {}", a.label, a.machine, message));
      }
    } else if (ev == "stopped") {
      a.stopped = true;
      const int killed = j.value("killed", 0), shm = j.value("shm_removed", 0);
      (killed ? log()->warn("host {}: stopped; {} process(es) needed SIGKILL; {} shared-memory segment(s) removed",
                             a.label, killed, shm)
              : log()->info("host {}: stopped; {} shared-memory segment(s) removed", a.label, shm));
    } else {
      log()->warn("{}: unknown message from the agent: {}", a.label, encode_line(j).substr(0, 300));
    }
  }

  void on_exit(AgentConn& a, const std::string& role, int rank, int status) {
    const auto& p = procs_[{role, rank}];
    if (stopping_) {
      log()->debug("{}/{}/{} {}", a.label, role, rank, describe_exit(status));
      return;
    }
    if (role == "trainer" && status == 0) {
      ++trainers_done_;
      log()->info("{}/trainer/{} finished ({} of {} trainers)", a.label, rank, trainers_done_, total_trainers());
      return;
    }
    if (role == "server" && status == 0) {
      log()->info("{}/server/{} exited 0 (asked to shut down)", a.label, rank);
      return;
    }
    fail(fmt::format("host {} (machine {}): {} {} (pid {}) {}; last lines of {}/{}/{}-{}.log:{}", a.label, a.machine,
                     role, rank, p.pid, describe_exit(status), o_.workspace, plan_.log_dir, role, rank,
                     tail_text(p.tail)));
  }

  int total_trainers() const { return o_.num_trainers * static_cast<int>(plan_.machines.size()); }

  void fail(std::string message) {
    if (failure_) return;
    log()->error("stopping every process on every machine: {}", message);
    failure_ = std::move(message);
  }

  // ------------------------------------------------------------ copying
  // rsync of `sources` into `dest` on machine m; `relative`: sources hold "/./" and keep their path below it (-R).
  std::vector<std::string> rsync_command(const std::vector<std::string>& sources, const MachinePlan& m,
                                         const std::string& dest, bool relative) const {
    std::vector<std::string> quoted;
    for (const auto& x : ssh_command(m.machine, Mux::client)) quoted.push_back(shell_quote(x));
    std::vector<std::string> v = {"rsync", "-a", "--checksum", "--protect-args", "--timeout=60",
                                  "--out-format=dgld-sent %n", "-e", join(quoted, " ")};
    if (relative) v.push_back("--relative");
    v.insert(v.end(), sources.begin(), sources.end());
    v.push_back(remote_target(m) + ":" + dest);
    return v;
  }

  std::vector<std::string> scp_command(const fs::path& from, const MachinePlan& m, const fs::path& to) const {
    std::vector<std::string> v = {"scp", "-q", "-p"};
    if (o_.ssh_port) v.insert(v.end(), {"-P", std::to_string(o_.ssh_port)});
    auto opts = ssh_options(m.machine, Mux::client);
    v.insert(v.end(), opts.begin(), opts.end());
    v.insert(v.end(), {from.string(), remote_target(m) + ":" + to.string()});
    return v;
  }

  Status copy_to_machine(const MachinePlan& m, const json& prepared, Clock::time_point deadline) {
    const bool remote_rsync = prepared.value("rsync", false);
    bool rsync = o_.copy_method == "rsync" || (o_.copy_method == "auto" && local_rsync_ && remote_rsync);
    if (o_.copy_method == "rsync" && !(local_rsync_ && remote_rsync)) {
      return not_found(fmt::format("host {} (machine {}): --copy-method rsync, but rsync is not installed {}", m.label,
                                   m.machine, local_rsync_ ? "there" : "here"));
    }
    // One command per transfer: with rsync, every file below the launcher's directory in one
    // (-R keeps their paths), others alone; with scp, each file whose checksum differs there.
    struct Transfer {
      std::vector<std::string> argv;
      std::string what;
      int files = 0;
    };
    std::vector<Transfer> transfers;
    int current = 0;
    Transfer batch{{}, "", 0};
    std::vector<std::string> batch_sources;
    for (const auto& f : m.files) {
      const fs::path from = local_path(f), to = in_workspace(o_.workspace, f);
      const fs::path rel = fs::path(f).lexically_normal();
      if (rsync && rel.is_relative() && !rel.empty() && *rel.begin() != "..") {
        batch_sources.push_back((cwd_ / "." / rel).string());
        batch.what += (batch.what.empty() ? "" : ", ") + rel.string();
        ++batch.files;
      } else if (rsync) {
        transfers.push_back({rsync_command({from.string()}, m, to.string(), false), from.string(), 1});
      } else {
        DGLD_ASSIGN_OR_RETURN(auto d, digest_file(from));
        const json& there = prepared["files"];
        if (there.contains(f) && there[f].value("size", uint64_t{0}) == d.size &&
            there[f].value("crc32", uint32_t{0}) == d.crc32) {
          ++current;
          continue;
        }
        transfers.push_back({scp_command(from, m, to), from.string(), 1});
      }
    }
    if (batch.files) {
      batch.argv = rsync_command(batch_sources, m, o_.workspace + "/", true);
      transfers.insert(transfers.begin(), std::move(batch));
    }
    const auto t0 = Clock::now();
    int sent = 0, files = 0;
    for (const auto& t : transfers) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      DGLD_ASSIGN_OR_RETURN(auto r, run_command(t.argv, std::max(left, 1ms), &cancel_copies_));
      if (r.cancelled) return closed_error("copy cancelled");
      if (r.timed_out || r.status != 0) {
        return io_error(fmt::format("host {} (machine {}): copying {} to {} with {} failed ({}): {}", m.label, m.machine,
                                    t.what, o_.workspace, rsync ? "rsync" : "scp",
                                    r.timed_out ? fmt::format("not done within --copy-timeout-s {}", o_.copy_timeout_s)
                                                : describe_exit(r.status),
                                    r.output));
      }
      files += t.files;
      if (!rsync) sent += t.files;
      std::istringstream lines(r.output);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("dgld-sent ", 0) == 0 && line.back() != '/') ++sent;  // files, not directories
      }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rsync) {
      log()->info("host {}: rsync --checksum: {} of {} file(s) transferred, the rest already there, in {:.1f} s",
                  m.label, sent, files, secs);
    } else {
      log()->info("host {}: scp: {} file(s) copied, {} already there with the same checksum, in {:.1f} s", m.label,
                  sent, current, secs);
    }
    return Status::ok();
  }

  Status copy_locally() {
    int copied = 0, current = 0;
    std::set<std::string> done;
    for (const auto& m : plan_.machines) {
      for (const auto& f : m.files) {
        if (!done.insert(f).second) continue;
        if (cancel_copies_) return closed_error("copy cancelled");
        DGLD_ASSIGN_OR_RETURN(bool c, copy_if_different(local_path(f), in_workspace(o_.workspace, f)));
        (c ? copied : current)++;
      }
    }
    log()->info("workspace {}: copied {} file(s), {} already there", o_.workspace, copied, current);
    return Status::ok();
  }

  bool copy_files() {
    const auto deadline = Clock::now() + std::chrono::seconds(o_.copy_timeout_s);
    if (o_.local) {
      copiers_.emplace_back([this] {
        Status st = copy_locally();
        for (size_t m = 0; m < plan_.machines.size(); ++m) {
          q_.push({Event::Kind::copied, static_cast<int>(m), "", m == 0 ? st : Status::ok()});
        }
      });
    } else {
      for (size_t m = 0; m < plan_.machines.size(); ++m) {
        copiers_.emplace_back([this, m, deadline, prepared = agents_[m]->prepared_info] {
          Status st = copy_to_machine(plan_.machines[m], prepared, deadline);
          q_.push({Event::Kind::copied, static_cast<int>(m), "", st});
        });
      }
    }
    return wait_for([&] { return all(&AgentConn::copied); }, deadline + 5s,
                    [&] { return "copying files did not finish in time for " + missing(&AgentConn::copied); });
  }

  // ------------------------------------------------------------ phases
  void run_phases() {
    start_agents();
    pinger_ = std::thread([this] {
      std::unique_lock lock(ping_mu_);
      while (!ping_cv_.wait_for(lock, 2s, [&] { return ping_stop_; })) {
        lock.unlock();
        for (auto& a : agents_) send(*a, {{"op", "ping"}});
        lock.lock();
      }
    });
    if (!wait_all(&AgentConn::prepared, std::chrono::seconds(o_.connect_timeout_s + 30), "to 'prepare'")) return;
    if (!o_.no_copy && !copy_files()) return;
    send_all({{"op", "check"}});
    if (!wait_all(&AgentConn::checked, 90s, "to 'check'")) return;
    if (!o_.external_servers) {
      send_all({{"op", "start"}, {"group", "servers"}});
      if (!wait_all(&AgentConn::servers_ready, std::chrono::seconds(o_.start_timeout_s + 15), "with servers listening")) {
        return;
      }
    }
    log()->info("all {} graph-server(s) listening{}; starting {} trainer(s)",
                o_.num_servers * static_cast<int>(plan_.machines.size()),
                o_.external_servers ? " (external: left running at the end)" : "", total_trainers());
    send_all({{"op", "start"}, {"group", "trainers"}});
    if (!wait_all(&AgentConn::trainers_ready, 60s, "with trainers started")) return;
    if (!wait_for([&] { return trainers_done_ == total_trainers(); }, Clock::time_point::max(),
                  [] { return std::string("unreachable"); })) {
      return;
    }
    if (!plan_.metrics_out.empty()) fetch_metrics();
  }

  void fetch_metrics() {
    AgentConn& a0 = *agents_[0];
    send(a0, {{"op", "fetch"}, {"path", plan_.metrics_out}});
    if (!wait_for([&] { return a0.fetch_done; }, Clock::now() + 60s,
                  [&] { return "host " + a0.label + ": no answer within 60 s to fetching " + plan_.metrics_out; })) {
      return;
    }
    if (!a0.fetched) return;  // already warned
    const fs::path src = in_workspace(o_.workspace, plan_.metrics_out);
    const fs::path dst = fs::path(plan_.metrics_out).is_absolute() ? cwd_ / fs::path(plan_.metrics_out).filename()
                                                                    : cwd_ / plan_.metrics_out;
    std::error_code ec;
    if (o_.local && fs::exists(dst, ec) && fs::equivalent(src, dst, ec)) {
      log()->info("metrics of rank 0: {}", dst.string());
      return;
    }
    fs::create_directories(dst.parent_path(), ec);
    if (Status st = write_file_atomic(dst, *a0.fetched); !st.is_ok()) {
      log()->warn("cannot write the metrics of rank 0: {}", st.message());
    } else {
      log()->info("metrics of rank 0 fetched from {}:{} to {}", a0.label, src.string(), dst.string());
    }
  }

  void teardown() {
    stopping_ = true;
    cancel_copies_ = true;
    const std::string reason = failure_ ? "a failure" : !signal_name_.empty() ? signal_name_ : "the job is done";
    send_all({{"op", "stop"}, {"reason", reason}});
    // The agents stop their processes (SIGTERM, SIGKILL after the grace period) and say so.
    const auto deadline = Clock::now() + std::chrono::milliseconds(o_.grace_ms) + 1500ms;
    for (;;) {
      const bool done = std::all_of(agents_.begin(), agents_.end(), [](const auto& a) { return a->stopped || a->eof; });
      if (done) break;
      auto ev = q_.pop_until(deadline);
      if (!ev) break;
      if (ev->kind == Event::Kind::eof) {
        agents_[static_cast<size_t>(ev->machine)]->eof = true;
      } else if (ev->kind != Event::Kind::copied || !ev->status.is_ok()) {
        handle(*ev);
      }
    }
    {
      std::lock_guard lock(ping_mu_);
      ping_stop_ = true;
    }
    ping_cv_.notify_all();
    if (pinger_.joinable()) pinger_.join();
    for (auto& a : agents_) {
      if (!a->stopped && a->proc.pid() > 0 && !a->eof) {
        log()->warn("host {} (machine {}): its agent did not confirm the stop; closing the connection (the agent "
                    "stops everything when it ends)", a->label, a->machine);
      }
      std::lock_guard lock(a->write_mu);
      a->proc.close_stdin();
    }
    for (auto& a : agents_) {
      if (a->proc.pid() > 0 && !a->proc.wait_for(a->stopped ? 2000ms : 200ms)) {
        a->proc.signal_group(SIGTERM);
        if (!a->proc.wait_for(500ms)) a->proc.signal_group(SIGKILL);
        a->proc.wait_for(2s);
      }
    }
    for (auto& t : copiers_) t.join();
    for (auto& a : agents_) {
      if (a->out_reader.joinable()) a->out_reader.join();
      if (a->err_reader.joinable()) a->err_reader.join();
    }
    for (auto& a : agents_) {
      if (!a->stopped && a->hello) clean_up_after(*a);
    }
    // Drain what the readers left, for the record (exit lines, last output).
    while (auto ev = q_.pop_until(Clock::now())) {
      if (ev->kind == Event::Kind::line || ev->kind == Event::Kind::err_line) handle(*ev);
    }
    if (!control_dir_.empty()) {
      std::error_code ec;
      fs::remove_all(control_dir_, ec);
    }
  }

  // A machine whose agent vanished (killed, or its connection lost): one more
  // connection kills what the job left there, by job id.
  void clean_up_after(const AgentConn& a) {
    const MachinePlan& m = plan_.machines[static_cast<size_t>(a.machine)];
    std::vector<std::string> extra = {"--cleanup", "--stop-grace-ms", std::to_string(std::min(o_.grace_ms, 1000))};
    if (o_.external_servers) extra.push_back("--keep-shm");
    const auto argv = agent_command(m, extra);
    auto r = run_command(argv, std::chrono::seconds(o_.connect_timeout_s + 5));
    std::optional<json> cleaned;
    if (r.is_ok() && r->status == 0) {
      std::string rest = r->output;
      while (!rest.empty()) {
        const auto nl = rest.find('\n');
        auto j = decode_line(rest.substr(0, nl));
        if (j.is_ok() && j->value("ev", "") == "cleaned") cleaned = *j;
        rest = nl == std::string::npos ? "" : rest.substr(nl + 1);
      }
    }
    if (!cleaned) {
      log()->error("host {} (machine {}): cannot clean up after its lost agent ({}); processes of job {} may remain "
                   "there: run '{} --machine-agent --cleanup --job-id {} --machine {}' on it", a.label, a.machine,
                   r.is_ok() ? describe_exit(r->status) + ": " + r->output : r.status().message(), plan_.job_id,
                   o_.agent_bin, plan_.job_id, a.machine);
      return;
    }
    log()->warn("host {} (machine {}): cleaned up after its lost agent: {} process(es) of the job killed, {} "
                "shared-memory segment(s) removed", a.label, a.machine, cleaned->value("killed", 0),
                cleaned->value("shm_removed", 0));
  }

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
  std::string signal_name_;
  bool started_any_ = false, stopping_ = false;
  int trainers_done_ = 0;
  std::atomic<bool> cancel_copies_{false};
  std::vector<std::thread> copiers_;
  std::thread pinger_;
  std::mutex ping_mu_;
  std::condition_variable ping_cv_;
  bool ping_stop_ = false;
};

}  // namespace

namespace {
// --write-server-env DIR: the systemd environment files of every graph-server of the job.
int write_server_env(const LaunchOptions& o) {
  auto fail = [](const Status& st) {
    logger("launcher")->error("{}", st.message());
    return kExitNotStarted;
  };
  auto machines = load_ip_config(o.ip_config);
  if (!machines.is_ok()) return fail(machines.status());
  auto config = load_part_config(o.part_config);
  if (!config.is_ok()) return fail(config.status());
  LaunchOptions with_bin = o;
  with_bin.graph_server_bin = "graph-server";
  auto plan = make_job_plan(with_bin, *machines, *config);
  if (!plan.is_ok()) return fail(plan.status());
  for (const auto& [name, text] : server_env_files(o, *plan)) {
    const fs::path p = fs::path(o.write_server_env) / name;
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (Status st = write_file_atomic(p, text); !st.is_ok()) return fail(st);
    logger("launcher")->info("wrote {}", p.string());
  }
  return kExitOk;
}
}  // namespace

int run_job(LaunchOptions options) {
  if (Status st = setup_logging(options.log); !st.is_ok()) {
    std::cerr << "dgl-launch: " << st.message() << "\n";
    return kExitNotStarted;
  }
  if (!options.write_server_env.empty()) return write_server_env(options);
  return Launcher(std::move(options)).run();
}

int run_launch_tool(int argc, const char* const argv[]) {
  auto parsed = parse_launch_options(argc, argv);
  if (parsed.exit_code >= 0) return parsed.exit_code;
  if (parsed.agent && parsed.cleanup) {
    return run_agent_cleanup(parsed.agent_job_id, parsed.agent_machine, parsed.options.grace_ms, parsed.keep_shm,
                             parsed.options.log);
  }
  if (parsed.agent) {
    return run_machine_agent(parsed.agent_job_id, parsed.agent_machine, parsed.options.agent_timeout_s,
                             parsed.options.log);
  }
  return run_job(std::move(parsed.options));
}

}  // namespace dgld::launch
