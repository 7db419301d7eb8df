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

class EpochAccounting {
 public:
  explicit EpochAccounting(TrainingBackend& backend);
  // At the epoch's start: this trainer's own traffic so far.
  void start();
  // A batch this trainer trained on: its model step's FLOPs (model_cost.h)
  // and the bytes of its input feature rows.
  void add_batch(const client::Batch& batch, double flops, int64_t feature_bytes);
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
  double own_flops_ = 0;           // this trainer's model steps
  int64_t own_feature_bytes_ = 0;  // this trainer's input feature rows
};

// The log lines of an epoch: times, CPU, the model step against the GEMM
// peak, and (several machines) the traffic.
std::vector<std::string> epoch_log_lines(const EpochMetrics& m);

// "12.3 MB" style sizes for log lines.
std::string human_bytes(double bytes);

}  // namespace dgld::trainer
