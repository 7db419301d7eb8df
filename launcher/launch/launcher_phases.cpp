#include "launcher/launch/launcher_impl.h"

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
    control_dir_.clear();
  }
}

void Launcher::clean_up_after(const AgentConn& a) {
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
    // ssh itself failed (255) or did not finish: what the restart's probe would find again.
    if (!r.is_ok() || r->status == 255) unreachable_.insert(a.machine);
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

}  // namespace dgld::launch::driver
