#pragma once
// Hosts for the multi-host dgl-launch tests, built on this machine: one
// network namespace per host (10.213.0.x addresses that exist only inside
// them, joined by a bridge in a namespace of its own), a namespace for the
// launcher, and on each ssh host a real /usr/sbin/sshd with key-only auth
// (keys generated for the test). Each sshd runs in a private mount namespace
// where the shared workspace path is bound to that host's own directory, so
// every host sees a different workspace at the same path, as on a cluster.
// The destructor kills every process in the namespaces (by PID, from `ip
// netns pids`), deletes the namespaces and the directories, also when a test
// failed.

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace dgld::testing {

class VirtualHosts {
 public:
  // Why such hosts cannot be made here ("" when they can): not root, or no
  // network namespaces (no CAP_NET_ADMIN).
  static std::string unavailable();

  // `ssh_hosts` hosts with an sshd, then `silent_hosts` without one. Throws
  // std::runtime_error naming the step that failed.
  VirtualHosts(int ssh_hosts, int silent_hosts);
  ~VirtualHosts();
  VirtualHosts(const VirtualHosts&) = delete;
  VirtualHosts& operator=(const VirtualHosts&) = delete;

  const std::string& launcher_ns() const { return launcher_ns_; }
  std::string address(int host) const;                  // 10.213.0.(10 + host)
  std::filesystem::path src() const;                    // the launcher's directory (data, ip_config)
  std::filesystem::path workspace() const;              // same path on every host...
  std::filesystem::path host_dir(int host) const;       // ...backed by this directory on host `host`
  std::filesystem::path readonly_workspace() const;     // read-only on every host
  // --identity-file and --ssh-option flags for dgl-launch.
  std::vector<std::string> ssh_flags() const;
  // PIDs of the processes in host `host`'s network namespace, its sshd excluded.
  std::vector<pid_t> processes_on(int host) const;
  int num_hosts() const { return static_cast<int>(host_ns_.size()); }

 private:
  void run(const std::vector<std::string>& argv, const std::string& what) const;
  void start_sshd(int host);
  void destroy();

  TempDir dir_{"dgld-netns"};
  std::string prefix_;
  std::string bridge_ns_, launcher_ns_;
  std::vector<std::string> host_ns_;
  std::vector<std::string> created_;  // namespaces to delete
  std::vector<Process> sshd_;
};

}  // namespace dgld::testing
