#pragma once
// Distributed data-parallel training, DGL's GraphSAGE example in distributed
// mode: every trainer-host joins the job as a trainer (Cluster), takes its
// node_split of train_mask (force_even), iterates a DistDataLoader (batches of
// blocks + features + labels, made by sampler-workers or the trainer itself),
// runs forward/backward on its own copy of the model and averages the
// gradients of all trainers with LibTorch's c10d ProcessGroupGloo (one
// flattened bucket per step, allreduce SUM / world size) before Adam steps.
//
// Rendezvous: a c10d TCPStore whose master is rank 0 on the host of ip_config
// line 1 (machine 0), at port base_port(machine 0) + kRendezvousPortOffset
// unless a port is given. Every collective has a timeout, so a dead peer
// becomes an error naming the step, not a hang.
//
// Steps per epoch: the MIN over trainers of num_batches_per_epoch (allreduce
// MIN), so uneven splits never deadlock; a trainer with more batches drops its
// last ones in that epoch (DGL fixes this with a join; the minimum is simpler).
//
// Evaluation (simple version): each trainer classifies its node_split of
// val_mask / test_mask with full-neighbour sampling (fanout -1 per layer) in
// batches of batch_size_eval, and correct / total counts are summed with an
// allreduce. DGL's layer-wise inference into DistTensors is not done here.
//
// Torch-free header: the LibTorch / c10d code is in dist_trainer.cpp.

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemons/trainer_host/local_trainer.h"

namespace dgld::trainer {

// Added to machine 0's base port to get the TCPStore port when none is given.
inline constexpr int kRendezvousPortOffset = 900;

struct DistTrainOptions {
  std::string ip_config;
  std::string part_config;
  int machine_id = -1;    // -1: detected from the local interfaces
  int num_servers = 1;    // graph-servers per machine
  int rank = -1;          // requested trainer rank; -1: the coordinator's next free one
  int num_trainers = 0;   // in the job; 0: the coordinator's count
  std::vector<std::string> sampler_endpoints;  // "host:port"; empty: the trainer samples itself
  int rendezvous_port = 0;                     // 0: base_port(machine 0) + kRendezvousPortOffset
  std::chrono::milliseconds collective_timeout{60000};  // store, process group, every allreduce
  bool shutdown_servers = false;  // rank 0 asks the servers to exit at the end
};

struct DistTrainResult {
  TrainResult result;  // epochs / evals aggregated over all trainers
  int rank = 0;
  int num_trainers = 1;
  std::vector<double> allreduce_s;  // per epoch, this trainer's time in gradient allreduces
};

// Joins the cluster, trains, evaluates, leaves. Errors name the peer or the
// step that failed (a lost peer: the allreduce's error with epoch and step).
Result<DistTrainResult> train_distributed(const DistTrainOptions& options, const TrainConfig& config);

// metrics_json plus "num_trainers", "rank" and per-epoch "allreduce_s".
std::string dist_metrics_json(const DistTrainResult& result);

}  // namespace dgld::trainer
