#include "launcher/launch/launcher_impl.h"

#include <future>

namespace dgld::launch::driver {

void Launcher::run_phases() {
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
  trainers_started_at_ = work_since_ = Clock::now();
  if (!restarts_.empty() && restarts_.back().restart_s < 0) {  // until they resume from a checkpoint, if they do
    restarts_.back().restart_s =
        std::chrono::duration<double>(*trainers_started_at_ - job_start_).count() - restarts_.back().failed_at_s;
  }
  if (!wait_for([&] { return trainers_done_ == total_trainers(); }, Clock::time_point::max(),
                [] { return FailureCause{}; })) {
    return;
  }
  if (!plan_.metrics_out.empty()) fetch_metrics();
}

void Launcher::fetch_metrics() {
  AgentConn& a0 = *agents_[0];
  send(a0, {{"op", "fetch"}, {"path", plan_.metrics_out}});
  if (!wait_for([&] { return a0.fetch_done; }, Clock::now() + 60s, [&] {
        return machine_failure(FailureCause::Kind::other, 0,
                               "host " + a0.label + ": no answer within 60 s to fetching " + plan_.metrics_out);
      })) {
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

void Launcher::teardown() {
  stopping_ = true;
  cancel_copies_ = true;
  const std::string reason = failure_ ? "a failure" : !signal_name_.empty() ? signal_name_ : "the job is done";
  send_all({{"op", "stop"}, {"reason", reason}});
  // An agent silent past two pings (its machine lost, its link down, the
  // agent frozen) will not confirm: its clean-up over a new connection starts
  // now, beside the others' stop, instead of after waiting for it.
  std::vector<std::pair<AgentConn*, std::future<CleanUp>>> early;
  const auto now = Clock::now();
  for (auto& a : agents_) {
    const auto silent = now - Clock::time_point(Clock::duration(a->heard.load()));
    if (a->stopped || a->eof || !a->hello || silent < kAgentSilent) continue;
    log()->warn("host {} (machine {}): nothing heard from its agent for {:.1f} s; cleaning up there over a new "
                "connection now", a->label, a->machine, std::chrono::duration<double>(silent).count());
    early.emplace_back(a.get(), std::async(std::launch::async, [this, ap = a.get()] { return run_clean_up(*ap); }));
  }
  const auto is_early = [&](const AgentConn* a) {
    return std::any_of(early.begin(), early.end(), [&](const auto& e) { return e.first == a; });
  };
  // The agents stop their processes (SIGTERM, SIGKILL after the grace period) and say so.
  const auto deadline = Clock::now() + std::chrono::milliseconds(o_.grace_ms) + 1500ms;
  for (;;) {
    const bool done = std::all_of(agents_.begin(), agents_.end(),
                                  [&](const auto& a) { return a->stopped || a->eof || is_early(a.get()); });
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
    if (!a->stopped && a->proc.pid() > 0 && !a->eof && !is_early(a.get())) {
      log()->warn("host {} (machine {}): its agent did not confirm the stop; closing the connection (the agent "
                  "stops everything when it ends)", a->label, a->machine);
    }
    std::lock_guard lock(a->write_mu);
    a->proc.close_stdin();
  }
  for (auto& a : agents_) {
    if (a->proc.pid() > 0 && !a->proc.wait_for(a->stopped ? 2000ms : 200ms)) {
      a->proc.terminate_group();
      if (!a->proc.wait_for(500ms)) a->proc.signal_group(SIGKILL);
      a->proc.wait_for(2s);
    }
  }
  for (auto& t : copiers_) t.join();
  for (auto& a : agents_) {
    if (a->out_reader.joinable()) a->out_reader.join();
    if (a->err_reader.joinable()) a->err_reader.join();
  }
  for (auto& [a, f] : early) {
    const CleanUp c = f.get();
    if (!a->stopped) report_clean_up(*a, c);  // it may have confirmed after all
  }
  for (auto& a : agents_) {
    if (!a->stopped && a->hello && !is_early(a.get())) report_clean_up(*a, run_clean_up(*a));
  }
  // Drain what the readers left, for the record (exit lines, last output).
  while (auto ev = q_.pop_until(Clock::now())) {
    if (ev->kind == Event::Kind::line || ev->kind == Event::Kind::err_line) handle(*ev);
  }
  if (!control_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(control_dir_, ec);
    control_dir_.clear();
  }
}

Launcher::CleanUp Launcher::run_clean_up(const AgentConn& a) const {
  const MachinePlan& m = plan_.machines[static_cast<size_t>(a.machine)];
  std::vector<std::string> extra = {"--cleanup", "--stop-grace-ms", std::to_string(std::min(o_.grace_ms, 1000))};
  if (o_.external_servers) extra.push_back("--keep-shm");
  CleanUp c{run_command(agent_command(m, extra, Mux::none), std::chrono::seconds(o_.connect_timeout_s + 5)),
            std::nullopt};
  if (c.run.is_ok() && c.run->status == 0) {
    std::string rest = c.run->output;
    while (!rest.empty()) {
      const auto nl = rest.find('\n');
      auto j = decode_line(rest.substr(0, nl));
      if (j.is_ok() && j->value("ev", "") == "cleaned") c.cleaned = *j;
      rest = nl == std::string::npos ? "" : rest.substr(nl + 1);
    }
  }
  return c;
}

void Launcher::report_clean_up(const AgentConn& a, const CleanUp& c) {
  const auto& r = c.run;
  if (!c.cleaned) {
    // ssh itself failed (255) or did not finish: what the restart's probe would find again.
    if (!r.is_ok() || r->status == 255) unreachable_.insert(a.machine);
    log()->error("host {} (machine {}): cannot clean up after its lost agent ({}); processes of job {} may remain "
                 "there: run '{} --machine-agent --cleanup --job-id {} --machine {}' on it", a.label, a.machine,
                 r.is_ok() ? describe_exit(r->status) + ": " + r->output : r.status().message(), plan_.job_id,
                 o_.agent_bin, plan_.job_id, a.machine);
    return;
  }
  log()->warn("host {} (machine {}): cleaned up after its lost agent: {} process(es) of the job killed, {} "
              "shared-memory segment(s) removed", a.label, a.machine, c.cleaned->value("killed", 0),
              c.cleaned->value("shm_removed", 0));
}

}  // namespace dgld::launch::driver
