#pragma once
// DistGraph: the whole partitioned graph as one object, DGL's
// dgl.distributed.DistGraph: sizes, node/edge data as DistTensors, degrees
// and find_edges across partitions (the caller's machine answered in process,
// the others by their servers, all machines at once), the partition book,
// rank and barrier. DistNeighborSource samples neighbours across partitions
// for MultiLayerNeighborSampler. Both borrow a Cluster that must outlive them.

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "client/dist_tensor.h"
#include "client/server_api.h"
#include "client/split.h"
#include "common/partition/partition_book.h"
#include "common/sampling/multi_layer_sampler.h"
#include "common/status.h"

namespace dgld {
class ThreadPool;
}

namespace dgld::client {

class Cluster;

class DistGraph {
 public:
  explicit DistGraph(Cluster& cluster) : cluster_(&cluster) {}

  const std::string& graph_name() const;
  int64_t num_nodes() const;
  int64_t num_edges() const;
  const RangePartitionBook& partition_book() const;
  int rank() const;
  Status barrier(const std::string& name, std::chrono::milliseconds timeout);
  Cluster& cluster() { return *cluster_; }

  // Node / edge data by name: "features" means "_N/features" ("<etype>/x" for edges).
  Result<DistTensor> ndata(const std::string& name) const;
  Result<DistTensor> edata(const std::string& name) const;

  // deg[k] of node ids[k] (in-degree: its in-edges; out-degree: its out-edges).
  Result<std::vector<int64_t>> in_degrees(std::span<const int64_t> ids) const;
  Result<std::vector<int64_t>> out_degrees(std::span<const int64_t> ids) const;
  // src[k] -> dst[k] of edge eids[k] (eid is left empty).
  Result<Edges> find_edges(std::span<const int64_t> eids) const;

  // node_split over the uint8 node tensor `mask_name` ("train_mask"), for this
  // trainer (partition = machine, its rank, the job's trainer count); with
  // use_trainer_ids the partition's "_N/trainer_id" splits within a machine.
  Result<std::vector<int64_t>> node_split(const std::string& mask_name, bool force_even = true,
                                          bool use_trainer_ids = false) const;
  // edge_split over the uint8 edge tensor `mask_name` ("train_mask" of a
  // link split), the same rules over the edge partition book.
  Result<std::vector<int64_t>> edge_split(const std::string& mask_name, bool force_even = true) const;

 private:
  Result<std::vector<int64_t>> degrees(std::span<const int64_t> ids, bool out) const;
  Result<std::vector<int64_t>> split(const std::string& mask_name, bool force_even, bool use_trainer_ids,
                                     bool edges) const;
  std::string full_name(const std::string& name, bool edge) const;
  Cluster* cluster_;
};

struct DistSampleOptions {
  bool out_edges = false;      // sample out-neighbours instead of in-neighbours
  std::string prob;            // float32 edge tensor of weights; empty: uniform
  ThreadPool* pool = nullptr;  // for the local seeds; null: the calling thread
};

// Seeds grouped by owner: the caller's machine sampled in process from the
// partition's CSC with the servers' kernel and stream keys (global seed ids),
// the other groups sent to their machines at once; the edges come back in
// seed order, so the result equals sampling the whole graph in one process.
// Safe to call from several threads.
class DistNeighborSource final : public NeighborSource {
 public:
  explicit DistNeighborSource(Cluster& cluster, DistSampleOptions options = {});
  Result<SampledEdges> sample(std::span<const int64_t> seeds_global,
                              const SampleOptions& opt) override;
  int64_t node_id_range() const override;

 private:
  // The prob tensor's local rows in CSC order (in `scratch` when reordered).
  Result<std::span<const float>> local_weights(std::vector<float>* scratch);
  Cluster* cluster_;
  DistSampleOptions options_;
};

}  // namespace dgld::client
