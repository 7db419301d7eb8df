#pragma once
// The sampler-workers of one trainer, started as its child processes, as
// DGL's trainers start their sampler processes: `count` sampler-worker
// processes serving this trainer's rank, each listening on a free loopback
// port that it reports through a pipe. Children get SIGTERM if the trainer
// dies (PR_SET_PDEATHSIG); stop() (or the destructor) terminates them by PID
// and reaps them. A child that ends while the trainer runs on (killed: its
// batches go to the others) is reaped by a thread of its own and logged,
// not left a zombie until the end. Torch-free.

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace dgld::trainer {

struct SamplerChildrenOptions {
  std::string executable;  // sampler-worker; empty: next to this executable (or ../sampler_worker/ in a build tree)
  int count = 0;
  std::string part_config, ip_config;
  int machine_id = 0;
  int num_servers = 1;
  int group = 0;  // the trainer's rank
  std::string job_id;
  std::string secret_file;  // passed on; empty: the children inherit DGLD_SECRET_FILE if set
  std::string log_level = "info";
  int64_t feature_cache_mb = 256;
  int ready_timeout_s = 120;
  int nice = 0;  // added to the children's nice value (they sample while the trainer computes)
};

class SamplerChildren {
 public:
  // Starts every child and waits until each reports its port; on any failure
  // the ones started are stopped and the error names the child.
  static Result<std::unique_ptr<SamplerChildren>> start(const SamplerChildrenOptions& options);
  ~SamplerChildren();
  SamplerChildren(const SamplerChildren&) = delete;
  SamplerChildren& operator=(const SamplerChildren&) = delete;

  // "127.0.0.1:<port>" of every child.
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  // Children that ended before stop() (reaped by the reaper thread).
  int exited() const;
  // SIGTERM, then SIGKILL after a grace period; an error if one had already
  // exited with a failure (naming it and its status).
  Status stop();

 private:
  SamplerChildren() = default;
  void reap_loop();
  // Records (and logs) the workers that have ended; mu_ held.
  void reap_exited_locked();
  std::vector<pid_t> pids_;
  std::vector<std::string> endpoints_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<int> status_;  // per child: its wait status once reaped, -1 while it runs
  std::thread reaper_;
};

// The sampler-worker executable next to the running program.
std::string default_sampler_worker_path();

}  // namespace dgld::trainer
