// dgl-launch --max-restarts (docs/reliability.md): each attempt of a job gets
// its own job id and plan; after a failure the launcher decides (restarts.h),
// replaces a machine that is gone by a spare of the ip_config, backs off and
// starts the job again, whose trainers resume from their checkpoints.

#include "launcher/launch/launcher_impl.h"

namespace dgld::launch::driver {

Status Launcher::plan_attempt() {
  LaunchOptions o = o_;
  o.job_id = attempt_ == 0 ? base_job_id_ : fmt::format("{}-r{}", base_job_id_, attempt_);
  if (replaced_any_) {
    // Every process reads the machines from this file (the flag of the
    // trainer command too): the user's ip_config stays as it was.
    const std::string rel = fmt::format("dgld-logs/{}/ip_config.txt", o.job_id);
    const fs::path at = o_.local && o_.no_copy ? in_workspace(o_.workspace, rel) : local_path(rel);
    std::error_code ec;
    fs::create_directories(at.parent_path(), ec);
    DGLD_RETURN_IF_ERROR(write_file_atomic(at, ip_text_));
    o.ip_config = rel;
    o.command = with_ip_config(o.command, rel);
  }
  DGLD_ASSIGN_OR_RETURN(plan_, make_job_plan(o, machines_, config_));
  attempt_ip_config_ = o.ip_config;
  if (attempt_ > 0) {
    for (auto& m : plan_.machines) {
      for (auto* group : {&m.servers, &m.trainers}) {
        for (auto& p : *group) p.env[job_env::kRestart] = std::to_string(attempt_);
      }
    }
  }
  if (!o_.local) {
    std::string tmpl = (fs::temp_directory_path() / "dgl-launch-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return io_error("cannot create a directory for ssh control sockets: " + errno_string());
    }
    control_dir_ = tmpl;
  }
  return Status::ok();
}

void Launcher::reset_attempt() {
  agents_.clear();
  procs_.clear();
  failure_.reset();
  cause_ = FailureCause{};
  started_any_ = stopping_ = false;
  trainers_done_ = 0;
  cancel_copies_ = false;
  copiers_.clear();
  ping_stop_ = false;
  work_since_.reset();
  trainers_started_at_.reset();
  // What the last attempt's threads left: only a signal still matters.
  while (auto ev = q_.pop_until(Clock::now())) {
    if (ev->kind == Event::Kind::signal && signal_name_.empty()) signal_name_ = ev->text;
  }
}

bool Launcher::probe(const MachineAddress& a) {
  if (o_.local) return true;
  std::vector<std::string> argv = ssh_command(-1, Mux::client);  // no control socket: one is not open now
  argv.push_back(a.host);
  argv.push_back("exec " + shell_quote(o_.agent_bin) + " --version");
  auto r = run_command(argv, std::chrono::seconds(o_.connect_timeout_s + 5));
  const bool ok = r.is_ok() && r->status == 0;
  log()->debug("probe of {}: {}", a.host,
               ok ? "reachable" : r.is_ok() ? describe_exit(r->status) + ": " + r->output : r.status().message());
  return ok;
}

bool Launcher::replace_with_spare(int m, const std::string& why, RestartRecord& record) {
  while (!spares_left_.empty()) {
    MachineAddress spare = spares_left_.front();
    spares_left_.erase(spares_left_.begin());
    if (!probe(spare)) {
      log()->warn("spare {} ({} line {}) is not reachable over ssh either; trying the next", spare.host, o_.ip_config,
                  spare.line);
      continue;
    }
    const MachineAddress old = machines_[static_cast<size_t>(m)];
    ip_text_ = replace_machine_line(ip_text_, old, spare, fmt::format("machine {} was lost ({})", m, why));
    const std::string line = fmt::format("spare {}:{} ({}) took the place of machine {} ({}:{}, lost: {})",
                                         spare.host, spare.base_port,
                                         spare.line > 0 ? fmt::format("{} line {}", o_.ip_config, spare.line)
                                                        : std::string("a machine lost before, reachable again"),
                                         m, old.host, old.base_port, why);
    record.replaced += (record.replaced.empty() ? "" : "; ") + line;
    spare.line = old.line;  // the line it now stands on in the job's ip_config
    machines_[static_cast<size_t>(m)] = spare;
    // The lost machine is the last spare now: repaired or rebooted, it can
    // take a place again (probed first, like any spare). Line 0: it has no
    // spare line of its own to mark as in use.
    MachineAddress back = old;
    back.line = 0;
    spares_left_.push_back(back);
    replaced_any_ = true;
    start_failures_.erase(m);
    log()->warn("{}", line);
    return true;
  }
  return false;
}

bool Launcher::prepare_restart(double teardown_s) {
  const FailureCause cause = cause_;
  auto stop = [&](const std::string& why) {
    if (!why.empty()) *failure_ += "; not started again: " + why;
    return false;
  };
  // The limit, and failures a restart cannot change.
  RestartDecision d = decide_restart(static_cast<int>(restarts_.size()), o_.max_restarts, cause, std::nullopt,
                                     true, started_any_);
  if (!d.restart) return stop(d.why_not);
  RestartRecord r;
  r.number = static_cast<int>(restarts_.size()) + 1;
  r.cause = cause;
  r.failed_at_s = std::chrono::duration<double>(failed_at_ - job_start_).count();
  r.teardown_s = teardown_s;
  r.last_checkpoint = newest_checkpoint_;
  r.lost_work_s = work_since_ ? std::chrono::duration<double>(failed_at_ - *work_since_).count() : 0.0;
  // Is a machine gone for good? ssh cannot reach it, or its processes
  // failed to start in two attempts in a row: a spare takes its place.
  const int m = cause.machine;
  std::string lost;
  const std::set<int> unreachable = std::move(unreachable_);
  unreachable_.clear();
  // Another machine whose agent was lost and which the clean-up could not
  // reach over ssh is gone too, whatever failed first: a trainer that gave
  // up on a peer the coordinator dropped exits before its launcher sees the
  // lost machine's agent go (without this, the next attempt tried to start
  // on the lost machine and spent another ssh connect timeout).
  // Without a spare the next attempt tries it again, as before (ssh may
  // have failed for a moment only).
  bool replaced_other = false;
  for (int u : unreachable) {
    if (u == m) continue;
    if (replace_with_spare(u, "ssh to it fails (the clean-up could not reach it)", r)) {
      replaced_other = true;
    } else {
      log()->warn("machine {} could not be reached by the clean-up and no spare machine is left: the next attempt "
                  "tries it again", u);
    }
  }
  if (m >= 0) {
    const AgentConn* a = static_cast<size_t>(m) < agents_.size() ? agents_[static_cast<size_t>(m)].get() : nullptr;
    const bool start_failure = cause.kind == FailureCause::Kind::phase ||
                               (cause.kind == FailureCause::Kind::process && a && !a->trainers_ready);
    start_failures_[m] = start_failure ? start_failures_[m] + 1 : 0;
    // The clean-up just now could not reach it over ssh: no second try (one
    // ssh connect timeout less before the spare takes its place).
    if (cause.machine_suspect() && unreachable.count(m)) {
      lost = "ssh to it fails (the clean-up could not reach it)";
    } else if (cause.machine_suspect() && !probe(machines_[static_cast<size_t>(m)])) {
      lost = "ssh to it fails";
    } else if (start_failures_[m] >= 2) {
      lost = "its processes failed to start twice in a row";
    }
  }
  if (!lost.empty()) {
    if (!replace_with_spare(m, lost, r)) {
      return stop(fmt::format("machine {} is lost ({}) and no spare machine is left (list spares in {} as "
                              "'# spare <address> [<port>]')", m, lost, o_.ip_config));
    }
  } else if (!replaced_other) {
    // Twice the same failure with nothing gained in between: it would go on so.
    const bool progressed = newest_checkpoint_ != checkpoint_at_attempt_start_;
    d = decide_restart(static_cast<int>(restarts_.size()), o_.max_restarts, cause, previous_cause_, progressed,
                       started_any_);
    if (!d.restart) return stop(d.why_not);
  }
  // The back-off doubles only while attempts fail without committing a
  // checkpoint: a job that trained on since its last restart waits the first
  // back-off again, however many faults it survived before.
  restarts_in_a_row_ = newest_checkpoint_ != checkpoint_at_attempt_start_ ? 1 : restarts_in_a_row_ + 1;
  r.backoff_s = backoff_seconds(restarts_in_a_row_, o_.restart_backoff_s);
  log()->warn("restart {} of at most {} in {:.1f} s{}, after: {}", r.number, o_.max_restarts, r.backoff_s,
              newest_checkpoint_ ? fmt::format(" (the newest checkpoint: {})", newest_checkpoint_->str())
                                 : " (no checkpoint yet: training starts over)",
              cause.message);
  restarts_.push_back(r);
  if (!wait_backoff(r.backoff_s)) return false;
  previous_cause_ = cause;
  checkpoint_at_attempt_start_ = newest_checkpoint_;
  ++attempt_;
  reset_attempt();
  if (!signal_name_.empty()) return false;
  if (Status st = plan_attempt(); !st.is_ok()) {
    fail(st.message());
    return false;
  }
  log()->info("job {} (restart {}): logs in {}/{}", plan_.job_id, attempt_, o_.workspace, plan_.log_dir);
  return true;
}

bool Launcher::wait_backoff(double seconds) {
  const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (auto ev = q_.pop_until(until)) {
    if (ev->kind == Event::Kind::signal) {
      handle(*ev);
      return false;
    }
  }
  return true;
}

void Launcher::on_progress(const ProgressEvent& e) {
  const auto now = Clock::now();
  if (e.event == "checkpoint") {
    if (!newest_checkpoint_ || *newest_checkpoint_ < e.position) newest_checkpoint_ = e.position;
    work_since_ = now;
    log()->info("checkpoint of {} committed by every trainer", e.position.str());
  } else if (e.event == "resumed") {
    work_since_ = now;
    if (!restarts_.empty() && !restarts_.back().resumed_at) {
      RestartRecord& r = restarts_.back();
      r.resumed_at = e.position;
      r.restart_s = std::chrono::duration<double>(now - job_start_).count() - r.failed_at_s;
      log()->info("trainers resumed from the checkpoint of {}, {:.1f} s after the failure", e.position.str(),
                  r.restart_s);
    }
  }
}

void Launcher::report_restarts() {
  if (restarts_.empty()) return;
  for (RestartRecord& r : restarts_) log()->info("{}", describe(r));
  const fs::path out = local_path(fmt::format("dgld-logs/{}-restarts.json", base_job_id_));
  std::error_code ec;
  fs::create_directories(out.parent_path(), ec);
  if (Status st = write_file_atomic(out, restarts_json(restarts_).dump(2) + "\n"); st.is_ok()) {
    log()->info("the restarts of job {}: {}", base_job_id_, out.string());
  } else {
    log()->warn("cannot write the restart report: {}", st.message());
  }
}

}  // namespace dgld::launch::driver
