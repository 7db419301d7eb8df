#include "launcher/launch/launcher.h"

#include <iostream>

#include "launcher/launch/launcher_impl.h"

namespace dgld::launch {
namespace driver {

int Launcher::run() {
  StopSignals signals;  // first, before any thread: SIGINT/SIGTERM blocked everywhere
  const auto t0 = job_start_ = Clock::now();
  if (Status st = prepare_local(); !st.is_ok()) {
    log()->error("failed before anything started: {}", st.message());
    return kExitNotStarted;
  }
  signals.watch([this](const std::string& sig) {
    q_.push({Event::Kind::signal, -1, sig, {}});
  });
  log()->info("job {}: {} machine(s), {} graph-server(s) and {} trainer(s) each{}; workspace {}, logs in {}/{}{}",
              plan_.job_id, plan_.machines.size(), o_.num_servers, o_.num_trainers,
              o_.num_samplers ? fmt::format(" ({} sampler-worker(s) per trainer)", o_.num_samplers) : "",
              o_.workspace, o_.workspace, plan_.log_dir,
              o_.max_restarts ? fmt::format("; up to {} restart(s), {} spare machine(s)", o_.max_restarts,
                                            ip_.spares.size())
                              : "");
  for (;;) {
    run_phases();
    const auto t_down = Clock::now();
    teardown();
    if (!failure_ || !signal_name_.empty()) break;
    if (!prepare_restart(std::chrono::duration<double>(Clock::now() - t_down).count())) break;
  }
  signals.unwatch();
  report_restarts();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (signal_name_.size()) {
    log()->error("job {} interrupted by {} after {:.1f} s; every process stopped", plan_.job_id, signal_name_, secs);
    return 128 + (signal_name_ == "SIGINT" ? SIGINT : SIGTERM);
  }
  const std::string after = restarts_.empty() ? "" : fmt::format(" after {} restart(s)", restarts_.size());
  if (failure_) {
    log()->error("job {} failed{}{}: {}", base_job_id_, started_any_job_ ? "" : " before anything started", after,
                 *failure_);
    return started_any_job_ ? kExitJobFailed : kExitNotStarted;
  }
  log()->info("job {} finished in {:.1f} s{}: {} trainer(s) exited 0", base_job_id_, secs, after, trainers_done_);
  return kExitOk;
}

Status Launcher::prepare_local() {
  std::error_code ec;
  cwd_ = fs::current_path(ec);
  if (o_.local) o_.workspace = fs::absolute(o_.workspace, ec).lexically_normal().string();
  const fs::path exe = self_exe();
  if (o_.agent_bin.empty()) o_.agent_bin = exe.string();
  if (o_.graph_server_bin.empty()) o_.graph_server_bin = default_graph_server(exe);
  DGLD_ASSIGN_OR_RETURN(ip_text_, read_file(local_path(o_.ip_config)));
  DGLD_ASSIGN_OR_RETURN(ip_, parse_ip_config_with_spares(ip_text_, local_path(o_.ip_config).string()));
  DGLD_ASSIGN_OR_RETURN(config_, load_part_config(local_path(o_.part_config)));
  machines_ = ip_.machines;
  spares_left_ = ip_.spares;
  base_job_id_ = o_.job_id.empty() ? make_job_id(config_.graph_name) : o_.job_id;
  DGLD_RETURN_IF_ERROR(plan_attempt());
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
  }
  return Status::ok();
}

}  // namespace driver

namespace fs = std::filesystem;

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
  return driver::Launcher(std::move(options)).run();
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
