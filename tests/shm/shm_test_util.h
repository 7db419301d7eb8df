#pragma once
// Helpers for the shared-memory tests: unique names, /dev/shm checks, forked children.

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/shm/shared_segment.h"

namespace dgld::shm::testing {

// A segment name unique to this process and `tag`.
inline std::string unique_name(const std::string& tag) {
  return "/dgld-test." + std::to_string(::getpid()) + "." + tag;
}

inline bool segment_exists(const std::string& name) {
  return ::access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

inline Deadline in_ms(int ms) { return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms); }

// Unlinks the names when the test ends, whatever happened in between.
struct ScopedUnlink {
  std::vector<std::string> names;
  explicit ScopedUnlink(std::vector<std::string> n) : names(std::move(n)) {}
  ~ScopedUnlink() {
    for (const auto& n : names) ::shm_unlink(n.c_str());
  }
};

// Forks; the child resets the signals Catch handles, disables core dumps, runs `fn`
// and _exit()s with its return value. Returns the child's pid (see wait_child).
inline pid_t fork_child(const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT, SIGHUP}) {
      ::signal(sig, SIG_DFL);
    }
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    int rc = 100;
    try {
      rc = fn();
    } catch (...) {
      rc = 101;
    }
    ::_exit(rc);
  }
  return pid;
}

inline int wait_child(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

inline int run_in_child(const std::function<int()>& fn) { return wait_child(fork_child(fn)); }

inline bool exited_with(int status, int code) { return WIFEXITED(status) && WEXITSTATUS(status) == code; }

// A pipe to say "go" between parent and child.
struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() {
    if (::pipe(fds) != 0) fds[0] = fds[1] = -1;
  }
  ~Pipe() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  void signal() const {
    const char c = 1;
    [[maybe_unused]] auto n = ::write(fds[1], &c, 1);
  }
  bool wait() const {
    char c;
    return ::read(fds[0], &c, 1) == 1;
  }
};

}  // namespace dgld::shm::testing
