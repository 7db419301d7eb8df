#include "tests/launch/virtual_hosts.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "launcher/launch/subprocess.h"

namespace dgld::testing {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr const char* kIp = "/usr/sbin/ip";
constexpr const char* kPrefix = "dgldt";  // dgldt<pid>x<n>-<role>: the creating test process is in the name

std::vector<pid_t> namespace_pids(const std::string& ns) {
  auto r = launch::run_command({kIp, "netns", "pids", ns}, 10s);
  std::vector<pid_t> out;
  if (!r.is_ok() || r->status != 0) return out;
  std::istringstream in(r->output);
  pid_t pid;
  while (in >> pid) out.push_back(pid);
  return out;
}

// Kills every process in `ns` by PID until none is left (or 5 s passed).
void empty_namespace(const std::string& ns) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    auto pids = namespace_pids(ns);
    if (pids.empty() || std::chrono::steady_clock::now() > deadline) return;
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(50ms);
  }
}

std::vector<std::string> list_namespaces() {
  auto r = launch::run_command({kIp, "netns", "list"}, 10s);
  std::vector<std::string> out;
  if (!r.is_ok()) return out;
  std::istringstream in(r->output);
  std::string line;
  while (std::getline(in, line)) {
    const std::string name = line.substr(0, line.find(' '));
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

// Namespaces left by a test process that no longer exists (a crash): emptied and deleted.
void remove_stale_namespaces() {
  for (const auto& ns : list_namespaces()) {
    if (ns.rfind(kPrefix, 0) != 0) continue;
    const std::string digits = ns.substr(std::string(kPrefix).size(), ns.find('x') - std::string(kPrefix).size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t owner = static_cast<pid_t>(std::stol(digits));
    if (::kill(owner, 0) == 0 || errno != ESRCH) continue;
    empty_namespace(ns);
    (void)launch::run_command({kIp, "netns", "del", ns}, 10s);
  }
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string VirtualHosts::unavailable() {
  if (::geteuid() != 0) return "not running as root (CI runs as root)";
  if (!fs::exists(kIp)) return std::string(kIp) + " (iproute2) is not installed";
  const std::string probe = std::string(kPrefix) + std::to_string(::getpid()) + "xprobe";
  auto r = launch::run_command({kIp, "netns", "add", probe}, 10s);
  if (!r.is_ok() || r->status != 0) {
    return "cannot create a network namespace (no CAP_NET_ADMIN?): ip netns add: " +
           (r.is_ok() ? r->output : r.status().message());
  }
  (void)launch::run_command({kIp, "netns", "del", probe}, 10s);
  return "";
}

void VirtualHosts::run(const std::vector<std::string>& argv, const std::string& what) const {
  auto r = launch::run_command(argv, 30s);
  if (!r.is_ok() || r->status != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    throw std::runtime_error("virtual hosts: " + what + " failed: " + cmd + ": " +
                             (r.is_ok() ? launch::describe_exit(r->status) + ": " + r->output : r.status().message()));
  }
}

VirtualHosts::VirtualHosts(int ssh_hosts, int silent_hosts) {
  static std::atomic<int> instances{0};
  remove_stale_namespaces();
  prefix_ = kPrefix + std::to_string(::getpid()) + "x" + std::to_string(instances++);
  try {
    const fs::path keys = dir_.path() / "keys";
    for (const fs::path& d : {keys, src(), workspace(), readonly_workspace(), dir_.path() / "ro-src"}) {
      fs::create_directories(d);
    }
    std::ofstream(dir_.path() / "ro-src" / "README") << "read-only workspace of the launch tests\n";
    run({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dgld-test-user", "-f", (keys / "id").string()},
        "ssh-keygen (user key)");
    run({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dgld-test-host", "-f", (keys / "host").string()},
        "ssh-keygen (host key)");
    std::ofstream(keys / "authorized_keys") << read_all(keys / "id.pub");
    std::string host_key = read_all(keys / "host.pub");
    host_key = host_key.substr(0, host_key.rfind(' '));  // type and key, without the comment
    {
      std::ofstream kh(keys / "known_hosts");
      for (int h = 0; h < ssh_hosts + silent_hosts; ++h) kh << address(h) << " " << host_key << "\n";
    }

    bridge_ns_ = prefix_ + "-br";
    launcher_ns_ = prefix_ + "-l";
    run({kIp, "netns", "add", bridge_ns_}, "creating the bridge namespace");
    created_.push_back(bridge_ns_);
    run({kIp, "-n", bridge_ns_, "link", "add", "br0", "type", "bridge"}, "creating the bridge");
    run({kIp, "-n", bridge_ns_, "link", "set", "br0", "up"}, "bringing the bridge up");
    std::vector<std::string> names = {launcher_ns_};
    for (int h = 0; h < ssh_hosts + silent_hosts; ++h) {
      host_ns_.push_back(prefix_ + "-h" + std::to_string(h));
      names.push_back(host_ns_.back());
    }
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& ns = names[i];
      const std::string port = "p" + std::to_string(i);
      const std::string addr = fmt::format("10.213.0.{}/24", i == 0 ? 2 : 10 + static_cast<int>(i) - 1);
      run({kIp, "netns", "add", ns}, "creating namespace " + ns);
      created_.push_back(ns);
      run({kIp, "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", bridge_ns_},
          "creating the veth pair of " + ns);
      run({kIp, "-n", ns, "addr", "add", addr, "dev", "eth0"}, "addressing " + ns);
      run({kIp, "-n", ns, "link", "set", "eth0", "up"}, "bringing up eth0 in " + ns);
      run({kIp, "-n", ns, "link", "set", "lo", "up"}, "bringing up lo in " + ns);
      run({kIp, "-n", bridge_ns_, "link", "set", port, "master", "br0"}, "bridging " + ns);
      run({kIp, "-n", bridge_ns_, "link", "set", port, "up"}, "bringing up the bridge port of " + ns);
    }
    for (int h = 0; h < ssh_hosts; ++h) {
      fs::create_directories(host_dir(h));
      start_sshd(h);
    }
  } catch (...) {
    destroy();
    throw;
  }
}

void VirtualHosts::start_sshd(int h) {
  const fs::path keys = dir_.path() / "keys";
  const fs::path config = dir_.path() / ("sshd-h" + std::to_string(h) + ".conf");
  std::ofstream(config) << "ListenAddress " << address(h) << ":22\n"
                        << "HostKey " << (keys / "host").string() << "\n"
                        << "AuthorizedKeysFile " << (keys / "authorized_keys").string() << "\n"
                        << "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                        << "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nPidFile none\n"
                        << "Subsystem sftp internal-sftp\nPrintMotd no\nMaxStartups 100:30:200\nMaxSessions 100\n"
                        << "LogLevel INFO\n";
  // In the sshd's own mount namespace (ip netns exec makes one, not propagated back):
  // a private /run for its privilege-separation directory, the workspace path bound
  // to this host's directory, and a read-only workspace.
  const std::string script = "set -e; mount -t tmpfs dgld-test-run /run; mkdir -p -m 755 /run/sshd; "
                             "mount --bind '" + host_dir(h).string() + "' '" + workspace().string() + "'; "
                             "mount --bind '" + (dir_.path() / "ro-src").string() + "' '" + readonly_workspace().string() + "'; "
                             "mount -o remount,bind,ro '" + readonly_workspace().string() + "'; "
                             "exec /usr/sbin/sshd -D -e -f '" + config.string() + "'";
  sshd_.push_back(Process::start({kIp, "netns", "exec", host_ns_[static_cast<size_t>(h)], "/bin/sh", "-c", script},
                                 dir_.path() / ("sshd-h" + std::to_string(h) + ".log")));
  if (!sshd_.back().wait_for_log("Server listening on", 20s)) {
    throw std::runtime_error("virtual hosts: sshd of host " + std::to_string(h) + " did not start:\n" +
                             sshd_.back().log());
  }
}

VirtualHosts::~VirtualHosts() { destroy(); }

void VirtualHosts::destroy() {
  for (const auto& ns : created_) empty_namespace(ns);
  sshd_.clear();  // reaped (killed above, or now)
  for (const auto& ns : created_) (void)launch::run_command({kIp, "netns", "del", ns}, 10s);
  created_.clear();
}

std::string VirtualHosts::address(int host) const { return "10.213.0." + std::to_string(10 + host); }
fs::path VirtualHosts::src() const { return dir_.path() / "src"; }
fs::path VirtualHosts::workspace() const { return dir_.path() / "ws"; }
fs::path VirtualHosts::host_dir(int host) const { return dir_.path() / ("host" + std::to_string(host)); }
fs::path VirtualHosts::readonly_workspace() const { return dir_.path() / "ro"; }

std::vector<std::string> VirtualHosts::ssh_flags() const {
  const fs::path keys = dir_.path() / "keys";
  return {"--identity-file", (keys / "id").string(), "--ssh-option", "UserKnownHostsFile=" + (keys / "known_hosts").string(),
          "--ssh-option", "GlobalKnownHostsFile=/dev/null", "--ssh-option", "StrictHostKeyChecking=yes"};
}

std::vector<pid_t> VirtualHosts::processes_on(int host) const {
  auto pids = namespace_pids(host_ns_[static_cast<size_t>(host)]);
  if (host < static_cast<int>(sshd_.size())) std::erase(pids, sshd_[static_cast<size_t>(host)].pid());
  return pids;
}

}  // namespace dgld::testing
