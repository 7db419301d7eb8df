#pragma once
// Test support: real child processes, temporary directories and free ports.
// Every process a test starts is tracked by PID and killed (SIGKILL) if the
// test has not reaped it by the time its Process object is destroyed.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dgld::testing {

class Process {
 public:
  // Starts `argv[0]` with `argv`, extra environment `env`, stdout+stderr to `log_path`.
  static Process start(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
                       const std::map<std::string, std::string>& env = {});
  Process(Process&& o) noexcept : pid_(o.pid_), log_(std::move(o.log_)), status_(o.status_) { o.pid_ = -1; }
  Process& operator=(Process&&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // Waits up to `timeout` for exit; the exit code (128+signal for a signal), or nullopt.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  bool running();
  std::string log() const;
  // Waits until the log contains `text` (or the process exits); true if found.
  bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout);

 private:
  Process(pid_t pid, std::filesystem::path log) : pid_(pid), log_(std::move(log)) {}
  pid_t pid_ = -1;
  std::filesystem::path log_;
  std::optional<int> status_;
};

// A fresh directory under /tmp, removed with its contents on destruction
// unless DGLD_KEEP_TEST_DIRS is set (and not 0).
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "dgld-test");
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A base port p such that p .. p+count-1 are all free on 127.0.0.1 right now.
uint16_t free_port_range(int count);

// The build directory (for finding the dgld executables).
std::filesystem::path build_root();
std::filesystem::path source_root();

// Names of /dev/shm entries that start with `prefix` (without the leading '/').
std::vector<std::string> shm_segments(const std::string& prefix);

}  // namespace dgld::testing
