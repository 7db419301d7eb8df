#pragma once
// Single-process mini-batch training over a whole graph held in memory, as
// DGL's GraphSAGE example in standalone mode: per epoch, shuffle the training
// ids (seeded), cut them into batches, sample blocks with the fanouts, gather
// the input features and the seeds' labels, forward, cross-entropy, Adam.
// Evaluation is layer-wise full-neighbour inference over every node, giving
// validation and test accuracy.
//
// Torch-free header: the LibTorch code is in local_trainer.cpp.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/graph/csc.h"
#include "common/status.h"

namespace dgld {
class MappedPartition;
}

namespace dgld::trainer {

// Flags of DGL's GraphSAGE example, same names and defaults, plus a few dgld
// additions (marked).
struct TrainConfig {
  int num_epochs = 20;
  int64_t num_hidden = 16;
  int num_layers = 2;
  std::string fan_out = "10,25";  // one fanout per layer, input layer first; -1: all, 0: none
  int64_t batch_size = 1000;
  int64_t batch_size_eval = 100000;
  double lr = 0.003;
  double dropout = 0.5;
  int eval_every = 5;   // evaluate after every eval_every-th epoch (and after the last); 0: last only
  int log_every = 20;   // log every log_every steps
  std::string model = "sage";  // sage | gcn | gat
  uint64_t seed = 0;
  int num_threads = 0;  // LibTorch intra-op threads; 0: OMP_NUM_THREADS if set, else all cores
  // dgld additions.
  int num_heads = 1;           // GAT heads
  double weight_decay = 0.0;   // Adam weight decay (L2), DGL's example uses none
  bool row_normalize = false;  // divide each feature row by its sum (as the GCN paper does for Cora)
  bool replace = false;        // sample with replacement
};

// "10,25" -> {10, 25}; invalid_argument naming the bad item.
Result<std::vector<int64_t>> parse_fan_out(const std::string& text);
// Checks every field, and that fan_out has num_layers entries; the message
// names the flag.
Status validate_train_config(const TrainConfig& config);
// The thread count train_local uses for `config.num_threads`.
int resolve_num_threads(int num_threads);

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
};

// The graph of a 1-partition config (standalone mode): local ids are global
// ids. Needs _N/features (float32 [n, d]), _N/labels (int64 [n]) and
// _N/train_mask (uint8); _N/val_mask and _N/test_mask are optional. not_found
// naming the tensor when one is missing, invalid_argument for more than one
// partition or a wrong dtype / shape. Borrows from `part`.
Result<LocalGraph> local_graph_from_partition(const MappedPartition& part, const std::string& graph_name);

struct EpochMetrics {
  int epoch = 0;
  double loss = 0;        // mean over the epoch's batches
  double train_acc = 0;   // over the epoch's seeds, in training mode
  double time_s = 0;
  double sample_s = 0;    // sampling blocks
  double fetch_s = 0;     // gathering features and labels, batch -> tensors
  double compute_s = 0;   // forward, backward, optimiser step
  double seeds_per_s = 0;
};

struct EvalMetrics {
  int epoch = 0;  // evaluated after this epoch
  double val_acc = 0, test_acc = 0;
  double time_s = 0;
};

struct TrainResult {
  std::string graph_name;
  TrainConfig config;
  int64_t num_classes = 0;
  int64_t num_parameters = 0;
  std::vector<EpochMetrics> epochs;
  std::vector<EvalMetrics> evals;
  double val_acc = 0, test_acc = 0;  // from the last evaluation
  double total_time_s = 0;
};

// Standalone mode (DGL's DGL_DIST_MODE=standalone): loads the 1-partition
// config at `part_config`, maps partition 0 and trains on it.
Result<TrainResult> train_standalone(const std::string& part_config, const TrainConfig& config);

// Trains and evaluates. Deterministic for a given config (seed) and thread
// count. Errors: the config's, labels out of range, and internal_error when the
// loss becomes NaN or infinite (naming epoch and step).
Result<TrainResult> train_local(const LocalGraph& graph, const TrainConfig& config);

// The metrics JSON trainer-host writes:
// {"graph_name","model","num_trainers":1,"config":{...},"epochs":[...],
//  "evals":[...],"val_acc","test_acc","total_time_s"}.
std::string metrics_json(const TrainResult& result);

}  // namespace dgld::trainer
