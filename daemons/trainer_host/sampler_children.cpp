#include "daemons/trainer_host/sampler_children.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "common/file_util.h"
#include "common/logging.h"
#include "dgld_paths.h"

namespace dgld::trainer {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {}", WTERMSIG(status));
  return "unknown status";
}

// Forks and execs argv with fd 3 = the write end of `ready`; the child gets
// SIGTERM when this thread's process dies.
Result<pid_t> spawn(const std::vector<std::string>& argv, int ready_write_fd, int nice) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return io_error("fork failed: " + errno_string());
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    if (nice > 0) (void)::setpriority(PRIO_PROCESS, 0, nice);  // lower priority only: cannot fail for lack of rights
    if (ready_write_fd != 3) {
      ::dup2(ready_write_fd, 3);
      ::close(ready_write_fd);
    } else {
      ::fcntl(3, F_SETFD, 0);
    }
    // Nothing else of the trainer's goes with the child: Asio opens its
    // sockets without close-on-exec, and a sampler-worker holding the
    // rendezvous store's listening socket or the trainer's connections
    // would keep them open after the trainer is gone.
    if (::close_range(4, ~0U, 0) != 0) {
      for (int fd = 4; fd < 65536; ++fd) ::close(fd);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

// Reads "<port>\n" from fd before the deadline; 0 when the child closed it first.
Result<int> read_port(int fd, pid_t pid, Clock::time_point deadline, const std::string& who) {
  std::string text;
  char buf[32];
  while (text.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return timeout_error(who + " did not report its port in time");
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) return io_error(who + ": poll: " + errno_string());
    if (r <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int status = 0;
      const pid_t done = ::waitpid(pid, &status, WNOHANG);
      return closed_error(who + " exited before it was ready" +
                          (done == pid ? " (" + describe_status(status) + ")" : std::string()) +
                          "; its log lines above say why");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  try {
    const int port = std::stoi(text);
    if (port > 0 && port < 65536) return port;
  } catch (const std::exception&) {
  }
  return protocol_error(who + " reported '" + text.substr(0, text.find('\n')) + "' instead of a port");
}

}  // namespace

std::string default_sampler_worker_path() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "sampler-worker";
  // Beside trainer-host (installed, or copied together), the build tree's, the installed package's.
  for (const fs::path& p : {self.parent_path() / "sampler-worker",
                            self.parent_path().parent_path() / "sampler_worker" / "sampler-worker",
                            fs::path(DGLD_INSTALL_BINDIR) / "sampler-worker"}) {
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return (self.parent_path() / "sampler-worker").string();
}

Result<std::unique_ptr<SamplerChildren>> SamplerChildren::start(const SamplerChildrenOptions& o) {
  const std::string exe = o.executable.empty() ? default_sampler_worker_path() : o.executable;
  if (::access(exe.c_str(), X_OK) != 0) {
    return not_found(fmt::format("sampler-worker executable {} not found or not executable ({}); install it next to "
                                 "trainer-host or use --num-samplers 0",
                                 exe, errno_string()));
  }
  std::unique_ptr<SamplerChildren> c(new SamplerChildren);
  const auto deadline = Clock::now() + std::chrono::seconds(o.ready_timeout_s);
  std::vector<int> read_fds;
  auto fail = [&](Status st) {
    for (int fd : read_fds) ::close(fd);
    (void)c->stop();
    return st;
  };
  for (int i = 0; i < o.count; ++i) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return fail(io_error("pipe: " + errno_string()));
    std::vector<std::string> argv = {exe,
                                           "--part-config", o.part_config,
                                           "--ip-config", o.ip_config,
                                           "--machine-id", std::to_string(o.machine_id),
                                           "--num-servers", std::to_string(o.num_servers),
                                           "--group", std::to_string(o.group),
                                           "--listen-host", "127.0.0.1",
                                           "--listen-port", "0",
                                           "--job-id", o.job_id,
                                           "--log-level", o.log_level,
                                           "--feature-cache-mb", std::to_string(o.feature_cache_mb),
                                           "--ready-fd", "3"};
    if (!o.secret_file.empty()) {
      argv.push_back("--secret-file");
      argv.push_back(o.secret_file);
    }
    auto pid = spawn(argv, fds[1], o.nice);
    ::close(fds[1]);
    if (!pid.is_ok()) {
      ::close(fds[0]);
      return fail(pid.status().with_context(fmt::format("starting sampler-worker {} of trainer {}", i, o.group)));
    }
    c->pids_.push_back(*pid);
    read_fds.push_back(fds[0]);
  }
  for (int i = 0; i < o.count; ++i) {
    const std::string who = fmt::format("sampler-worker {} of trainer {} (pid {})", i, o.group, c->pids_[i]);
    auto port = read_port(read_fds[static_cast<size_t>(i)], c->pids_[static_cast<size_t>(i)], deadline, who);
    if (!port.is_ok()) return fail(port.status());
    c->endpoints_.push_back(fmt::format("127.0.0.1:{}", *port));
  }
  for (int fd : read_fds) ::close(fd);
  std::vector<std::string> described;
  for (int i = 0; i < o.count; ++i) described.push_back(fmt::format("{} (pid {})", c->endpoints_[i], c->pids_[i]));
  logger("trainer")->info("started {} sampler-worker(s): {}", o.count, fmt::join(described, ", "));
  c->status_.assign(c->pids_.size(), -1);
  c->reaper_ = std::thread([p = c.get()] { p->reap_loop(); });
  return c;
}

void SamplerChildren::reap_exited_locked() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    int status = 0;
    if (status_[i] != -1 || ::waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
    status_[i] = status;
    logger("trainer")->warn("sampler-worker pid {} ended with {} while training ran; its batches go to the "
                            "other sampler-workers or are made in this process", pids_[i], describe_status(status));
  }
}

void SamplerChildren::reap_loop() {
  // Every 50 ms: an epoch of a small graph can take less than that, and a
  // worker's end should be said (and its zombie reaped) while training runs.
  std::unique_lock lock(mu_);
  while (!stopping_) {
    reap_exited_locked();
    wake_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stopping_; });
  }
}

int SamplerChildren::exited() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(std::count_if(status_.begin(), status_.end(), [](int s) { return s != -1; }));
}

Status SamplerChildren::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  Status first;
  status_.resize(pids_.size(), -1);
  {
    // A worker that ended after the reaper's last look ended while training
    // ran too: said here, before the SIGTERMs below make every end look alike.
    std::lock_guard lock(mu_);
    reap_exited_locked();
  }
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (status_[i] != -1) continue;
    ::kill(pids_[i], SIGTERM);
    ::kill(pids_[i], SIGCONT);  // a stopped worker acts on SIGTERM once continued
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (size_t i = 0; i < pids_.size(); ++i) {
    const pid_t pid = pids_[i];
    int status = status_[i];
    while (status_[i] == -1) {
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno != EINTR)) break;
      if (Clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const bool ok = (WIFEXITED(status) && WEXITSTATUS(status) == 0) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    if (!ok && first.is_ok()) {
      first = closed_error(fmt::format("sampler-worker pid {} ended with {}", pid, describe_status(status)));
    }
  }
  pids_.clear();
  status_.clear();
  return first;
}

SamplerChildren::~SamplerChildren() {
  if (!pids_.empty() || reaper_.joinable()) (void)stop();
}

}  // namespace dgld::trainer
