#pragma once
// A learnable per-node embedding trained by a sparse optimiser, DGL's
// DistEmbedding with SparseAdagrad / SparseAdam: a batch looks up the rows of
// its input nodes, backward gives their gradients, and only those rows (and
// their optimiser state) are updated. Every row has one owner trainer; the
// gradients of a step are routed to the owners (EmbeddingStore::route), which
// sum them, average over the trainers, and update their rows, so concurrent
// trainers never write the same row.
//
// Storage is behind EmbeddingStore: tensors in memory for standalone runs,
// DistTensors on the graph-servers for distributed ones (dist_trainer.cpp).
// Private to training code (LibTorch).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/status.h"

namespace dgld::trainer {

enum class SparseOptimizerKind { adagrad, adam };
Result<SparseOptimizerKind> parse_sparse_optimizer(const std::string& name);

// Tables of float32 rows by global node id: table 0 is the embedding, the
// others the optimiser state (Adagrad: sum of squares; Adam: m, v, and a
// one-column step count).
class EmbeddingStore {
 public:
  virtual ~EmbeddingStore() = default;
  virtual int64_t num_rows() const = 0;
  virtual int num_tables() const = 0;
  virtual int64_t dim(int table) const = 0;
  // out: ids.size() rows of dim(table) floats.
  virtual Status read(int table, std::span<const int64_t> ids, float* out) const = 0;
  virtual Status write(int table, std::span<const int64_t> ids, const float* rows) = 0;
  // Collective (every trainer, every step, same order): sends each (id,
  // gradient row) to the trainer that owns the id and returns what this
  // trainer received, ids possibly repeated. grads is [ids.size(), dim(0)].
  virtual Status route(const std::vector<int64_t>& ids, const torch::Tensor& grads,
                       std::vector<int64_t>& owned_ids, torch::Tensor& owned_grads) = 0;
  // Trainers taking part in route() (the gradient average divides by it).
  virtual int world_size() const = 0;
  // Collective, after every trainer applied its updates: no trainer looks up
  // rows of the next step before all of this step's writes are done (so runs
  // are reproducible, as DGL's sparse optimisers end a step with a barrier).
  virtual Status sync() { return Status::ok(); }
  // The ids this trainer owns (its checkpoint shard), ascending.
  virtual std::vector<int64_t> owned_ids() const = 0;
};

// The tables a store needs for `kind`: {dim, dim} (Adagrad) or
// {dim, dim, dim, 1} (Adam).
std::vector<int64_t> embedding_table_dims(SparseOptimizerKind kind, int64_t dim);

// EmbeddingStore over in-memory tensors (one trainer owns every row), the
// embedding initialised uniform in [-1, 1) from `seed`.
std::unique_ptr<EmbeddingStore> make_local_embedding_store(int64_t num_rows, const std::vector<int64_t>& dims,
                                                          uint64_t seed);

struct SparseOptimizerOptions {
  SparseOptimizerKind kind = SparseOptimizerKind::adagrad;
  double lr = 0.05;
  double eps = 1e-10;  // Adagrad's default; Adam uses 1e-8
  double beta1 = 0.9, beta2 = 0.999;
};

class SparseEmbedding {
 public:
  SparseEmbedding(std::unique_ptr<EmbeddingStore> store, SparseOptimizerOptions options);

  int64_t dim() const { return store_->dim(0); }
  EmbeddingStore& store() { return *store_; }

  // Rows of `ids` as a [n, dim] leaf tensor that requires grad (training) or
  // not (evaluation). A training lookup is remembered for step().
  Result<torch::Tensor> lookup(std::span<const int64_t> ids, bool train);
  // Collective: routes the gradient of the last training lookup to the row
  // owners and applies the optimiser to the rows this trainer owns. A lookup
  // whose tensor got no gradient contributes zeros.
  Status step();

  // This trainer's shard (its owned rows of every table) into / out of a
  // checkpoint archive.
  Status save(torch::serialize::OutputArchive& archive) const;
  Status load(torch::serialize::InputArchive& archive);

 private:
  Status apply(const std::vector<int64_t>& ids, const torch::Tensor& grads);

  std::unique_ptr<EmbeddingStore> store_;
  SparseOptimizerOptions options_;
  std::vector<int64_t> last_ids_;
  torch::Tensor last_rows_;
};

}  // namespace dgld::trainer
