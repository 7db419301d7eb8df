#include "launcher/launch/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/file_util.h"

extern char** environ;

namespace dgld::launch {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

int decode_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool is_executable_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

std::string describe_exit(int status) {
  if (status > 128 && status < 128 + 65) {
    const char* name = sigabbrev_np(status - 128);
    return "was killed by SIG" + std::string(name ? name : std::to_string(status - 128).c_str());
  }
  return "exited with code " + std::to_string(status);
}

fs::path find_executable(const std::string& name, const std::string& path_env, const fs::path& cwd) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) {
    fs::path p = fs::path(name).is_absolute() || cwd.empty() ? fs::path(name) : cwd / name;
    return is_executable_file(p) ? p : fs::path();
  }
  size_t pos = 0;
  while (pos <= path_env.size()) {
    const size_t colon = path_env.find(':', pos);
    const std::string dir = path_env.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    fs::path p = (dir.empty() ? fs::path(".") : fs::path(dir)) / name;
    if (p.is_relative() && !cwd.empty()) p = cwd / p;
    if (is_executable_file(p)) return p;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return {};
}

Result<Subprocess> Subprocess::spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return invalid_argument("spawn: empty command");
  const char* path_env = std::getenv("PATH");
  fs::path exe = find_executable(o.argv[0], path_env ? path_env : "/usr/bin:/bin", o.cwd);
  if (exe.empty()) {
    return not_found(o.argv[0].find('/') != std::string::npos
                         ? "cannot execute " + o.argv[0] + ": no such executable file"
                         : "cannot execute " + o.argv[0] + ": not found in PATH (" +
                               (path_env ? path_env : "") + ")");
  }
  std::vector<std::string> envs;
  if (!o.replace_env) {
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      const std::string key = kv.substr(0, kv.find('=') + 1);
      bool overridden = false;
      for (const auto& x : o.env) overridden = overridden || x.rfind(key, 0) == 0;
      if (!overridden) envs.push_back(std::move(kv));
    }
  }
  envs.insert(envs.end(), o.env.begin(), o.env.end());
  std::vector<char*> cargv, cenv;
  for (const auto& a : o.argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const std::string exe_str = exe.string();
  const std::string cwd_str = o.cwd.string();

  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {in, out, err, report}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  };
  if ((o.pipe_stdin && ::pipe2(in, O_CLOEXEC) != 0) || ::pipe2(out, O_CLOEXEC) != 0 ||
      (o.separate_stderr && ::pipe2(err, O_CLOEXEC) != 0) || ::pipe2(report, O_CLOEXEC) != 0) {
    Status st = io_error("cannot create pipes for " + o.argv[0] + ": " + errno_string());
    close_all();
    return st;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    Status st = io_error("cannot fork for " + o.argv[0] + ": " + errno_string());
    close_all();
    return st;
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls from here to exec.
    ::setpgid(0, 0);
    if (o.parent_death_signal != 0) {
      ::prctl(PR_SET_PDEATHSIG, o.parent_death_signal);
      if (::getppid() != parent) ::_exit(127);
    }
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(o.pipe_stdin ? in[0] : devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(o.separate_stderr ? err[1] : out[1], 2);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGQUIT}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!cwd_str.empty() && ::chdir(cwd_str.c_str()) != 0) {
      int e = errno;
      (void)!::write(report[1], &e, sizeof e);
      ::_exit(127);
    }
    ::execve(exe_str.c_str(), cargv.data(), cenv.data());
    int e = errno;
    (void)!::write(report[1], &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no window in which the group does not exist
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close_fd(report[0]);
  Subprocess p;
  p.pid_ = pid;
  p.in_ = in[1];
  p.out_ = out[0];
  p.err_ = err[0];
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    p.wait_for(std::chrono::seconds(5));
    return io_error("cannot execute " + exe_str + (cwd_str.empty() ? "" : " in " + cwd_str) + ": " +
                    std::strerror(child_errno));
  }
  return p;
}

Subprocess::Subprocess(Subprocess&& o) noexcept
    : pid_(o.pid_), in_(o.in_), out_(o.out_), err_(o.err_), status_(o.status_) {
  o.pid_ = o.in_ = o.out_ = o.err_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    reset();
    pid_ = o.pid_;
    in_ = o.in_;
    out_ = o.out_;
    err_ = o.err_;
    status_ = o.status_;
    o.pid_ = o.in_ = o.out_ = o.err_ = -1;
  }
  return *this;
}

Subprocess::~Subprocess() { reset(); }

void Subprocess::reset() {
  if (pid_ > 0 && !status_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  close_fd(in_);
  close_fd(out_);
  close_fd(err_);
  pid_ = -1;
  status_.reset();
}

void Subprocess::close_stdin() { close_fd(in_); }
void Subprocess::close_stdout() { close_fd(out_); }
void Subprocess::close_stderr() { close_fd(err_); }

void Subprocess::signal_group(int sig) const {
  if (pid_ > 0 && !status_) ::kill(-pid_, sig);
}

void Subprocess::terminate_group() const {
  signal_group(SIGTERM);
  signal_group(SIGCONT);
}

std::optional<int> Subprocess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = decode_status(st);
  return status_;
}

std::optional<int> Subprocess::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (auto s = poll()) return s;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result<CommandResult> run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                  const std::atomic<bool>* cancel, const fs::path& cwd) {
  SpawnOptions so;
  so.argv = argv;
  so.cwd = cwd;
  so.parent_death_signal = SIGKILL;
  DGLD_ASSIGN_OR_RETURN(auto proc, Subprocess::spawn(so));
  CommandResult r;
  const auto deadline = Clock::now() + timeout;
  std::optional<Clock::time_point> exited_at;
  char buf[16384];
  for (;;) {
    if (proc.stdout_fd() >= 0) {
      pollfd pfd{proc.stdout_fd(), POLLIN, 0};
      if (::poll(&pfd, 1, 50) > 0) {
        ssize_t n = ::read(proc.stdout_fd(), buf, sizeof buf);
        if (n > 0) {
          r.output.append(buf, static_cast<size_t>(n));
          if (r.output.size() > (128u << 10)) r.output.erase(0, r.output.size() - (64u << 10));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          proc.close_stdout();
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (auto s = proc.poll()) {
      // Drain what the command wrote; a grandchild holding the pipe open is not waited for.
      if (!exited_at) exited_at = Clock::now();
      if (proc.stdout_fd() < 0 || Clock::now() - *exited_at > std::chrono::milliseconds(200)) {
        r.status = *s;
        break;
      }
      continue;
    }
    const bool cancelled = cancel && cancel->load();
    if (cancelled || Clock::now() >= deadline) {
      proc.signal_group(SIGKILL);
      proc.wait_for(std::chrono::seconds(5));
      r.timed_out = !cancelled;
      r.cancelled = cancelled;
      break;
    }
  }
  return r;
}

bool read_line(int fd, std::string& buffer, std::string& line, size_t max_bytes) {
  for (;;) {
    if (auto nl = buffer.find('\n'); nl != std::string::npos) {
      line.assign(buffer, 0, nl);
      buffer.erase(0, nl + 1);
      return true;
    }
    if (buffer.size() >= max_bytes) {
      line = std::move(buffer);
      buffer.clear();
      return true;
    }
    char buf[65536];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (buffer.empty()) return false;
      line = std::move(buffer);
      buffer.clear();
      return true;
    }
    buffer.append(buf, static_cast<size_t>(n));
  }
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd pfd{fd, POLLOUT, 0};
        ::poll(&pfd, 1, 100);
        continue;
      }
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace dgld::launch
