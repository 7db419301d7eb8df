#include "launcher/launch/launcher_impl.h"

namespace dgld::launch::driver {

std::vector<std::string> Launcher::ssh_options(int machine, Mux mux) const {
  std::vector<std::string> v;
  for (const auto& kv : o_.ssh_options) v.insert(v.end(), {"-o", kv});
  v.insert(v.end(), {"-o", "BatchMode=yes", "-o", fmt::format("ConnectTimeout={}", o_.connect_timeout_s), "-o",
                     "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"});
  if (!o_.identity_file.empty()) v.insert(v.end(), {"-i", o_.identity_file, "-o", "IdentitiesOnly=yes"});
  if (!control_dir_.empty() && mux != Mux::none) {
    v.insert(v.end(), {"-o", fmt::format("ControlPath={}/m{}", control_dir_.string(), machine), "-o",
                       mux == Mux::master ? "ControlMaster=yes" : "ControlMaster=no", "-o", "ControlPersist=no"});
  }
  return v;
}

std::vector<std::string> Launcher::ssh_command(int machine, Mux mux) const {
  std::vector<std::string> v = {"ssh", "-T", "-x", "-a"};
  if (o_.ssh_port) v.insert(v.end(), {"-p", std::to_string(o_.ssh_port)});
  if (!o_.ssh_username.empty()) v.insert(v.end(), {"-l", o_.ssh_username});
  auto opts = ssh_options(machine, mux);
  v.insert(v.end(), opts.begin(), opts.end());
  return v;
}

std::vector<std::string> Launcher::agent_command(const MachinePlan& m, const std::vector<std::string>& extra,
                                       Mux mux) const {
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

AgentSpec Launcher::spec_for(const MachinePlan& m) const {
  AgentSpec s;
  s.version = version_string();
  s.job_id = plan_.job_id;
  s.machine = m.machine;
  s.label = m.label;
  s.workspace = o_.workspace;
  s.log_dir = plan_.log_dir;
  s.part_config = o_.part_config;
  s.ip_config = attempt_ip_config_;
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

void Launcher::start_agents() {
  for (const auto& m : plan_.machines) {
    auto a = std::make_unique<AgentConn>();
    a->machine = m.machine;
    a->label = m.label;
    a->where = fmt::format("host {} (machine {}, {} line {})", m.label, m.machine, o_.ip_config, m.address.line);
    SpawnOptions so;
    so.pipe_stdin = true;
    so.separate_stderr = true;
    so.parent_death_signal = SIGTERM;
    so.argv = agent_command(m, {"--agent-timeout-s", std::to_string(o_.agent_timeout_s)}, Mux::master);
    log()->debug("machine {}: {}", m.machine, join(so.argv, " "));
    auto proc = Subprocess::spawn(so);
    if (!proc.is_ok()) {
      fail(machine_failure(FailureCause::Kind::agent_start, m.machine,
                           fmt::format("{}: cannot start {}: {}", a->where, o_.local ? "the machine agent" : "ssh",
                                       proc.status().message())));
      agents_.push_back(std::move(a));
      agents_.back()->eof = agents_.back()->stopped = true;
      continue;
    }
    a->proc = std::move(*proc);
    const int out_fd = a->proc.stdout_fd(), err_fd = a->proc.stderr_fd(), mi = m.machine;
    a->out_reader = std::thread([this, out_fd, mi, ap = a.get()] {
      std::string buf, line;
      while (read_line(out_fd, buf, line)) {
        ap->heard = Clock::now().time_since_epoch().count();
        q_.push({Event::Kind::line, mi, std::move(line), {}});
      }
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

void Launcher::send(AgentConn& a, const json& j) {
  std::lock_guard lock(a.write_mu);
  if (a.eof || a.proc.stdin_fd() < 0) return;
  if (!write_all(a.proc.stdin_fd(), encode_line(j) + "\n")) {
    log()->debug("{}: cannot write to the agent: {}", a.label, errno_string());
  }
}

std::string Launcher::missing(bool AgentConn::*flag) const {
  std::vector<std::string> v;
  for (const auto& a : agents_) {
    if (!((*a).*flag)) v.push_back(fmt::format("{} (machine {})", a->label, a->machine));
  }
  return join(v, ", ");
}

bool Launcher::wait_for(const std::function<bool()>& done, Clock::time_point deadline,
                        const std::function<FailureCause()>& on_timeout) {
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

bool Launcher::wait_all(bool AgentConn::*flag, std::chrono::seconds timeout, const std::string& what) {
  return wait_for([&] { return all(flag); }, Clock::now() + timeout, [&] {
    // A phase failure, of the one machine that did not answer when it is one.
    int late = -1, count = 0;
    for (const auto& a : agents_) {
      if (!((*a).*flag)) late = a->machine, ++count;
    }
    return machine_failure(FailureCause::Kind::phase, count == 1 ? late : -1,
                           fmt::format("no answer within {} s {} from {}", timeout.count(), what, missing(flag)));
  });
}

void Launcher::handle(const Event& ev) {
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
      if (!ev.status.is_ok()) fail(machine_failure(FailureCause::Kind::phase, a.machine, ev.status.message()));
      break;
    case Event::Kind::signal:
      break;
  }
}

void Launcher::on_eof(AgentConn& a) {
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
    fail(machine_failure(FailureCause::Kind::agent_start, a.machine,
                         fmt::format("{}: cannot start the machine agent{}: {}{}", a.where, o_.local ? "" : " over ssh",
                                     how, tail)));
  } else {
    fail(machine_failure(FailureCause::Kind::lost_agent, a.machine,
                         fmt::format("{}: lost the connection to its machine agent: {}{}", a.where, how, tail)));
  }
}

void Launcher::on_message(AgentConn& a, const json& j) {
  const std::string ev = j.value("ev", "");
  if (ev == "out") {
    const std::string role = j.value("role", ""), line = j.value("line", "");
    const int rank = j.value("rank", -1);
    if (auto progress = parse_progress_line(line); progress && role == "trainer") {
      on_progress(*progress);
      return;
    }
    std::string text = fmt::format("{}/{}/{}: {}\n", a.label, role, rank, line);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    auto& tail = procs_[{role, rank}].tail;
    tail.push_back(line);
    if (tail.size() > kTailLines) tail.pop_front();
  } else if (ev == "hello") {
    a.hello = true;
    const std::string v = j.value("version", "");
    if (v != version_string()) {
      fail(fmt::format("host {} (machine {}): {} there is version {} but this dgl-launch is {}: install the same "
                       "dgld build on every machine", a.label, a.machine, o_.agent_bin, v, version_string()));
    }
  } else if (ev == "prepared") {
    a.prepared = true;
    a.prepared_info = j;
  } else if (ev == "checked") {
    a.checked = true;
  } else if (ev == "ready") {
    (j.value("group", "") == "servers" ? a.servers_ready : a.trainers_ready) = true;
  } else if (ev == "started") {
    started_any_ = started_any_job_ = true;
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
      fail(machine_failure(FailureCause::Kind::phase, a.machine, fmt::format("{}: {}", a.where, message)));
    }
  } else if (ev == "pong") {
    // liveness only (AgentConn::heard)
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

void Launcher::on_exit(AgentConn& a, const std::string& role, int rank, int status) {
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
  FailureCause c = machine_failure(
      FailureCause::Kind::process, a.machine,
      fmt::format("host {} (machine {}): {} {} (pid {}) {}; last lines of {}/{}/{}-{}.log:{}", a.label, a.machine,
                  role, rank, p.pid, describe_exit(status), o_.workspace, plan_.log_dir, role, rank,
                  tail_text(p.tail)));
  c.role = role;
  c.rank = rank;
  c.status = status;
  fail(std::move(c));
}

FailureCause Launcher::machine_failure(FailureCause::Kind kind, int machine, std::string message) const {
  FailureCause c;
  c.kind = kind;
  c.machine = machine;
  if (machine >= 0 && static_cast<size_t>(machine) < plan_.machines.size()) {
    c.host = plan_.machines[static_cast<size_t>(machine)].label;
  }
  c.message = std::move(message);
  return c;
}

void Launcher::fail(FailureCause cause) {
  if (failure_) return;
  log()->error("stopping every process on every machine: {}", cause.message);
  failure_ = cause.message;
  failed_at_ = Clock::now();
  cause_ = std::move(cause);
}

}  // namespace dgld::launch::driver
