#include "launcher/launch/launcher_impl.h"

namespace dgld::launch::driver {

std::vector<std::string> Launcher::rsync_command(const std::vector<std::string>& sources, const MachinePlan& m,
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

std::vector<std::string> Launcher::scp_command(const fs::path& from, const MachinePlan& m, const fs::path& to) const {
  std::vector<std::string> v = {"scp", "-q", "-p"};
  if (o_.ssh_port) v.insert(v.end(), {"-P", std::to_string(o_.ssh_port)});
  auto opts = ssh_options(m.machine, Mux::client);
  v.insert(v.end(), opts.begin(), opts.end());
  v.insert(v.end(), {from.string(), remote_target(m) + ":" + to.string()});
  return v;
}

Status Launcher::copy_to_machine(const MachinePlan& m, const json& prepared, Clock::time_point deadline) {
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

Status Launcher::copy_locally() {
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

bool Launcher::copy_files() {
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
  return wait_for([&] { return all(&AgentConn::copied); }, deadline + 5s, [&] {
    return machine_failure(FailureCause::Kind::phase, -1,
                           "copying files did not finish in time for " + missing(&AgentConn::copied));
  });
}

}  // namespace dgld::launch::driver
