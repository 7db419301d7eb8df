#pragma once
// The distributed TrainingBackend (private to trainer-host; dist_trainer.h
// is the entry point): joins the job, loads batches from the graph-servers
// or sampler-workers, and runs the collectives and layer-wise evaluation.
//   dist_trainer.cpp     setup (cluster, splits, loaders, heterogeneous and link set-ups), finish, train_distributed
//   dist_evaluation.cpp  the run's DistTensors, embeddings, layer-wise inference and its counts

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "client/cluster.h"
#include "client/data_loader.h"
#include "client/dist_graph.h"
#include "client/local_partition.h"
#include "client/split.h"
#include "common/logging.h"
#include "common/partition/partition.h"
#include "daemons/trainer_host/sampler_children.h"
#include "daemons/trainer_host/training_loop.h"
#include "daemons/trainer_host/dist_collectives.h"
#include "daemons/trainer_host/dist_trainer.h"

namespace dgld::trainer::dist {

class DistBackend final : public TrainingBackend {
 public:
  DistBackend(const DistTrainOptions& o, const TrainConfig& c) : o_(o), c_(c), log_(logger("trainer")) {}
  Status setup();
  Status finish();
  MemoryReport memory() const override;

  int rank() const override { return coll_->rank(); }
  int world_size() const override { return coll_->world(); }
  int part_id() const override { return cluster_->machine_id(); }
  int num_machines() const override { return cluster_->num_machines(); }
  int machine_id() const override { return cluster_->machine_id(); }
  int machine_of_rank(int rank) const override { return machine_of_rank_.at(static_cast<size_t>(rank)); }
  net::TrafficSnapshot own_traffic() const override { return cluster_->traffic()->snapshot(); }
  const std::string& graph_name() const override { return cluster_->config().graph_name; }
  int64_t num_nodes() const override { return cluster_->partition_book().num_nodes(); }
  int64_t feat_dim() const override { return feat_dim_; }
  int64_t num_classes() const override { return num_classes_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  void start_epoch(int epoch, int64_t first_step) override {
    if (link_loader_) {
      link_loader_->start_epoch(epoch, first_step);
    } else {
      loader_->start_epoch(epoch, first_step);
    }
  }
  Result<client::Batch> next_batch() override {
    auto next = loader_->next();
    if (!next.is_ok()) return next.status();
    if (!next->has_value()) return internal_error("the data loader ran out of batches");
    return std::move(**next);
  }
  Status allreduce(torch::Tensor& t, Reduce op, const std::string& what) override {
    return coll_->allreduce(t, op, what);
  }
  Status broadcast(torch::Tensor& t, const std::string& what) override { return coll_->broadcast(t, what); }
  Status exchange(std::vector<Transfer>& sends, std::vector<Transfer>& recvs, const std::string& what) override {
    return coll_->exchange(sends, recvs, what);
  }
  Result<EvalCounts> layerwise(Model& model, const Layer0Input& input, const LayerwiseRequest& request) override;
  Status original_node_ids(int64_t start, int64_t count, int64_t* out) override;
  Result<std::unique_ptr<EmbeddingStore>> create_embedding_store(const std::vector<int64_t>& dims,
                                                                 uint64_t seed) override;
  Result<client::LinkBatch> next_link_batch() override {
    auto next = link_loader_->next();
    if (!next.is_ok()) return next.status();
    if (!next->has_value()) return internal_error("the edge loader ran out of batches");
    return std::move(**next);
  }
  Result<LinkEdges> link_eval_edges(bool test) override { return test ? link_test_ : link_valid_; }
  const GraphTypeInfo* graph_types() const override {
    return cluster_->config().types.present() ? &cluster_->config().types : nullptr;
  }
  std::vector<int64_t> type_feature_dims() const override { return type_feature_dims_; }

 private:
  // Node tensor `name` of the labelled nodes: "_N/<name>", or on a
  // heterogeneous graph "<target type>/<name>".
  std::string labelled(const std::string& name) const { return target_prefix_ + name; }
  // Heterogeneous graphs: the target type, the features' widths, the sampler's per-type fanouts.
  Status setup_hetero(const MappedPartition& part);
  // --task link: the edge loader over this trainer's edge_split of
  // the edge tensor train_mask, and its share of the held-out edges.
  Status setup_link(const SamplingSpec& sampling, bool uses_features);
  Result<std::vector<int64_t>> split(const std::string& mask, bool required);
  Status check_node_tensor(const std::string& name, DType dtype, bool matrix) const;
  // Collective; the tensor is deleted by destroy_tensor() or finish().
  Result<client::DistTensor> create_tensor(const std::string& name, int64_t dim, client::Init init, uint64_t seed);
  Status destroy_tensor(const std::string& name);
  Status count_correct(std::span<const int64_t> nodes, const torch::Tensor& logits, EvalCounts& counts) const;

  const DistTrainOptions& o_;
  const TrainConfig& c_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<client::Cluster> cluster_;
  std::unique_ptr<client::DistGraph> graph_;
  std::unique_ptr<Collectives> coll_;
  std::unique_ptr<SamplerChildren> samplers_;
  std::unique_ptr<client::DistDataLoader> loader_;
  std::unique_ptr<client::DistEdgeDataLoader> link_loader_;
  LinkEdges link_valid_, link_test_;
  std::vector<int64_t> train_ids_, eval_nodes_;
  std::vector<int64_t> eval_in_edges_;  // each eval node's in-edges as evaluation samples them
  std::vector<int> machine_of_rank_;
  int64_t run_id_ = 0;                // names this run's DistTensors apart from any other run's
  std::vector<std::string> created_;  // DistTensors this run created and must delete
  int64_t feat_dim_ = 0, num_classes_ = 0, steps_per_epoch_ = 0;
  int eval_round_ = 0;
  std::string target_prefix_ = "_N/";
  int target_type_ = -1;                         // heterogeneous graphs: the labelled node type
  std::vector<int64_t> type_feature_dims_;        // heterogeneous graphs: by node type, 0 without features
  std::vector<client::DistTensor> typed_features_;  // heterogeneous graphs: the per-type feature tensors
};

}  // namespace dgld::trainer::dist
