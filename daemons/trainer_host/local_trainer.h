#pragma once
// Single-process mini-batch training over a whole graph held in memory, as
// DGL's GraphSAGE example in standalone mode: per epoch, shuffle the training
// ids (seeded), cut them into batches, sample blocks with the fanouts, gather
// the input features and the seeds' labels; the training loop itself
// (training_loop.h) is the one distributed trainers run. Evaluation is
// layer-wise full-neighbour inference over every node, giving validation and
// test accuracy.
//
// Torch-free header: the LibTorch code is in local_trainer.cpp.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/graph/csc.h"
#include "common/status.h"
#include "daemons/trainer_host/training.h"

namespace dgld {
class MappedPartition;
}

namespace dgld::trainer {

// A whole graph in memory, as training reads it. Node ids are global ids
// 0..num_nodes-1; in_edges rows are those ids. Borrows every array: the owner
// (a MappedPartition, a test's vectors) must outlive it.
struct LocalGraph {
  std::string graph_name;
  int64_t num_nodes = 0;
  AdjacencyView in_edges;
  int64_t feat_dim = 0;
  std::span<const float> features;  // [num_nodes * feat_dim], row-major
  std::span<const int64_t> labels;  // [num_nodes]
  std::vector<int64_t> train_ids, val_ids, test_ids;
  std::span<const int64_t> orig_ids;  // node i's id in the input graph; empty: i
};

// The graph of a 1-partition config (standalone mode): local ids are global
// ids. Needs _N/<feature> (float32 [n, d]; not read when `feature` is empty),
// _N/<label> (int64 [n]) and _N/train_mask (uint8); _N/val_mask and
// _N/test_mask are optional. not_found naming the tensor (and listing the
// partition's node tensors) when one is missing, invalid_argument for more
// than one partition or a wrong dtype / shape. Borrows from `part`.
Result<LocalGraph> local_graph_from_partition(const MappedPartition& part, const std::string& graph_name,
                                              const std::string& feature = "features",
                                              const std::string& label = "labels");

// Standalone mode (DGL's DGL_DIST_MODE=standalone): loads the 1-partition
// config at `part_config`, maps partition 0 and trains on it.
Result<TrainResult> train_standalone(const std::string& part_config, const TrainConfig& config);

// Trains and evaluates (run_training over the graph). Deterministic for a
// given config (seed) and thread count. Errors: the config's, labels out of
// range, and internal_error when the loss becomes NaN or infinite (naming
// epoch and step).
Result<TrainResult> train_local(const LocalGraph& graph, const TrainConfig& config);

}  // namespace dgld::trainer
