#pragma once
// SamplerWorker: one sampler-worker process (DGL's sampler process). It
// joins the cluster as a sampler of one trainer (Cluster role sampler, group
// = the trainer's rank), listens on a local port and answers SampleBatch
// requests (docs/formats.md) on a pool of handler threads, each building the
// mini-batch with client::BatchBuilder: the same code the trainer runs when
// it samples itself. Stops on stop() (the daemon's SIGINT/SIGTERM) and then
// leaves the cluster.

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "common/logging.h"
#include "common/net/auth.h"
#include "common/status.h"

namespace dgld::sampler {

struct SamplerWorkerOptions {
  std::filesystem::path part_config;
  std::filesystem::path ip_config;
  int machine_id = -1;   // -1: detected from the local addresses
  int num_servers = 1;   // graph-servers per machine
  int group = -1;        // the trainer rank served
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;   // 0: pick a free one (logged as "listening on host:port")
  int num_threads = 2;   // requests processed at once
  std::string job_id;    // shared-memory job id; empty: the default
  size_t feature_cache_bytes = size_t{256} << 20;  // other machines' feature rows kept here (row_cache.h)
  net::SecretPtr secret;  // the job's shared secret: for the servers it calls and the trainer calling it
  int ready_fd = -1;     // >= 0: "<port>\n" is written to this fd once listening, then it is closed
  std::chrono::milliseconds connect_timeout{30000};
  std::chrono::milliseconds call_timeout{30000};
  LogOptions log;
};

struct ParsedOptions {
  SamplerWorkerOptions options;
  int exit_code = -1;  // >= 0: exit now (--help, --version, usage error printed)
};
ParsedOptions parse_sampler_worker_options(int argc, const char* const argv[]);

class SamplerWorker {
 public:
  static Result<std::unique_ptr<SamplerWorker>> create(const SamplerWorkerOptions& opts);
  ~SamplerWorker();

  uint16_t port() const;
  // Blocks until stop(); returns why it stopped.
  Status wait();
  void stop(const std::string& reason);
  uint64_t batches_served() const;

  struct Impl;

 private:
  explicit SamplerWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgld::sampler
