#pragma once
// Per-epoch accounting of the training loop: what each batch asked of the
// network (its RPCs, where its rows came from, its edges, the model's
// FLOPs), this trainer's other frames, and the gradient allreduce's bytes,
// summed over every trainer at the epoch's end into EpochMetrics::cluster
// (training.h; docs/performance.md, "Traffic").
//
// Private to training code (LibTorch: the sum is a collective).

#include <cstdint>
#include <string>
#include <vector>

#include "client/batch_builder.h"
#include "common/net/traffic.h"
#include "common/status.h"
#include "daemons/trainer_host/training.h"

namespace dgld::trainer {

class TrainingBackend;

// Estimated FLOPs of a forward and backward pass (3x the forward) of a
// message-passing model over `blocks`, whose layer l maps dims[l] to
// dims[l + 1] wide rows: per layer, each edge's message (one add per input
// value) and `maps` dense maps of the destination rows (SAGE: self and
// neighbour, 2; GCN, GAT: 1). Attention and activations are not counted.
double estimate_model_flops(const std::vector<Block>& blocks, const std::vector<int64_t>& dims, int maps);

class EpochAccounting {
 public:
  explicit EpochAccounting(TrainingBackend& backend);
  // At the epoch's start: this trainer's own traffic so far.
  void start();
  void add_batch(const client::Batch& batch, double flops);
  // One gradient allreduce of `bytes` among the trainers.
  void add_allreduce(int64_t bytes);
  // Sums every trainer's figures (a collective: every trainer calls it at
  // the same point) into m.cluster, with this trainer's CPU figures of m.
  Status finish(EpochMetrics& m);

 private:
  void add_link(int from, int to, int64_t bytes);

  TrainingBackend& b_;
  EpochCluster c_;
  net::TrafficSnapshot own_start_;
  net::CallCost own_batches_;  // RPCs of the batches this trainer made itself (already in its own traffic)
};

// "12.3 MB" style sizes for log lines.
std::string human_bytes(double bytes);

}  // namespace dgld::trainer
