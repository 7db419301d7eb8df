#pragma once
// Distributed data-parallel training, DGL's GraphSAGE example in distributed
// mode: every trainer-host joins the job as a trainer (Cluster), takes its
// node_split of train_mask (force_even), iterates a DistDataLoader (batches of
// blocks + features + labels, made by its sampler-workers or by itself) and
// runs the shared training loop (training_loop.h) with the gradients of all
// trainers averaged over LibTorch's c10d ProcessGroupGloo.
//
// Rendezvous: dgld's store (client/rendezvous_store.h, authenticated with
// the job's secret) served by rank 0 on the host of ip_config line 1
// (machine 0), at base_port(machine 0) + kRendezvousPortOffset unless a
// port is given; the Gloo group forms through it (dist_collectives.h). Every collective has a timeout, so a dead peer becomes an
// error naming the step, never a hang.
//
// Steps per epoch: the minimum over trainers of their batch counts, so uneven
// splits never deadlock (a trainer with more batches skips its last ones in
// that epoch; the shuffle differs per epoch, so no seed is always skipped).
//
// Evaluation: DGL's layer-wise inference. Every trainer takes its node_split
// of all nodes; layer l's output for those nodes is computed from the full
// in-neighbourhood and pushed into a DistTensor that layer l+1 reads; the
// last layer's predictions are compared with the labels of the val / test
// nodes, and the counts are summed over the trainers.
//
// Learnable features: the embedding and its optimiser state are DistTensors;
// each row is owned by one trainer of the machine that owns the node, and the
// gradient rows of a step reach their owners through a Gloo all-to-all.
//
// Torch-free header: the LibTorch / c10d code is in dist_trainer.cpp.

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemons/trainer_host/training.h"

namespace dgld::trainer {

// Added to machine 0's base port to get the rendezvous store's port when none is given.
inline constexpr int kRendezvousPortOffset = 900;

// The nice value of the trainer's sampling threads and of the sampler-workers
// it starts: the model step, which every trainer waits for at the gradient
// allreduce, gets the cores first, and sampling uses what it leaves (measured
// in docs/performance.md: the same epoch time, the model step no longer
// slowed by the prefetching threads).
inline constexpr int kSamplingThreadNice = 10;

struct DistTrainOptions {
  std::string ip_config;
  std::string part_config;
  int machine_id = -1;    // -1: detected from the local interfaces
  int num_servers = 1;    // graph-servers per machine
  int rank = -1;          // requested trainer rank; -1: the coordinator's next free one
  int num_trainers = 0;   // in the job; 0: the coordinator's count
  std::string job_id;     // shared-memory job id; empty: the default
  std::string secret_file;  // the job's shared secret (mode 0600); empty: DGLD_SECRET_FILE, or none
  // Sampler-workers: "host:port" of running ones, or num_samplers to start
  // (as children of this process, sampler-worker next to trainer-host).
  std::vector<std::string> sampler_endpoints;
  int num_samplers = 0;
  std::string sampler_worker_path;  // empty: found next to this executable
  std::string log_level = "info";   // passed to the sampler-workers
  int64_t feature_cache_mb = 256;   // other machines' feature rows kept by the trainer and each sampler-worker
  int64_t prefetch_mb = 512;        // MiB of batches made ahead of training, at most (0: no bound)
  // Batches in flight or ready, at most: 3 keeps both sampling threads busy
  // (4 gave the same epoch on the DistDGL configuration, 30 MiB more peak).
  int prefetch = 3;
  int rendezvous_port = 0;          // 0: base_port(machine 0) + kRendezvousPortOffset
  std::chrono::milliseconds collective_timeout{60000};  // store, process group, every allreduce
  bool shutdown_servers = false;  // rank 0 asks the servers to exit at the end
};

// Joins the cluster, trains, evaluates, leaves. Errors name the peer or the
// step that failed (a lost peer: the allreduce's error with epoch and step).
Result<TrainResult> train_distributed(const DistTrainOptions& options, const TrainConfig& config);

}  // namespace dgld::trainer
