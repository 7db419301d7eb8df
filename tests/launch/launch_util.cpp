#include "tests/launch/launch_util.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "launcher/launch/files.h"
#include "tests/support/partitioned_graph.h"

namespace dgld::testing {
namespace fs = std::filesystem;

fs::path launch_bin() { return build_root() / "launcher/launch/dgl-launch"; }
fs::path fake_trainer() { return source_root() / "tests/launch/fake_trainer.sh"; }

void partition_small_graph(const fs::path& dir, int num_parts, const std::string& spec,
                           const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {partition_bin().string(), "--generate", spec, "--num-parts",
                                   std::to_string(num_parts), "--graph-name", "g", "--output", (dir / "parts").string()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto p = Process::start(argv, dir / "partition.log");
  if (p.wait(std::chrono::minutes(2)) != 0) throw std::runtime_error("dgl-partition failed: " + p.log());
}

void write_ip_config(const fs::path& dir, const std::vector<std::pair<std::string, int>>& machines) {
  std::ofstream out(dir / "ip_config.txt");
  for (const auto& [host, port] : machines) out << host << " " << port << "\n";
}

Process start_launch(const std::vector<std::string>& args, const fs::path& cwd, const fs::path& log,
                     const std::string& netns) {
  std::vector<std::string> argv;
  if (!netns.empty()) argv = {"/usr/sbin/ip", "netns", "exec", netns};
  argv.insert(argv.end(), {"/usr/bin/env", "-C", cwd.string(), launch_bin().string()});
  argv.insert(argv.end(), args.begin(), args.end());
  return Process::start(argv, log);
}

namespace {
// The NUL-separated strings of /proc/<pid>/<what>.
std::vector<std::string> proc_strings(const fs::path& dir, const char* what) {
  std::ifstream in(dir / what, std::ios::binary);
  std::vector<std::string> out;
  std::string s;
  while (std::getline(in, s, '\0')) out.push_back(s);
  return out;
}
}  // namespace

std::vector<pid_t> job_processes(const std::string& job_id) {
  std::vector<pid_t> out;
  const std::string env = "DGLD_JOB_ID=" + job_id;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == ::getpid()) continue;
    bool match = false;
    for (const auto& s : proc_strings(e.path(), "environ")) match = match || s == env;
    for (const auto& s : proc_strings(e.path(), "cmdline")) match = match || s == job_id;
    if (match) out.push_back(pid);
  }
  return out;
}

std::vector<std::string> attempt_ids(const std::string& job_id) {
  std::vector<std::string> ids = {job_id};
  for (int k = 1; k <= 8; ++k) ids.push_back(job_id + "-r" + std::to_string(k));
  return ids;
}

std::vector<pid_t> wait_job_gone(const std::string& job_id, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = job_processes(job_id);
    if (left.empty() || std::chrono::steady_clock::now() >= deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string describe_pids(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) {
    out += std::to_string(pid) + ":";
    for (const auto& s : proc_strings(fs::path("/proc") / std::to_string(pid), "cmdline")) out += " " + s;
    out += "\n";
  }
  return out;
}

namespace {
std::optional<nlohmann::json> machine_record(const fs::path& workspace, const std::string& job_id, int machine) {
  std::ifstream in(workspace / "dgld-logs" / job_id / ("machine-" + std::to_string(machine) + ".json"));
  if (!in) return std::nullopt;
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}
}  // namespace

std::optional<pid_t> recorded_pid(const fs::path& workspace, const std::string& job_id, int machine,
                                  const std::string& role, int rank) {
  auto j = machine_record(workspace, job_id, machine);
  if (!j) return std::nullopt;
  for (const auto& p : (*j)["processes"]) {
    if (p["role"] == role && p["rank"] == rank) return p["pid"].get<pid_t>();
  }
  return std::nullopt;
}

std::optional<pid_t> recorded_agent_pid(const fs::path& workspace, const std::string& job_id, int machine) {
  auto j = machine_record(workspace, job_id, machine);
  if (!j) return std::nullopt;
  return (*j)["agent_pid"].get<pid_t>();
}

bool port_listened_on(int port) {
  // /proc/net/tcp{,6}: "sl local_address rem_address st ...", the port in hex
  // after the address, state 0A = LISTEN.
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state;
      if (!(f >> sl >> local >> remote >> state)) continue;
      const auto colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) return true;
    }
  }
  return false;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LocalJob::LocalJob(int machines, const std::string& graph_spec, const std::vector<std::string>& partition_flags)
    : job_id("lt" + std::to_string(::getpid()) + "-" + std::to_string(base)) {
  fs::create_directories(src);
  partition_small_graph(src, machines, graph_spec, partition_flags);
  std::vector<std::pair<std::string, int>> lines;
  for (int m = 0; m < machines; ++m) lines.push_back({"127.0.0.1", base + 10 * m});
  write_ip_config(src, lines);
}

LocalJob::~LocalJob() {
  for (const auto& id : attempt_ids(job_id)) {
    for (pid_t pid : job_processes(id)) ::kill(pid, SIGKILL);
  }
}

std::vector<std::string> LocalJob::args(const std::vector<std::string>& extra,
                                        const std::vector<std::string>& command) const {
  std::vector<std::string> a = {"--local", "--workspace", ws.string(), "--ip-config", "ip_config.txt",
                                "--part-config", "parts/g.json", "--job-id", job_id};
  a.insert(a.end(), extra.begin(), extra.end());
  a.push_back("--");
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

Process LocalJob::start(const std::vector<std::string>& extra, const std::vector<std::string>& command) {
  return start_launch(args(extra, command), src, dir.path() / "launch.log");
}

void LocalJob::check_nothing_left() const {
  for (const auto& id : attempt_ids(job_id)) {
    auto left = wait_job_gone(id, std::chrono::seconds(3));
    INFO("processes of job " << id << " still running:\n" << describe_pids(left));
    CHECK(left.empty());
    CHECK(launch::job_shm_segments(id, -1).empty());
  }
  // Nothing listens any more (a bind test would also fail on a port the
  // kernel happened to give some unrelated connection as its ephemeral port).
  for (int p : {base, base + 1, base + 10, base + 11, base + 900}) CHECK_FALSE(port_listened_on(p));
}

LauncherExit wait_launcher_exit(Process& p, std::chrono::steady_clock::time_point since,
                                std::chrono::milliseconds timeout) {
  LauncherExit e;
  e.rc = p.wait(timeout);
  e.took = std::chrono::steady_clock::now() - since;
  std::printf("measured: %s: launcher exited %.2f s after the event\n",
              Catch::getResultCapture().getCurrentTestName().c_str(), e.took.count());
  return e;
}

}  // namespace dgld::testing
