#pragma once
// What a training run is asked to do and what it reports, shared by the
// standalone trainer (local_trainer.h) and the distributed one
// (dist_trainer.h), which both run the one loop in training_loop.h.
//
// Torch-free: options parsing, tools and tests include it without LibTorch.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/process_memory.h"
#include "common/status.h"
#include "common/sampling/sampling_spec.h"
#include "daemons/trainer_host/step_profile.h"

namespace dgld::trainer {

// A trainable node embedding (DGL's DistEmbedding) as model input.
enum class LearnableFeatures {
  off,      // the input features only
  replace,  // the embedding instead of the input features (graphs without features)
  concat,   // [input features, embedding]
};
Result<LearnableFeatures> parse_learnable_features(const std::string& text);
const char* learnable_features_name(LearnableFeatures v);

// Flags of DGL's GraphSAGE example, same names and defaults, plus dgld
// additions (marked).
struct TrainConfig {
  int num_epochs = 20;
  int64_t num_hidden = 16;
  int num_layers = 2;
  std::string fan_out = "10,25";  // one fanout per layer, input layer first; -1: all, 0: none
  int64_t batch_size = 1000;
  int64_t batch_size_eval = 100000;  // the most nodes in a chunk of layer-wise evaluation
  int64_t eval_memory_mb = 32;       // dgld: the byte budget of such a chunk (eval_chunks.h)
  int64_t eval_fan_out = -1;  // layer-wise evaluation's neighbours per node (per edge type); -1: all
  double lr = 0.003;
  double dropout = 0.5;
  int eval_every = 5;   // evaluate after every eval_every-th epoch and after the last; 0: the last only; -1: never
  int log_every = 20;   // log every log_every steps
  std::string model = "sage";  // sage | gcn | gat
  uint64_t seed = 0;
  int num_threads = 0;  // LibTorch intra-op threads; 0: OMP_NUM_THREADS if set, else all cores
  // dgld additions.
  int num_heads = 1;           // GAT heads
  std::string kernels = "fused";  // fused | reference (index_select + index_add_), see model.h
  double weight_decay = 0.0;   // Adam weight decay (L2), DGL's example uses none
  bool row_normalize = false;  // divide each feature row by its sum (as the GCN paper does for Cora)
  bool replace = false;        // sample with replacement
  std::string sample_prob;     // float32 edge tensor of sampling weights (DGL's prob=); empty: uniform
  std::string feature = "features";  // float32 node tensor of input features ("_N/<feature>")
  std::string label = "labels";      // int64 node tensor of labels
  // DistEmbedding: a learnable per-node embedding, updated by a sparse optimiser.
  LearnableFeatures learnable_features = LearnableFeatures::off;
  int64_t embed_dim = 64;
  std::string sparse_optimizer = "adagrad";  // adagrad | adam
  double sparse_lr = 0.05;
  // Checkpoints (common/checkpoint_store.h) into checkpoint_dir (empty:
  // none): after every checkpoint_every-th epoch and the last, and (when > 0)
  // after every checkpoint_every_steps-th step of the run; resume continues
  // from the newest one every trainer holds intact.
  std::string checkpoint_dir;
  int checkpoint_every = 1;
  int64_t checkpoint_every_steps = 0;
  // Copies of each trainer's committed checkpoint on this many other
  // machines (the next ones in ip_config order; 0: none), so that a spare
  // can resume a lost machine's trainers without shared storage.
  int checkpoint_replicas = 1;
  bool resume = false;
  // A progress bar per epoch when stderr is a terminal; off: plain lines only.
  bool progress = true;
  // Models (docs/models.md). model_file: a TorchScript module instead of the
  // built-in `model`. save_model: the trained model as TorchScript (rank 0).
  std::string model_file;
  std::string save_model;
  // Offline inference: every node's output of the last layer (and of
  // embeddings_layer when >= 0) written to output_dir as .npy + .json,
  // ordered by original node id. infer: no training, model_file's weights;
  // without it, after training.
  bool infer = false;
  std::string output_dir;
  int embeddings_layer = -1;
  // Link prediction (docs/link-prediction.md): the model is an encoder whose
  // last layer gives num_hidden-wide node embeddings, a scorer turns a pair
  // of embeddings into a logit, trained with binary cross-entropy over the
  // training edges (edge_split of the edge tensor train_mask) and num_negatives negative
  // destinations per edge; evaluated on the partitions' held-out edges.
  std::string task = "node";          // node | link
  std::string scorer = "dot";         // dot | mlp
  int num_negatives = 1;
  std::string neg_sampler = "uniform";  // uniform | local-uniform
  bool neg_exclude_positives = false;
  // The batch's edges left out of its blocks: reverse_id (them and their
  // reverse edges, DGL's exclude='reverse_id') | self (them alone) | none.
  std::string exclude = "reverse_id";
  // Model selection: after training, the weights of the evaluation with the
  // best validation metric (acc for --task node, mrr or auc for --task link)
  // are restored, and that evaluation's figures are the run's; off: the last.
  std::string keep_best = "off";  // off | acc | mrr | auc
  // Heterogeneous graphs (docs/heterogeneous.md): the labelled node type to
  // classify (empty: the partition config's target_ntype), and R-GCN's basis
  // count (0: one weight per relation). Every node type is embedded into
  // embed_dim: a type with `feature` through a linear projection, a type
  // without one by a learnable embedding (DistEmbedding, sparse optimiser).
  std::string target_ntype;
  int num_bases = 0;
  // --profile-steps: LibTorch's profiler over this many model steps of the
  // second epoch (the first when there is one), by operator (step_profile.h).
  int profile_steps = 0;
  // Measure the GEMM rate of the model's shapes on the first batch, for the
  // epochs' share of the machine's limit (model_cost.h).
  bool measure_peak = true;
};

// "10,25" -> {10, 25}; invalid_argument naming the bad item.
Result<std::vector<int64_t>> parse_fan_out(const std::string& text);
// The flags' SamplingSpec (--fan-out, --replace, --sample-prob), one fanout
// per layer; per-edge-type fanouts (num_etypes > 0: DGL's int fanout on a
// heterogeneous graph, that many of every type) when the graph has types.
Result<SamplingSpec> sampling_spec(const TrainConfig& config, int num_etypes = 0);
// Checks every field, and that fan_out has num_layers entries; the message
// names the flag.
Status validate_train_config(const TrainConfig& config);
// The thread count a run uses for `config.num_threads`.
int resolve_num_threads(int num_threads);

// One epoch's figures summed over every trainer of the job (and the
// sampler-workers that made their batches): what went between machines and
// what the work cost (docs/performance.md, "Traffic" and "Cost model").
// Standalone: this process alone, with no traffic.
struct EpochCluster {
  int num_machines = 0;
  int64_t seeds = 0, batches = 0;
  int64_t round_trips = 0;    // RPCs to other machines' servers made to build the batches
  int64_t input_rows = 0;     // input nodes of the batches (feature rows the model read)
  int64_t remote_rows = 0;    // ... pulled from other machines
  int64_t cached_rows = 0;    // ... of other machines, served by a feature cache
  int64_t sampled_edges = 0;  // edges of every block
  double model_flops = 0;     // estimated, forward and backward (epoch_accounting.h)
  int64_t batch_bytes = 0;      // bytes of the batches' RPCs with other machines (requests and replies)
  int64_t other_bytes = 0;      // the trainers' other frames with other machines (heartbeats, barriers, ...)
  int64_t allreduce_bytes = 0;  // the gradient allreduce between machines (ring: 2 (n-1)/n of the bucket)
  // Bytes sent from machine i to machine j at [i * num_machines + j] (i != j).
  std::vector<int64_t> link_bytes;
  double sample_cpu_s = 0, fetch_cpu_s = 0, compute_cpu_s = 0, allreduce_cpu_s = 0, process_cpu_s = 0;
  int64_t network_bytes() const { return batch_bytes + other_bytes + allreduce_bytes; }
};

struct EpochMetrics {
  int epoch = 0;
  double loss = 0;         // mean over the epoch's batches (of every trainer)
  double train_acc = 0;    // over the epoch's seeds, in training mode
  double time_s = 0;
  double sample_s = 0;     // sampling blocks (on whoever made the batch; prefetched batches overlap training)
  double fetch_s = 0;      // features and labels: pulling them and turning the batch into tensors
  double compute_s = 0;    // forward, backward, optimiser steps (sparse ones included)
  double allreduce_s = 0;  // gradient averaging across trainers
  double wait_s = 0;       // this trainer blocked waiting for its next batch
  double seeds_per_s = 0;  // training seeds of every trainer per second
  // CPU time (common/cpu_time.h) of the same stages: sampling and fetching on
  // the threads (or sampler-workers) that made the batches; compute,
  // allreduce and the trainer's own share of the fetch on the training
  // thread (libtorch's other intra-op threads count in process_cpu_s only);
  // process_cpu_s every thread of this trainer over the epoch.
  double sample_cpu_s = 0, fetch_cpu_s = 0, compute_cpu_s = 0, allreduce_cpu_s = 0, process_cpu_s = 0;
  std::vector<double> step_losses;  // each step's loss, averaged over the trainers
  int64_t peak_rss_bytes = -1;      // this trainer's peak resident memory so far, at the epoch's end
  // The model step against the machine's limit (model_cost.h): this
  // trainer's FLOPs (forward and backward) and input feature bytes, and the
  // rate of products of the model's shapes measured in the run (0: not measured).
  double model_flops = 0;
  int64_t feature_bytes = 0;
  double gemm_peak_gflops = 0;
  double model_gflops() const { return compute_s > 0 ? model_flops / compute_s / 1e9 : 0.0; }
  double peak_fraction() const { return gemm_peak_gflops > 0 ? model_gflops() / gemm_peak_gflops : 0.0; }
  // Input feature bytes per second of the time spent fetching them.
  double gather_gb_per_s() const { return fetch_s > 0 ? static_cast<double>(feature_bytes) / fetch_s / 1e9 : 0.0; }
  double end_unix_s = 0;            // wall clock (Unix seconds) at the epoch's end, to line up outside measurements
  EpochCluster cluster;             // every trainer's, summed
};

// Where a trainer's memory goes (metrics.json "memory"; -1: unknown or none).
struct MemoryReport {
  ProcessMemory process;                 // at the end of training
  int64_t partition_bytes = -1;          // the local partition's files, mapped (pages shared with the graph-server)
  int64_t feature_cache_bytes = -1;      // other machines' feature rows kept (--feature-cache-mb bounds it)
  int64_t largest_batch_bytes = -1;      // the largest mini-batch made (features, blocks, labels)
  int64_t idle_buffer_bytes = -1;        // feature buffers kept for the next batches
  int64_t prefetch_limit_bytes = -1;     // --prefetch-mb (0: no bound)
  int64_t model_bytes = -1;              // the model's parameters and the optimiser's state
  // The stages (start-up, training, evaluation, outputs) that raised the
  // process's peak RSS, in order, each with the peak it reached: the last
  // one names the stage of the peak; a stage not listed stayed below it.
  std::vector<std::pair<std::string, int64_t>> stage_peaks;
};

// Ranking metrics of held-out edges against their pre-drawn negatives.
struct LinkMetrics {
  int64_t num_edges = 0;
  double mrr = 0, hits1 = 0, hits10 = 0, hits50 = 0, auc = 0;
};

struct EvalMetrics {
  int epoch = 0;  // evaluated after this epoch
  double val_acc = 0, test_acc = 0;
  LinkMetrics val_link, test_link;  // --task link
  double time_s = 0;
};

struct TrainResult {
  std::string graph_name;
  TrainConfig config;
  int num_trainers = 1;
  int rank = 0;
  int64_t num_classes = 0;
  int64_t num_parameters = 0;
  int resumed_from_epoch = -1;  // the last epoch complete in the checkpoint resumed from; -1: none
  int resumed_at_epoch = -1;    // where the resumed run started: epoch and step; -1: a fresh run
  int64_t resumed_at_step = 0;
  // This run's checkpoints: how many, the time spent writing and committing
  // them, and the part of it spent on replicas (--checkpoint-replicas) with
  // the bytes this trainer sent.
  int checkpoints = 0;
  double checkpoint_s = 0, replica_s = 0;
  int64_t replica_bytes_sent = 0;
  std::vector<EpochMetrics> epochs;
  std::vector<EvalMetrics> evals;
  double val_acc = 0, test_acc = 0;  // from the last evaluation (--keep-best: the best one)
  LinkMetrics val_link, test_link;   // from the last evaluation (--task link; --keep-best: the best one)
  int best_epoch = -1;               // --keep-best: the epoch whose weights were kept
  double total_time_s = 0;
  std::vector<std::string> output_files;  // inference outputs written (rank 0), and the saved model
  double inference_time_s = 0;
  MemoryReport memory;
  StepProfile profile;  // --profile-steps (steps == 0: none)
  double gemm_peak_gflops = 0;  // measured on the first batch's shapes (--measure-peak); 0: not measured
};

// The metrics JSON trainer-host writes (rank 0):
// {"graph_name","model","num_trainers","config":{...},"epochs":[{"epoch",
//  "loss","train_acc","time_s","sample_s","fetch_s","compute_s",
//  "allreduce_s","wait_s","seeds_per_s","step_losses"}],"evals":[...],"val_acc","test_acc",
//  "total_time_s", ...}.
std::string metrics_json(const TrainResult& result);
// A checkpoint's history (common/checkpoint_store.h's journal): one JSON line
// per epoch ({"epoch": {...}}, as in metrics.json) and per evaluation
// ({"eval": {...}}), from epochs[first_epoch] and evals[first_eval] on; and
// one such line (without its newline) read back onto `into`'s epochs or evaluations.
std::string history_records(const TrainResult& r, size_t first_epoch, size_t first_eval);
Status add_history_record(std::string_view line, TrainResult& into);
// What a checkpoint keeps beside the journal: the last evaluation's figures
// and the time the run has taken so far (into total_time_s).
std::string last_results_json(const TrainResult& r);
Status last_results_from_json(const std::string& text, TrainResult& into, double& total_time_s);

}  // namespace dgld::trainer
