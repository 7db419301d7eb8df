#pragma once
// dgld._C's Client: one process's membership of a job (client::Cluster).
// DistTensors and loaders hold the Client that made them, so the cluster
// outlives them.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/cluster.h"
#include "client/data_loader.h"
#include "client/row_cache.h"
#include "python/src/binding.h"

namespace dgld::python {

struct ClientOptions {
  std::string ip_config, part_config;
  std::string role = "trainer";
  int machine_id = -1, rank = -1, num_trainers = 0, num_servers = 1, group = -1;
  std::string job_id, secret_file;
  double connect_timeout_s = 30, call_timeout_s = 60;
};

class Client {
 public:
  explicit Client(const ClientOptions& o);

  // The job; StatusError (closed) after close().
  client::Cluster& cluster();
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Loaders made over this client: stopped before the cluster goes.
  void add_loader(std::weak_ptr<client::DistDataLoader> l) {
    std::erase_if(loaders_, [](const auto& w) { return w.expired(); });  // loaders gone already
    loaders_.push_back(std::move(l));
  }
  // `l` starts an epoch: when another loader ran last (training after
  // evaluation, or the other way round), the others' idle feature buffers
  // are freed and the heap trimmed, so that memory the idle loaders keep
  // for their next epoch is not held on top of the active one's.
  void starting_epoch(const std::shared_ptr<client::DistDataLoader>& l);

  // The halo cache of node tensor `feature` (row_cache.h) within `bytes`,
  // built once and shared by every loader of this process that asks for
  // the same while one of them holds it (a script makes a new loader for
  // each evaluation; each used to pull and keep its own copy). Null for a
  // heterogeneous graph or a tensor that is not a float32 node matrix (the
  // loader then reports the problem itself) and when bytes is 0.
  std::shared_ptr<const client::RowCache> shared_halo_cache(const std::string& feature, size_t bytes);

  // Leaves the job (rank 0 may stop the servers). With `abort` (an
  // interrupted process) the connections are closed first, so threads in
  // server calls return at once, and nobody is told.
  void close(bool shutdown_servers, const std::string& reason, bool abort);

  void barrier(const std::string& name, double timeout_s);
  py::list tensors();
  torch::Tensor degrees(const torch::Tensor& ids_in, bool out);
  py::tuple find_edges(const torch::Tensor& eids_in);
  // With etype_fanouts (one per edge type of a typed graph) each type is
  // sampled separately and `fanout` is unused (DGL's sample_etype_neighbors).
  py::tuple sample_neighbors(const torch::Tensor& seeds_in, int64_t fanout, bool replace, bool out_edges,
                             const std::string& prob, uint64_t rng_seed, const std::vector<int64_t>& etype_fanouts);

 private:
  std::unique_ptr<client::Cluster> cluster_;
  std::vector<std::weak_ptr<client::DistDataLoader>> loaders_;
  std::weak_ptr<client::DistDataLoader> last_epoch_loader_;
  std::map<std::pair<std::string, size_t>, std::weak_ptr<const client::RowCache>> halo_caches_;
  int64_t unnamed_barriers_ = 0;  // barrier() calls without a name so far
  std::chrono::milliseconds timeout_{60000};
};

}  // namespace dgld::python
