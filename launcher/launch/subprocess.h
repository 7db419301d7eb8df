#pragma once
// Child processes for dgl-launch and its machine agent: fork/exec with pipes,
// each child in its own process group (so a terminal's Ctrl-C reaches only
// the launcher, and a child's whole group can be signalled), an optional
// parent-death signal, and exec failures reported as errors naming the
// program. Every wait takes a deadline.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace dgld::launch {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is a path, or a name looked up in PATH
  // Environment of the child: `env` replaces the inherited one when
  // `replace_env`, else its "K=V" entries are added to (and override) it.
  std::vector<std::string> env;
  bool replace_env = false;
  std::filesystem::path cwd;      // empty: the parent's
  bool pipe_stdin = false;        // else /dev/null
  bool separate_stderr = false;   // else stderr goes to the stdout pipe
  int parent_death_signal = 0;    // PR_SET_PDEATHSIG (0: none); bound to the forking thread
};

// Exit status as one number: the exit code, or 128 + signal number.
std::string describe_exit(int status);

class Subprocess {
 public:
  static Result<Subprocess> spawn(const SpawnOptions& options);
  Subprocess() = default;  // no process
  Subprocess(Subprocess&& o) noexcept;
  Subprocess& operator=(Subprocess&& o) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  // A child still running is killed with its group (SIGKILL) and reaped.
  ~Subprocess();

  pid_t pid() const { return pid_; }  // also its process group id
  int stdin_fd() const { return in_; }
  int stdout_fd() const { return out_; }
  int stderr_fd() const { return err_; }
  void close_stdin();
  void close_stdout();
  void close_stderr();

  // Signals the whole process group (no-op once reaped).
  void signal_group(int sig) const;
  // SIGTERM, then SIGCONT, to the whole group: a process stopped (SIGSTOP,
  // a debugger's Ctrl-Z) acts on SIGTERM only once continued, as a shell's
  // `kill` continues a stopped job; otherwise it would wait for SIGKILL.
  void terminate_group() const;
  // Reaps without blocking: the exit status (exit code, or 128 + signal) once exited.
  std::optional<int> poll();
  // Waits up to `timeout` for the exit.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  std::optional<int> exit_status() const { return status_; }

 private:
  void reset();
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::optional<int> status_;
};

struct CommandResult {
  int status = -1;        // exit code or 128 + signal; -1 when timed out or cancelled
  bool timed_out = false;
  bool cancelled = false;
  std::string output;     // stdout and stderr, interleaved, at most the last 64 KiB
};

// Runs a command to completion with its output captured. At `timeout` (or
// when `*cancel` becomes true) the command's process group is killed.
Result<CommandResult> run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                  const std::atomic<bool>* cancel = nullptr,
                                  const std::filesystem::path& cwd = {});

// Resolves a program name like execvp does: a name with a '/' is taken
// relative to `cwd`; otherwise each directory of `path_env` is searched for an
// executable regular file. Empty when nothing is found.
std::filesystem::path find_executable(const std::string& name, const std::string& path_env,
                                      const std::filesystem::path& cwd);

// Reads one line (without the '\n') from a blocking fd into `line`, using
// `buffer` for bytes read past it. False at end of file or error with
// nothing buffered. Lines longer than `max_bytes` are returned in pieces.
bool read_line(int fd, std::string& buffer, std::string& line, size_t max_bytes = 64u << 20);

// Writes all of `data` to `fd` (retrying on EINTR and short writes).
bool write_all(int fd, std::string_view data);

}  // namespace dgld::launch
