#include "launcher/launch/agent_impl.h"

namespace dgld::launch::agent_side {

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
    if (grace.count() > 0) ::kill(pid, SIGCONT);  // a stopped process acts on SIGTERM once continued
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

void Agent::start(const std::string& group) {
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

void Agent::probe_servers() {
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

void Agent::reap() {
  for (auto& c : children_) {
    if (!c->status) {
      c->status = c->proc.poll();
      if (c->status) {
        c->exited_at = Clock::now();
        // Whatever it left in its group (sampler-workers) goes too.
        const pid_t pgid = c->proc.pid();
        ::kill(-pgid, SIGTERM);
        ::kill(-pgid, SIGCONT);  // a stopped one acts on it once continued
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

void Agent::drain_groups() {
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

void Agent::stop(const std::string& reason) {
  log()->info("stopping job {} on machine {}: {}", job_id_, machine_, reason);
  probing_ = false;
  for (auto& c : children_) {
    if (!c->status) c->proc.terminate_group();
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

void Agent::fetch(const std::string& path) {
  const fs::path p = in_workspace(ws_, path);
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) return fail("fetch", "cannot read " + p.string() + ": " + ec.message());
  if (size > kMaxFetchBytes) return fail("fetch", fmt::format("{} is {} bytes, more than the {} fetched back", p.string(), size, kMaxFetchBytes));
  auto text = read_file(p);
  if (!text.is_ok()) return fail("fetch", text.status().message());
  emit({{"ev", "file"}, {"path", path}, {"data", base64_encode(*text)}});
}

void Agent::write_record() {
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

}  // namespace dgld::launch::agent_side
