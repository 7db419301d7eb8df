#include "launcher/launch/agent_impl.h"

namespace dgld::launch::agent_side {

// "graph-server 0.1.0 (protocol 3)\n" -> "0.1.0 (protocol 3)": what follows the program's name on the
// line that starts with it. Other lines are a library's words on stderr (libgcrypt's "Warning: using
// insecure memory!" comes first on a fresh Debian node); without such a line, the first line whole.
std::string version_of(const std::string& output, const std::string& program) {
  std::string first;
  size_t start = 0;
  while (start < output.size()) {
    const size_t end = std::min(output.find('\n', start), output.size());
    std::string line = output.substr(start, end - start);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (start == 0) first = line;
    if (line.rfind(program + " ", 0) == 0) return line.substr(program.size() + 1);
    start = end + 1;
  }
  return first;
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
      problem = fmt::format("port {} on {}{} is already in use (a process of an earlier job still running? "
                            "docs/operations.md, 'Stale processes')", e.port, e.host,
                            e.what.empty() ? "" : " (" + e.what + ")");
    } else if (errno == EADDRNOTAVAIL) {
      problem = fmt::format("no network interface of this machine holds {} (the ip_config line must name an address "
                            "of the machine itself, not a NAT or floating address that reaches it)", e.host);
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

void Agent::prepare(const json& j) {
  auto spec = agent_spec_from_json(j);
  if (!spec.is_ok()) return fail("prepare", spec.status().message());
  spec_ = std::move(*spec);
  have_spec_ = true;
  if (spec_.version != version_string()) {
    return fail("prepare", fmt::format("dgl-launch here is version {} but the launcher is {}: install the same dgld "
                                       "build on every machine", version_string(), spec_.version));
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

void Agent::check() {
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
    for (size_t i = 0; i < problems.size(); ++i) {
      if (std::find(problems.begin(), problems.begin() + static_cast<std::ptrdiff_t>(i), problems[i]) !=
          problems.begin() + static_cast<std::ptrdiff_t>(i)) {
        continue;  // one message per problem (every server port of an address not here says the same)
      }
      msg += (msg.empty() ? "" : "; ") + problems[i];
    }
    return fail("check", msg);
  }
  emit({{"ev", "checked"}});
}

void Agent::check_configs(std::vector<std::string>& problems) {
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

void Agent::check_program(std::vector<ProcessSpec>& procs, const std::string& what, bool must_be_dgld,
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
    const std::string v = version_of(r->output, exe.filename().string());
    if (v != spec_.version) {
      problems.push_back(fmt::format("{} {} is version {} but dgl-launch is {}: install the same dgld build "
                                     "on every machine", what, exe.string(), v, spec_.version));
      return;
    }
  }
  for (auto& p : procs) p.argv[0] = exe.string();
}

}  // namespace dgld::launch::agent_side
