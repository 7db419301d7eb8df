#include "tests/support/process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dgld::testing {

Process Process::start(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
                       const std::map<std::string, std::string>& env) {
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!env.count(kv.substr(0, kv.find('=')))) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  // Truncated before the fork, not in the child: a caller that reads the log
  // right after start() must not find an earlier run's lines in it.
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_t pid = fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    if (log_fd >= 0) {
      dup2(log_fd, 1);  // the duplicates do not inherit O_CLOEXEC...
      dup2(log_fd, 2);
      ::fcntl(1, F_SETFD, 0);  // ...unless open() returned 1 or 2 itself
      ::fcntl(2, F_SETFD, 0);
    }
    // Unblock everything the test runner may have blocked.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  return Process(pid, log_path);
}

Process::~Process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st;
    waitpid(pid_, &st, 0);
  }
}

void Process::signal(int sig) const {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<int> Process::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool Process::running() { return !wait(std::chrono::milliseconds(0)).has_value(); }

std::string Process::log() const {
  std::ifstream in(log_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Process::wait_for_log(const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (log().find(text) != std::string::npos) return true;
    if (!running() || std::chrono::steady_clock::now() >= deadline) return log().find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  // Kept for a look afterwards: daemons' logs hold what went to their stderr
  // (UBSan's reports among it: its log_path is not honoured next to ASan).
  const char* keep = std::getenv("DGLD_KEEP_TEST_DIRS");
  if (keep != nullptr && *keep != '\0' && std::string(keep) != "0") return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

uint16_t free_port_range(int count) {
  // Below the kernel's ephemeral range (32768-60999 by default): a port that
  // is free now could otherwise be taken as the local port of any outgoing
  // connection before the test's daemon binds it (seen: "port ... is already
  // in use" in a launch test, 1 run in 7). Tests may also use base + 900.
  int ephemeral_lo = 32768;
  {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    int lo = 0;
    if (in >> lo && lo > 0) ephemeral_lo = lo;
  }
  const int span = std::max(count, 1000);
  int lo = 10000, width = ephemeral_lo - span - lo;
  if (width < 2000) lo = 20000, width = 30000;  // an unusual range: as before
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 200; ++attempt) {
    uint16_t base = static_cast<uint16_t>(lo + static_cast<int>(rng() % static_cast<unsigned>(width)));
    bool ok = true;
    for (int i = 0; i < count && ok; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(base + i));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      close(fd);
    }
    if (ok) return base;
  }
  throw std::runtime_error("no free port range found");
}

std::filesystem::path build_root() { return DGLD_BUILD_ROOT; }
std::filesystem::path source_root() { return DGLD_SOURCE_ROOT; }

std::vector<std::string> shm_segments(const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  }
  return out;
}

}  // namespace dgld::testing
