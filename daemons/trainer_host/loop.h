#pragma once
// The training loop behind run_training (training_loop.h), private to
// trainer_host. Its parts: training_loop.cpp (setup, input layer, epochs,
// run), loop_evaluation.cpp (layer-wise evaluation, link metrics),
// loop_checkpoints.cpp (checkpoints, resume, --keep-best), loop_outputs.cpp
// (--output-dir embeddings and predictions).

#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "common/checkpoint_store.h"
#include "daemons/trainer_host/step_profile.h"
#include "daemons/trainer_host/training_loop.h"

namespace dgld::trainer {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}


class Loop {
 public:
  Loop(TrainingBackend& b, const TrainConfig& c) : b_(b), c_(c), log_(logger("trainer")) {}
  Result<TrainResult> run();

 private:
  Status setup();
  // Trains epoch `epoch` from step first_step (a resumed run: partial_ holds
  // the figures of the steps before it).
  Status train_epoch(int epoch, int64_t first_step, EpochMetrics& m);
  std::vector<int64_t> layer_dims(int64_t in) const;
  // Whether the next step of epoch `epoch` is profiled (--profile-steps).
  bool profiled(int epoch) const;
  // Once the profiled steps are done: the table in the log, the figures in r_.
  void finish_profile();
  Result<EvalMetrics> evaluate(int epoch);
  // The backend's layer-wise inference of the model in eval mode, no gradients.
  Result<EvalCounts> layerwise(const LayerwiseRequest& request);
  Result<torch::Tensor> layer0(std::span<const int64_t> ids, const torch::Tensor& features,
                               const std::vector<client::TypedRows>& typed, bool train);
  // Heterogeneous graphs: every input node embedded into embed_dim, a node
  // type with features by its linear projection, one without by the learnable
  // embedding.
  Result<torch::Tensor> typed_layer0(std::span<const int64_t> ids, const std::vector<client::TypedRows>& typed,
                                     bool train);
  Status setup_hetero();
  // Fills r_.memory from the backend and the process, and logs it.
  void report_memory();
  // At the end of each stage: when the process's peak RSS rose during it,
  // the stage and the new peak go to stage_peaks_ (report_memory).
  void end_stage(const char* stage);
  // The highest VmHWM read so far. VmHWM itself can read lower later: the
  // kernel keeps RSS counts per thread and syncs them in batches (up to 64
  // pages each), and memory handed back by malloc_trim lowers the current
  // RSS it is compared with.
  int64_t peak_rss();
  Status create_embedding();
  nlohmann::json checkpoint_meta() const;
  // Every trainer writes position p, then (after a barrier) it is committed.
  Status save_checkpoint(CheckpointPosition p);
  // The position every trainer resumes from (the newest all hold intact),
  // its state loaded; (0, 0) when there is none.
  Result<CheckpointPosition> resume();
  // loop_replicas.cpp. After every rank committed p: this rank's files to
  // its replica holders, and the replicas it holds received and verified.
  Status replicate(CheckpointPosition p);
  // On a resume: the files of the agreed position sent by their holders to
  // the ranks that lack them (plan.transfers()), verified there.
  Status fetch_missing(const CheckpointPlan& plan);
  // What this rank offers: its own intact positions and its replicas' (by rank).
  std::vector<std::vector<CheckpointPosition>> held_checkpoints(std::vector<RefusedCheckpoint>& refused) const;
  std::vector<int> machine_of_ranks() const;
  // Loads this trainer's state at position p (verified by the store).
  Status load_checkpoint(CheckpointPosition p, const nlohmann::json& meta);
  // The parameters trained beside the model's own (the node types' input
  // projections, the link scorer's): saved with a checkpoint, put back on a resume.
  std::vector<torch::Tensor> outer_params() const;
  Status load_outer_params(torch::serialize::InputArchive& archive);
  // The line dgl-launch follows a job's checkpoints by (progress_line), on
  // stderr when the job was started by dgl-launch.
  void announce_progress(const std::string& event, CheckpointPosition p) const;
  // Every node's output of the last layer (and --embeddings-layer) into
  // --output-dir (rank 0 writes; every trainer computes its share).
  Status write_outputs();
  // new_of_orig[o] = the node id (after partitioning) of original node o.
  Result<std::vector<int64_t>> new_ids_by_original_id();
  Status write_layer(int layer, int64_t width, const RowReader& read, const std::vector<int64_t>& new_of_orig);

  // Link prediction: the scorer of a pair of embeddings (logits), the
  // metrics of the held-out edges of one set against their negatives.
  torch::Tensor score(const torch::Tensor& hu, const torch::Tensor& hv);
  Result<EvalMetrics> evaluate_link(int epoch);
  Result<LinkMetrics> link_metrics(bool test, const RowReader& read, int64_t width);
  // --keep-best: remembers the weights when `e` is the best evaluation so
  // far; puts the best weights back and makes that evaluation the run's.
  void remember_if_best(const EvalMetrics& e);
  void restore_best();

  TrainingBackend& b_;
  const TrainConfig& c_;
  std::shared_ptr<spdlog::logger> log_;
  ModelConfig mc_;
  bool link_ = false;
  std::unique_ptr<Model> model_;
  torch::nn::Sequential scorer_mlp_{nullptr};  // --scorer mlp
  std::vector<torch::Tensor> params_;          // the model's, then the projections' and the scorer's
  size_t model_params_ = 0;                    // how many of params_ are the model's
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::unique_ptr<SparseEmbedding> embedding_;
  struct Best {
    double metric = -std::numeric_limits<double>::infinity();
    EvalMetrics eval;
    std::string model_state;            // the model's weights and buffers (a serialized archive)
    std::vector<torch::Tensor> params;  // every trained parameter (the scorer's and projections' too)
  };
  std::optional<Best> best_;
  const GraphTypeInfo* types_ = nullptr;     // heterogeneous graphs only
  std::vector<torch::nn::Linear> type_proj_;  // by node type; null for a type without features
  std::unique_ptr<CheckpointStore> ckpt_;
  // The running sums of the epoch in progress: saved with a mid-epoch
  // checkpoint, put back when a run resumes from one.
  struct PartialEpoch {
    double loss_sum = 0, correct_sum = 0, seeds_sum = 0, time_s = 0;
    std::vector<double> step_losses;
  };
  PartialEpoch partial_;
  TrainResult r_;
  std::vector<std::pair<std::string, int64_t>> stage_peaks_;
  // --profile-steps: the profiler and what it has recorded so far.
  StepProfiler profiler_;
  int profiled_steps_ = 0;
  double profiled_s_ = 0;
  int64_t peak_rss_seen_ = 0;
  double previous_time_s_ = 0;  // total_time_s of the run a resume continues
  // The history journal (common/checkpoint_store.h): its mark after the last
  // checkpoint, and how many of r_'s epochs and evaluations it holds.
  HistoryMark history_mark_;
  size_t history_epochs_ = 0, history_evals_ = 0;
  // By rank: how much of that rank's journal this rank's replica holds (at
  // the agreed position after a resume, then this run's copies; nothing for
  // a fresh run or after a failed copy, so the next copy sends it whole).
  std::vector<HistoryMark> replica_marks_;
};

}  // namespace dgld::trainer
