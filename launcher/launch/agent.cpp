#include "launcher/launch/agent.h"

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

#include "common/file_util.h"
#include "common/ip_config.h"
#include "common/part_config.h"
#include "dgld_version.h"
#include "launcher/launch/files.h"
#include "launcher/launch/protocol.h"
#include "launcher/launch/subprocess.h"
#include "common/job_env.h"

namespace dgld::launch {
namespace {
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

// "graph-server 0.1.0\n" -> "0.1.0".
std::string version_of(const std::string& output) {
  std::string first = output.substr(0, output.find('\n'));
  while (!first.empty() && std::isspace(static_cast<unsigned char>(first.back()))) first.pop_back();
  const auto sp = first.rfind(' ');
  return sp == std::string::npos ? first : first.substr(sp + 1);
}

bool is_dgld_program(const fs::path& p) {
  const std::string n = p.filename().string();
  return n == "trainer-host" || n == "graph-server" || n == "sampler-worker" || n == "dgl-launch";
}

// Empty when `host:port` could be bound now (as a server binds it: SO_REUSEADDR).
std::string port_problem(const Endpoint& e) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(e.host.c_str(), std::to_string(e.port).c_str(), &hints, &res);
  if (rc != 0) return fmt::format("cannot resolve {}: {}", e.host, gai_strerror(rc));
  std::string problem;
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, res->ai_addr, res->ai_addrlen) != 0) {
    if (errno == EADDRINUSE) {
      problem = fmt::format("port {} on {} is already in use (a process of an earlier job still running? "
                            "docs/operations.md, 'Stale processes')", e.port, e.host);
    } else if (errno == EADDRNOTAVAIL) {
      problem = fmt::format("{} is not an address of this machine (its ip_config line names another host)", e.host);
    } else {
      problem = fmt::format("cannot bind {}:{}: {}", e.host, e.port, errno_string());
    }
  }
  ::close(fd);
  ::freeaddrinfo(res);
  return problem;
}

// The network interface that holds `host`'s IPv4 address on this machine
// ("lo" for 127.0.0.1), or empty when none does. Python trainers' gloo
// (torch.distributed) would otherwise pick the interface the hostname
// resolves to, which may be loopback or another network than the job's.
std::string interface_of(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return "";
  const in_addr want = reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return "";
  std::string name;
  for (ifaddrs* p = ifs; p && name.empty(); p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || !p->ifa_name) continue;
    if (reinterpret_cast<const sockaddr_in*>(p->ifa_addr)->sin_addr.s_addr == want.s_addr) name = p->ifa_name;
  }
  ::freeifaddrs(ifs);
  return name;
}

// True when something accepts connections on host:port (waits at most `timeout`).
bool is_listening(const Endpoint& e, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(e.host.c_str(), std::to_string(e.port).c_str(), &hints, &res) != 0) return false;
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  bool ok = false;
  if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    ok = true;
  } else if (errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      ok = err == 0;
    }
  }
  ::close(fd);
  ::freeaddrinfo(res);
  return ok;
}

struct SweepResult {
  int killed = 0;
  int shm_removed = 0;
};

// The job's processes left on this machine (by DGLD_JOB_ID/DGLD_MACHINE_ID in
// their environment, which only processes a launcher started carry; SIGTERM
// first when grace > 0) and, unless `keep_shm`, its shared memory.
SweepResult sweep_job(const std::string& job_id, int machine, std::chrono::milliseconds grace, bool keep_shm) {
  SweepResult r;
  if (job_id.empty()) return r;
  auto pids = find_job_processes(job_id, machine);
  std::erase(pids, ::getppid());
  r.killed = static_cast<int>(pids.size());
  for (pid_t pid : pids) {
    logger("launcher")->warn("pid {} of job {} is still running outside its process group: {}", pid, job_id,
                             grace.count() > 0 ? "SIGTERM" : "SIGKILL");
    ::kill(pid, grace.count() > 0 ? SIGTERM : SIGKILL);
  }
  const auto deadline = Clock::now() + grace;
  while (!pids.empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    pids = find_job_processes(job_id, machine);
    std::erase(pids, ::getppid());
  }
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  if (keep_shm) return r;
  for (const auto& seg : job_shm_segments(job_id, machine)) {
    if (::unlink(("/dev/shm/" + seg).c_str()) == 0) {
      ++r.shm_removed;
      logger("launcher")->info("removed shared-memory segment /{}", seg);
    }
  }
  return r;
}

class Agent {
 public:
  Agent(std::string job_id, int machine, int silence_timeout_s, LogOptions log)
      : job_id_(std::move(job_id)), machine_(machine), silence_timeout_(std::chrono::seconds(silence_timeout_s)),
        log_opts_(std::move(log)) {}

  int run() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    sigfd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    ::signal(SIGPIPE, SIG_IGN);
    emit({{"ev", "hello"}, {"version", DGLD_VERSION}, {"pid", ::getpid()}, {"machine", machine_}});
    last_input_ = Clock::now();
    while (!stop_reason_) {
      pump(50ms);
      if (Clock::now() - last_input_ > silence_timeout_) {
        request_stop(fmt::format("nothing from dgl-launch for {} s (its machine or the network is gone?)",
                                 silence_timeout_.count()));
      }
      reap();
      probe_servers();
      drain_groups();
    }
    stop(*stop_reason_);
    return 0;
  }

 private:
  std::shared_ptr<spdlog::logger> log() { return logger("launcher"); }

  void emit(const json& j) {
    if (out_broken_) return;
    if (!write_all(1, encode_line(j) + "\n")) {
      out_broken_ = true;
      request_stop("cannot write to dgl-launch (its connection closed)");
    }
  }

  void fail(const std::string& phase, const std::string& message) {
    log()->error("{}: {}", phase, message);
    emit({{"ev", "fail"}, {"phase", phase}, {"message", message}});
  }

  void request_stop(const std::string& reason) {
    if (!stop_reason_) stop_reason_ = reason;
  }

  // One poll over stdin, the signal fd and every child's output.
  void pump(std::chrono::milliseconds timeout) {
    std::vector<pollfd> fds;
    if (!stdin_closed_) fds.push_back({0, POLLIN, 0});
    fds.push_back({sigfd_, POLLIN, 0});
    std::vector<Child*> owners;
    for (auto& c : children_) {
      if (c->proc.stdout_fd() >= 0) {
        fds.push_back({c->proc.stdout_fd(), POLLIN, 0});
        owners.push_back(c.get());
      }
    }
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    if (n <= 0) return;
    size_t k = 0;
    if (!stdin_closed_) {
      if (fds[k].revents) read_stdin();
      ++k;
    }
    if (fds[k].revents) read_signals();
    ++k;
    for (size_t i = 0; i < owners.size(); ++i, ++k) {
      if (fds[k].revents) read_child(*owners[i]);
    }
  }

  void read_stdin() {
    char buf[65536];
    const ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      stdin_closed_ = true;
      request_stop("dgl-launch's connection closed (the launcher or its ssh session ended)");
      return;
    }
    last_input_ = Clock::now();
    in_buf_.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = in_buf_.find('\n')) != std::string::npos) {
      std::string line = in_buf_.substr(0, nl);
      in_buf_.erase(0, nl + 1);
      if (!stop_reason_) on_line(line);
    }
  }

  void read_signals() {
    signalfd_siginfo si;
    while (::read(sigfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      if (si.ssi_signo != SIGCHLD) request_stop(std::string("received SIG") + sigabbrev_np(static_cast<int>(si.ssi_signo)));
    }
  }

  void read_child(Child& c) {
    char buf[65536];
    const ssize_t n = ::read(c.proc.stdout_fd(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      c.proc.close_stdout();
      flush_child(c, true);
      return;
    }
    c.buf.append(buf, static_cast<size_t>(n));
    flush_child(c, false);
  }

  // Complete lines (or, at the end, the rest) of a child's output: to its log and to the launcher.
  void flush_child(Child& c, bool all) {
    size_t start = 0, nl;
    while ((nl = c.buf.find('\n', start)) != std::string::npos || (c.buf.size() - start > 65536)) {
      const size_t end = nl == std::string::npos ? start + 65536 : nl;
      send_output(c, c.buf.substr(start, end - start));
      start = nl == std::string::npos ? end : end + 1;
    }
    c.buf.erase(0, start);
    if (all && !c.buf.empty()) {
      send_output(c, c.buf);
      c.buf.clear();
    }
  }

  void send_output(Child& c, const std::string& line) {
    if (c.log_fd >= 0) write_all(c.log_fd, line + "\n");
    emit({{"ev", "out"}, {"role", c.spec.role}, {"rank", c.spec.rank}, {"line", line}});
  }

  void on_line(const std::string& line) {
    auto j = decode_line(line);
    if (!j.is_ok()) {
      log()->warn("ignoring a line from dgl-launch: {}", j.status().message());
      return;
    }
    const std::string op = j->value("op", "");
    try {
      if (op == "ping") {
        // liveness only
      } else if (op == "prepare") {
        prepare(*j);
      } else if (op == "check") {
        check();
      } else if (op == "start") {
        start(j->at("group").get<std::string>());
      } else if (op == "fetch") {
        fetch(j->at("path").get<std::string>());
      } else if (op == "stop") {
        request_stop("dgl-launch asked: " + j->value("reason", std::string("stop")));
      } else {
        fail("protocol", "unknown op '" + op + "'");
      }
    } catch (const json::exception& e) {
      fail("protocol", "malformed '" + op + "' message: " + e.what());
    }
  }

  void prepare(const json& j) {
    auto spec = agent_spec_from_json(j);
    if (!spec.is_ok()) return fail("prepare", spec.status().message());
    spec_ = std::move(*spec);
    have_spec_ = true;
    if (spec_.version != DGLD_VERSION) {
      return fail("prepare", fmt::format("dgl-launch here is version {} but the launcher is {}: install the same dgld "
                                         "build on every machine", DGLD_VERSION, spec_.version));
    }
    if (spec_.job_id != job_id_) return fail("prepare", "job id '" + spec_.job_id + "' differs from --job-id " + job_id_);
    ws_ = fs::path(spec_.workspace);
    std::error_code ec;
    fs::create_directories(ws_, ec);
    if (ec) return fail("prepare", "cannot create workspace " + ws_.string() + ": " + ec.message());
    if (!fs::is_directory(ws_, ec)) return fail("prepare", "workspace " + ws_.string() + " is not a directory");
    const fs::path probe = ws_ / (".dgld-write-test." + std::to_string(::getpid()));
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return fail("prepare", "workspace " + ws_.string() + " is not writable: " + errno_string());
    const bool wrote = write_all(fd, "dgld\n");
    const int write_errno = errno;
    ::close(fd);
    ::unlink(probe.c_str());
    if (!wrote) return fail("prepare", "workspace " + ws_.string() + " is not writable: " + std::strerror(write_errno));
    if (::chdir(ws_.c_str()) != 0) return fail("prepare", "cannot enter workspace " + ws_.string() + ": " + errno_string());
    log_dir_ = in_workspace(ws_, spec_.log_dir);
    fs::create_directories(log_dir_, ec);
    if (ec) return fail("prepare", "cannot create log directory " + log_dir_.string() + ": " + ec.message());
    LogOptions lo = log_opts_;
    lo.file = (log_dir_ / fmt::format("agent-m{}.log", machine_)).string();
    if (Status st = setup_logging(lo); !st.is_ok()) log()->warn("{}", st.message());
    log()->info("job {} machine {} ({}): workspace {}", job_id_, machine_, spec_.label, ws_.string());
    if (!spec_.secret.empty()) {
      secret_path_ = log_dir_ / "secret";
      if (Status st = write_file_atomic(secret_path_, spec_.secret + "\n", 0600); !st.is_ok()) {
        return fail("prepare", "cannot write the job's secret: " + st.message());
      }
    }

    json files = json::object();
    for (const auto& f : spec_.files) {
      const fs::path p = in_workspace(ws_, f);
      fs::create_directories(p.parent_path(), ec);
      if (spec_.hash_files && fs::is_regular_file(p, ec)) {
        if (auto d = digest_file(p); d.is_ok()) files[f] = {{"size", d->size}, {"crc32", d->crc32}};
      }
    }
    const char* path = std::getenv("PATH");
    const bool rsync = !find_executable("rsync", path ? path : "", {}).empty();
    emit({{"ev", "prepared"}, {"rsync", rsync}, {"cores", std::thread::hardware_concurrency()}, {"files", files}});
  }

  // Everything that must hold before any process starts; all problems in one message.
  void check() {
    if (!have_spec_) return fail("check", "no job spec (prepare) received");
    std::vector<std::string> problems;
    std::error_code ec;
    bool files_ok = true;
    for (size_t i = 0; i < spec_.files.size(); ++i) {
      const fs::path p = in_workspace(ws_, spec_.files[i]);
      if (fs::is_regular_file(p, ec)) continue;
      files_ok = false;
      const std::string what = i == 0 ? "ip_config" : i == 1 ? "partition config" : fmt::format("partition {} file", machine_);
      problems.push_back(fmt::format("{} {} is missing", what, p.string()));
    }
    if (files_ok) check_configs(problems);
    if (!spec_.servers.empty()) check_program(spec_.servers, "graph-server", true, problems);
    if (!spec_.trainers.empty()) check_program(spec_.trainers, "trainer command", false, problems);
    for (const auto& e : spec_.server_ports) {
      if (!spec_.external_servers) {
        if (auto p = port_problem(e); !p.empty()) problems.push_back(p);
      } else if (!is_listening(e, 1000ms)) {
        problems.push_back(fmt::format("no graph-server listens on {}:{} (--external-servers: start them first, "
                                       "e.g. systemctl start dgld-graph-server@<job>-<server id>)", e.host, e.port));
      }
    }
    for (const auto& e : spec_.other_ports) {
      if (auto p = port_problem(e); !p.empty()) problems.push_back(p);
    }
    if (!problems.empty()) {
      std::string msg;
      for (const auto& p : problems) msg += (msg.empty() ? "" : "; ") + p;
      return fail("check", msg);
    }
    emit({{"ev", "checked"}});
  }

  void check_configs(std::vector<std::string>& problems) {
    const fs::path ip = in_workspace(ws_, spec_.ip_config);
    auto machines = load_ip_config(ip);
    if (!machines.is_ok()) {
      problems.push_back(machines.status().message());
    } else if (static_cast<int>(machines->size()) <= machine_ ||
               (!spec_.server_ports.empty() &&
                ((*machines)[static_cast<size_t>(machine_)].host != spec_.server_ports[0].host ||
                 (*machines)[static_cast<size_t>(machine_)].base_port != spec_.server_ports[0].port))) {
      problems.push_back(fmt::format("{} here does not list {}:{} as machine {} like the launcher's copy does "
                                     "(a stale file? with --no-copy every machine needs the same ip_config)",
                                     ip.string(), spec_.server_ports.empty() ? "" : spec_.server_ports[0].host,
                                     spec_.server_ports.empty() ? 0 : spec_.server_ports[0].port, machine_));
    }
    auto config = load_part_config(in_workspace(ws_, spec_.part_config));
    if (!config.is_ok()) {
      problems.push_back(config.status().message());
    } else if (config->num_parts <= machine_) {
      problems.push_back(fmt::format("{} has num_parts={}, no partition {}", spec_.part_config, config->num_parts, machine_));
    }
  }

  // Resolves argv[0] of `procs` (PATH, or relative to the workspace) and checks dgld programs' versions.
  void check_program(std::vector<ProcessSpec>& procs, const std::string& what, bool must_be_dgld,
                     std::vector<std::string>& problems) {
    const std::string name = procs[0].argv[0];
    const char* path = std::getenv("PATH");
    const fs::path exe = find_executable(name, path ? path : "", ws_);
    if (exe.empty()) {
      problems.push_back(name.find('/') != std::string::npos
                             ? fmt::format("{} {} does not exist or is not executable (relative paths start in {})",
                                           what, name, ws_.string())
                             : fmt::format("{} '{}' not found in PATH ({})", what, name, path ? path : ""));
      return;
    }
    if (must_be_dgld || is_dgld_program(exe)) {
      // Generous: a LibTorch program takes seconds to load, more on a busy machine.
      auto r = run_command({exe.string(), "--version"}, 60s);
      if (!r.is_ok() || r->status != 0) {
        problems.push_back(fmt::format("{} {} --version failed: {}", what, exe.string(),
                                       !r.is_ok()      ? r.status().message()
                                       : r->timed_out  ? std::string("no answer within 60 s")
                                                       : describe_exit(r->status) + ": " + r->output));
        return;
      }
      const std::string v = version_of(r->output);
      if (v != spec_.version) {
        problems.push_back(fmt::format("{} {} is version {} but dgl-launch is {}: install the same dgld build "
                                       "on every machine", what, exe.string(), v, spec_.version));
        return;
      }
    }
    for (auto& p : procs) p.argv[0] = exe.string();
  }

  void start(const std::string& group) {
    if (!have_spec_) return fail("start", "no job spec (prepare) received");
    auto& procs = group == "servers" ? spec_.servers : spec_.trainers;
    for (const auto& p : procs) {
      auto c = std::make_unique<Child>();
      c->spec = p;
      SpawnOptions so;
      so.argv = p.argv;
      for (const auto& [k, v] : p.env) so.env.push_back(k + "=" + v);
      if (!secret_path_.empty()) so.env.push_back(std::string(job_env::kSecretFile) + "=" + secret_path_.string());
      if (p.role == "trainer" && !p.env.count("GLOO_SOCKET_IFNAME") && !spec_.server_ports.empty()) {
        const std::string ifname = interface_of(spec_.server_ports[0].host);
        if (!ifname.empty()) so.env.push_back("GLOO_SOCKET_IFNAME=" + ifname);
      }
      if (p.role == "trainer" && spec_.omp_threads_auto_divisor > 0 && !p.env.count("OMP_NUM_THREADS")) {
        const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        so.env.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1, cores / spec_.omp_threads_auto_divisor)));
      }
      so.cwd = ws_;
      so.parent_death_signal = SIGKILL;
      const fs::path log_path = log_dir_ / fmt::format("{}-{}.log", p.role, p.rank);
      c->log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (c->log_fd < 0) log()->warn("cannot open {}: {}", log_path.string(), errno_string());
      auto proc = Subprocess::spawn(so);
      if (!proc.is_ok()) return fail("start", fmt::format("cannot start {} {}: {}", p.role, p.rank, proc.status().message()));
      c->proc = std::move(*proc);
      log()->info("started {} {} as pid {} (log {})", p.role, p.rank, c->proc.pid(), log_path.string());
      emit({{"ev", "started"}, {"role", p.role}, {"rank", p.rank}, {"pid", c->proc.pid()}});
      children_.push_back(std::move(c));
    }
    write_record();
    if (group == "servers") {
      probing_ = true;
      ready_.assign(spec_.server_ports.size(), false);
      probe_deadline_ = Clock::now() + std::chrono::milliseconds(spec_.start_timeout_ms);
    } else {
      emit({{"ev", "ready"}, {"group", group}});
    }
  }

  void probe_servers() {
    if (!probing_ || Clock::now() < next_probe_) return;
    next_probe_ = Clock::now() + 100ms;
    bool all = true;
    for (size_t i = 0; i < ready_.size(); ++i) {
      if (!ready_[i]) ready_[i] = is_listening(spec_.server_ports[i], 100ms);
      all = all && ready_[i];
    }
    if (all) {
      probing_ = false;
      log()->info("{} graph-server(s) listening", ready_.size());
      emit({{"ev", "ready"}, {"group", "servers"}});
    } else if (Clock::now() >= probe_deadline_) {
      probing_ = false;
      std::string which;
      for (size_t i = 0; i < ready_.size(); ++i) {
        if (!ready_[i]) which += fmt::format("{}{}:{}", which.empty() ? "" : ", ", spec_.server_ports[i].host, spec_.server_ports[i].port);
      }
      fail("start", fmt::format("graph-servers not listening after {} s on {}", spec_.start_timeout_ms / 1000, which));
    }
  }

  void reap() {
    for (auto& c : children_) {
      if (!c->status) {
        c->status = c->proc.poll();
        if (c->status) {
          c->exited_at = Clock::now();
          // Whatever it left in its group (sampler-workers) goes too.
          const pid_t pgid = c->proc.pid();
          ::kill(-pgid, SIGTERM);
          draining_.push_back({pgid, Clock::now() + std::chrono::milliseconds(spec_.grace_ms)});
        }
      }
      if (c->status && !c->reported &&
          (c->proc.stdout_fd() < 0 || Clock::now() - c->exited_at > 300ms)) {
        flush_child(*c, true);
        c->reported = true;
        log()->info("{} {} {}", c->spec.role, c->spec.rank, describe_exit(*c->status));
        emit({{"ev", "exit"}, {"role", c->spec.role}, {"rank", c->spec.rank}, {"status", *c->status}});
        write_record();
      }
    }
  }

  void drain_groups() {
    const auto now = Clock::now();
    std::erase_if(draining_, [&](const Draining& d) {
      if (now < d.kill_at) return false;
      if (::kill(-d.pgid, 0) == 0) {
        log()->warn("process group {} still has processes {} ms after its leader exited: SIGKILL", d.pgid, spec_.grace_ms);
        ::kill(-d.pgid, SIGKILL);
      }
      return true;
    });
  }

  bool any_running() const {
    return std::any_of(children_.begin(), children_.end(), [](const auto& c) { return !c->status; });
  }

  void pump_until(Clock::time_point deadline) {
    while (any_running() && Clock::now() < deadline) {
      pump(20ms);
      reap();
    }
  }

  void stop(const std::string& reason) {
    log()->info("stopping job {} on machine {}: {}", job_id_, machine_, reason);
    probing_ = false;
    for (auto& c : children_) {
      if (!c->status) c->proc.signal_group(SIGTERM);
    }
    pump_until(Clock::now() + std::chrono::milliseconds(spec_.grace_ms));
    int killed = 0;
    for (auto& c : children_) {
      if (!c->status) {
        log()->warn("{} {} (pid {}) still running {} ms after SIGTERM: SIGKILL", c->spec.role, c->spec.rank,
                    c->proc.pid(), spec_.grace_ms);
        c->proc.signal_group(SIGKILL);
        ++killed;
      } else {
        ::kill(-c->proc.pid(), SIGKILL);  // leftovers of a group whose leader exited, if any
      }
    }
    pump_until(Clock::now() + 2s);
    // Last sweep by job identity: anything that left its process group.
    const SweepResult swept = sweep_job(job_id_, machine_, 0ms, spec_.external_servers);
    killed += swept.killed;
    const int shm_removed = swept.shm_removed;
    for (auto& c : children_) {
      if (c->status && !c->reported) {
        flush_child(*c, true);
        c->reported = true;
        emit({{"ev", "exit"}, {"role", c->spec.role}, {"rank", c->spec.rank}, {"status", *c->status}});
      }
    }
    write_record();
    if (!secret_path_.empty()) {
      std::error_code ec;
      fs::remove(secret_path_, ec);
    }
    emit({{"ev", "stopped"}, {"killed", killed}, {"shm_removed", shm_removed}, {"reason", reason}});
  }

  void fetch(const std::string& path) {
    const fs::path p = in_workspace(ws_, path);
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec) return fail("fetch", "cannot read " + p.string() + ": " + ec.message());
    if (size > kMaxFetchBytes) return fail("fetch", fmt::format("{} is {} bytes, more than the {} fetched back", p.string(), size, kMaxFetchBytes));
    auto text = read_file(p);
    if (!text.is_ok()) return fail("fetch", text.status().message());
    emit({{"ev", "file"}, {"path", path}, {"data", base64_encode(*text)}});
  }

  // <log_dir>/machine-<m>.json: the job id, this agent and every process it started.
  void write_record() {
    if (log_dir_.empty()) return;
    json procs = json::array();
    for (const auto& c : children_) {
      json p{{"role", c->spec.role}, {"rank", c->spec.rank}, {"pid", c->proc.pid()}, {"pgid", c->proc.pid()}};
      if (c->status) p["status"] = *c->status;
      procs.push_back(p);
    }
    json rec{{"job_id", job_id_}, {"machine", machine_}, {"agent_pid", ::getpid()}, {"processes", procs}};
    if (Status st = write_file_atomic(log_dir_ / fmt::format("machine-{}.json", machine_), rec.dump(2) + "\n");
        !st.is_ok()) {
      log()->warn("{}", st.message());
    }
  }

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

}  // namespace

namespace {
// Logging and the identity checks both agent modes share; an error message or "".
std::string setup_agent(const std::string& job_id, int machine, LogOptions& lo) {
  lo.role = "agent/m" + std::to_string(machine);
  if (Status st = setup_logging(lo); !st.is_ok()) return st.message();
  if (machine < 0) return "--machine is required";
  if (Status st = validate_job_id(job_id); !st.is_ok()) return st.message();
  return "";
}
}  // namespace

int run_machine_agent(const std::string& job_id, int machine, int silence_timeout_s, const LogOptions& log) {
  LogOptions lo = log;
  if (auto err = setup_agent(job_id, machine, lo); !err.empty()) {
    std::fprintf(stderr, "dgl-launch --machine-agent: %s\n", err.c_str());
    return 2;
  }
  Agent agent(job_id, machine, silence_timeout_s, lo);
  return agent.run();
}

int run_agent_cleanup(const std::string& job_id, int machine, int grace_ms, bool keep_shm, const LogOptions& log) {
  LogOptions lo = log;
  if (auto err = setup_agent(job_id, machine, lo); !err.empty()) {
    std::fprintf(stderr, "dgl-launch --machine-agent --cleanup: %s\n", err.c_str());
    return 2;
  }
  const SweepResult r = sweep_job(job_id, machine, std::chrono::milliseconds(grace_ms), keep_shm);
  const std::string line = encode_line({{"ev", "cleaned"}, {"killed", r.killed}, {"shm_removed", r.shm_removed}}) + "\n";
  return write_all(1, line) ? 0 : 1;
}

}  // namespace dgld::launch
