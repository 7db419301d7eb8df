#include "launcher/launch/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "common/file_util.h"

namespace dgld::launch {
namespace fs = std::filesystem;

Result<bool> copy_if_different(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (fs::exists(to, ec) && fs::equivalent(from, to, ec)) return false;
  DGLD_ASSIGN_OR_RETURN(auto src, digest_file(from));
  if (fs::exists(to, ec)) {
    auto dst = digest_file(to);
    if (dst.is_ok() && *dst == src) return false;
  }
  fs::create_directories(to.parent_path(), ec);
  if (ec) return io_error("cannot create directory " + to.parent_path().string() + ": " + ec.message());
  fs::path tmp = to;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(tmp, to, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return io_error("cannot copy " + from.string() + " to " + to.string() + ": " + ec.message());
  }
  return true;
}

fs::path in_workspace(const fs::path& workspace, const std::string& path) {
  const fs::path p(path);
  return (p.is_absolute() ? p : workspace / p).lexically_normal();
}

std::vector<pid_t> find_job_processes(const std::string& job_id, int machine) {
  std::vector<pid_t> out;
  const std::string job = "DGLD_JOB_ID=" + job_id;
  const std::string mach = "DGLD_MACHINE_ID=" + std::to_string(machine);
  const uid_t me = ::geteuid();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    if (pid == ::getpid()) continue;
    struct stat st {};
    if (::stat(e.path().c_str(), &st) != 0 || st.st_uid != me) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    bool has_job = false, has_machine = machine < 0;
    std::string var;
    while (std::getline(in, var, '\0')) {
      has_job = has_job || var == job;
      has_machine = has_machine || var == mach;
    }
    if (has_job && has_machine) out.push_back(pid);
  }
  return out;
}

std::vector<std::string> job_shm_segments(const std::string& job_id, int machine) {
  const std::string prefix =
      machine >= 0 ? fmt::format("dgld.{}.m{}.", job_id, machine) : fmt::format("dgld.{}.m", job_id);
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  }
  return out;
}

}  // namespace dgld::launch
