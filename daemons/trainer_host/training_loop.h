#pragma once
// The one training loop of trainer-host, over a TrainingBackend that says
// where batches come from and who the peers are: LocalBackend (standalone:
// the whole graph in this process, one trainer) or DistBackend (a trainer of
// a distributed job). The loop owns the model, Adam, the optional learnable
// embedding (SparseEmbedding), checkpoints and progress; per step it runs
// forward and backward, averages the gradients over the trainers (one
// flattened bucket per step; the bucket also carries the loss and accuracy
// counts, so a NaN on any trainer stops every trainer at the same step), and
// steps the optimisers. Evaluation is the backend's layer-wise inference.
//
// Private to training code (LibTorch).

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "client/data_loader.h"
#include "client/link_loader.h"
#include "common/partition/link_split.h"
#include "common/status.h"
#include "daemons/trainer_host/model_impl.h"
#include "daemons/trainer_host/sparse_embedding.h"
#include "daemons/trainer_host/training.h"

namespace dgld {
class MappedPartition;
}

namespace dgld::trainer {

enum class Reduce { sum, min, max };

struct EvalCounts {
  int64_t val_correct = 0, val_total = 0, test_correct = 0, test_total = 0;
};

// Layer 0's input for nodes `ids` given their feature rows ([n, feat_dim];
// [n, 0] when no input features are used): the features, a learnable
// embedding, or both concatenated. On a heterogeneous graph the rows come per
// node type in `typed` (features is then [n, 0]) and every type is embedded
// (docs/heterogeneous.md).
using Layer0Input = std::function<Result<torch::Tensor>(std::span<const int64_t> ids, const torch::Tensor& features,
                                                         const std::vector<client::TypedRows>& typed)>;

// Reads float32 rows of one layer's output (width values each) for node ids.
using RowReader = std::function<Status(std::span<const int64_t> ids, float* out)>;

struct LayerwiseRequest {
  bool count = true;      // val / test accuracy from the last layer
  std::vector<int> keep;  // layers whose output for every node goes to on_kept
  // Called on rank 0 (every_rank: on every trainer, which may then run
  // collectives in it) for each kept layer once every node's output is in;
  // the other trainers wait until it returns.
  std::function<Status(int layer, int64_t width, const RowReader& read)> on_kept;
  bool every_rank = false;
};

class TrainingBackend {
 public:
  virtual ~TrainingBackend() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int part_id() const = 0;  // the machine / partition, for log lines
  // Traffic accounting (epoch_accounting.h): the machines, this trainer's
  // and each rank's, and the frames this trainer exchanged so far by peer
  // machine (none standalone).
  virtual int num_machines() const { return 1; }
  virtual int machine_id() const { return 0; }
  virtual int machine_of_rank(int rank) const { return 0; }
  virtual net::TrafficSnapshot own_traffic() const { return {}; }
  virtual const std::string& graph_name() const = 0;
  virtual int64_t num_nodes() const = 0;
  virtual int64_t feat_dim() const = 0;         // width of the batches' feature rows (0: none fetched)
  virtual int64_t num_classes() const = 0;      // the same on every trainer
  virtual int64_t steps_per_epoch() const = 0;  // the same on every trainer
  // Starts epoch `epoch` at step `first_step` (a run resumed mid-epoch):
  // the epoch's batches depend on (seed, epoch, step) only.
  virtual void start_epoch(int epoch, int64_t first_step) = 0;
  virtual Result<client::Batch> next_batch() = 0;
  // Collectives over every trainer, in place; no-ops for one trainer.
  virtual Status allreduce(torch::Tensor& t, Reduce op, const std::string& what) = 0;
  virtual Status broadcast(torch::Tensor& t, const std::string& what) = 0;
  // Point-to-point transfers of byte tensors between trainers (checkpoint
  // replicas): every send and receive is posted, then each is waited for
  // with the collective deadline. A receive's tensor is already sized.
  struct Transfer {
    int peer;
    torch::Tensor bytes;  // kUInt8, contiguous
  };
  virtual Status exchange(std::vector<Transfer>& sends, std::vector<Transfer>& recvs, const std::string& what) {
    if (sends.empty() && recvs.empty()) return Status::ok();
    return invalid_argument(what + ": this backend has no point-to-point transfers (one trainer)");
  }
  // Layer-wise full-neighbour inference of `model` (in eval mode) over every
  // node, the trainers sharing the nodes; correct / total counts of the val
  // and test nodes summed over the trainers (when request.count), and the
  // outputs of request.keep handed to request.on_kept (rank 0).
  virtual Result<EvalCounts> layerwise(Model& model, const Layer0Input& input, const LayerwiseRequest& request) = 0;
  // out[i] = the original id (input graph's, before partitioning) of node
  // start + i, for i < count.
  virtual Status original_node_ids(int64_t start, int64_t count, int64_t* out) = 0;
  // Storage for a learnable embedding with these tables (called once, by
  // every trainer, when learnable features are on).
  virtual Result<std::unique_ptr<EmbeddingStore>> create_embedding_store(const std::vector<int64_t>& table_dims,
                                                                         uint64_t seed) = 0;
  // Link prediction (--task link): the epoch's next edge batch, and this
  // trainer's share of the held-out validation (test = false) or test edges
  // with their pre-drawn negatives. A backend without link data says so.
  virtual Result<client::LinkBatch> next_link_batch() {
    return invalid_argument("--task link needs a distributed job (dgl-launch) over a --link-split partition");
  }
  virtual Result<LinkEdges> link_eval_edges(bool test) {
    (void)test;
    return invalid_argument("--task link needs a distributed job (dgl-launch) over a --link-split partition");
  }
  // What the backend holds in memory (the process's own figures are added by the loop).
  virtual MemoryReport memory() const { return {}; }
  // Heterogeneous graphs: the graph's types, and the width of each node
  // type's input features (0: none, the type gets a learnable embedding).
  // Null / empty for a homogeneous graph.
  virtual const GraphTypeInfo* graph_types() const { return nullptr; }
  virtual std::vector<int64_t> type_feature_dims() const { return {}; }
};

// Trains and evaluates as `config` asks. Deterministic for a given config,
// thread count and trainer count. Errors name the epoch and step; a NaN or
// infinite loss stops every trainer with a clear message and leaves the last
// checkpoint as it was.
Result<TrainResult> run_training(TrainingBackend& backend, const TrainConfig& config);

// Every trainer's `mine` (1-d), concatenated in rank order: two sum
// allreduces (the sizes, then each rank's slice of a zeroed buffer), since
// gloo's allgather wants equal sizes. Exact for integers and for floats
// (every other slot adds zeros).
Result<torch::Tensor> allgather(TrainingBackend& b, const torch::Tensor& mine, const std::string& what);

// at::set_num_threads plus OpenBLAS's own pool.
void set_torch_threads(int n);

torch::Tensor ids_tensor(std::span<const int64_t> ids);

// The first non-empty line of `s`: LibTorch's messages carry a backtrace after it.
std::string first_line(const std::string& s);

// The names of a partition's node tensors ("a, b, c"; "none"), for messages.
std::string node_tensor_names(const MappedPartition& part);
// [n, d] float tensor copied from `rows`, which holds n*d floats (d may be 0).
torch::Tensor rows_tensor(std::span<const float> rows, int64_t n, int64_t d);
// The same without a copy: the tensor takes the vector over and, when it is
// freed, hands the buffer back to `pool` (may be null).
torch::Tensor adopt_rows(std::vector<float>&& rows, std::shared_ptr<BufferPool> pool, int64_t n, int64_t d);
// The same for rows someone else holds (a sampler-worker's shared-memory
// slot): the tensor keeps `rows` until it is freed, and must not be written.
torch::Tensor adopt_shared_rows(std::shared_ptr<const float> rows, int64_t n, int64_t d);

}  // namespace dgld::trainer
