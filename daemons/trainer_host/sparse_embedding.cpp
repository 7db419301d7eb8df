#include "daemons/trainer_host/sparse_embedding.h"

#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "daemons/trainer_host/training_loop.h"  // ids_tensor

namespace dgld::trainer {

namespace {

class LocalEmbeddingStore final : public EmbeddingStore {
 public:
  LocalEmbeddingStore(int64_t num_rows, const std::vector<int64_t>& dims, uint64_t seed) : num_rows_(num_rows) {
    auto gen = at::detail::createCPUGenerator(seed);
    for (size_t i = 0; i < dims.size(); ++i) {
      auto t = torch::zeros({num_rows, dims[i]}, torch::kFloat32);
      if (i == 0) t.uniform_(-1.0, 1.0, gen);
      tables_.push_back(std::move(t));
    }
  }
  int64_t num_rows() const override { return num_rows_; }
  int num_tables() const override { return static_cast<int>(tables_.size()); }
  int64_t dim(int table) const override { return tables_[static_cast<size_t>(table)].size(1); }
  Status read(int table, std::span<const int64_t> ids, float* out) const override {
    DGLD_RETURN_IF_ERROR(check(ids));
    const auto& t = tables_[static_cast<size_t>(table)];
    const int64_t d = t.size(1);
    const float* src = t.data_ptr<float>();
    for (size_t i = 0; i < ids.size(); ++i) std::memcpy(out + i * d, src + ids[i] * d, d * sizeof(float));
    return Status::ok();
  }
  Status write(int table, std::span<const int64_t> ids, const float* rows) override {
    DGLD_RETURN_IF_ERROR(check(ids));
    auto& t = tables_[static_cast<size_t>(table)];
    const int64_t d = t.size(1);
    float* dst = t.data_ptr<float>();
    for (size_t i = 0; i < ids.size(); ++i) std::memcpy(dst + ids[i] * d, rows + i * d, d * sizeof(float));
    return Status::ok();
  }
  Status route(const std::vector<int64_t>& ids, const torch::Tensor& grads, std::vector<int64_t>& owned_ids,
               torch::Tensor& owned_grads) override {
    owned_ids = ids;
    owned_grads = grads;
    return Status::ok();
  }
  int world_size() const override { return 1; }
  std::vector<int64_t> owned_ids() const override {
    std::vector<int64_t> ids(static_cast<size_t>(num_rows_));
    std::iota(ids.begin(), ids.end(), 0);
    return ids;
  }

 private:
  Status check(std::span<const int64_t> ids) const {
    for (int64_t id : ids) {
      if (id < 0 || id >= num_rows_) {
        return invalid_argument(fmt::format("embedding row {} out of range [0, {})", id, num_rows_));
      }
    }
    return Status::ok();
  }
  int64_t num_rows_;
  std::vector<torch::Tensor> tables_;
};

// Rows of `table` for `ids` as a [n, dim] tensor.
Result<torch::Tensor> read_rows(const EmbeddingStore& store, int table, std::span<const int64_t> ids) {
  auto t = torch::empty({static_cast<int64_t>(ids.size()), store.dim(table)}, torch::kFloat32);
  if (!ids.empty()) DGLD_RETURN_IF_ERROR(store.read(table, ids, t.data_ptr<float>()));
  return t;
}

Status write_rows(EmbeddingStore& store, int table, std::span<const int64_t> ids, const torch::Tensor& rows) {
  auto c = rows.contiguous();
  return ids.empty() ? Status::ok() : store.write(table, ids, c.data_ptr<float>());
}

}  // namespace

Result<SparseOptimizerKind> parse_sparse_optimizer(const std::string& name) {
  if (name == "adagrad") return SparseOptimizerKind::adagrad;
  if (name == "adam") return SparseOptimizerKind::adam;
  return invalid_argument("--sparse-optimizer '" + name + "': expected adagrad or adam");
}

std::vector<int64_t> embedding_table_dims(SparseOptimizerKind kind, int64_t dim) {
  if (kind == SparseOptimizerKind::adagrad) return {dim, dim};
  return {dim, dim, dim, 1};
}

std::unique_ptr<EmbeddingStore> make_local_embedding_store(int64_t num_rows, const std::vector<int64_t>& dims,
                                                          uint64_t seed) {
  return std::make_unique<LocalEmbeddingStore>(num_rows, dims, seed);
}

SparseEmbedding::SparseEmbedding(std::unique_ptr<EmbeddingStore> store, SparseOptimizerOptions options)
    : store_(std::move(store)), options_(options) {}

Result<torch::Tensor> SparseEmbedding::lookup(std::span<const int64_t> ids, bool train) {
  DGLD_ASSIGN_OR_RETURN(auto rows, read_rows(*store_, 0, ids));
  if (train) {
    rows.set_requires_grad(true);
    last_ids_.assign(ids.begin(), ids.end());
    last_rows_ = rows;
  }
  return rows;
}

Status SparseEmbedding::step() {
  torch::NoGradGuard no_grad;
  torch::Tensor grads = last_rows_.defined() && last_rows_.grad().defined()
                            ? last_rows_.grad()
                            : torch::zeros({static_cast<int64_t>(last_ids_.size()), dim()}, torch::kFloat32);
  std::vector<int64_t> owned_ids;
  torch::Tensor owned_grads;
  DGLD_RETURN_IF_ERROR(store_->route(last_ids_, grads.contiguous(), owned_ids, owned_grads));
  last_ids_.clear();
  last_rows_ = torch::Tensor();
  DGLD_RETURN_IF_ERROR(apply(owned_ids, owned_grads));
  return store_->sync();
}

Status SparseEmbedding::apply(const std::vector<int64_t>& ids, const torch::Tensor& grads) {
  if (ids.empty()) return Status::ok();
  // Sum the gradients of repeated ids (one per sending trainer), then average
  // over the trainers as the dense gradients are.
  auto [uniq_t, inverse, counts] = at::_unique2(ids_tensor(ids), /*sorted=*/true, /*return_inverse=*/true);
  (void)counts;
  auto g = torch::zeros({uniq_t.size(0), dim()}, torch::kFloat32).index_add_(0, inverse, grads);
  g.div_(static_cast<double>(store_->world_size()));
  const std::vector<int64_t> uniq(uniq_t.data_ptr<int64_t>(), uniq_t.data_ptr<int64_t>() + uniq_t.size(0));

  DGLD_ASSIGN_OR_RETURN(auto w, read_rows(*store_, 0, uniq));
  const double lr = options_.lr;
  if (options_.kind == SparseOptimizerKind::adagrad) {
    DGLD_ASSIGN_OR_RETURN(auto sum, read_rows(*store_, 1, uniq));
    sum.add_(g * g);
    w.sub_(lr * g / (sum.sqrt() + options_.eps));
    DGLD_RETURN_IF_ERROR(write_rows(*store_, 1, uniq, sum));
  } else {
    DGLD_ASSIGN_OR_RETURN(auto m, read_rows(*store_, 1, uniq));
    DGLD_ASSIGN_OR_RETURN(auto v, read_rows(*store_, 2, uniq));
    DGLD_ASSIGN_OR_RETURN(auto step, read_rows(*store_, 3, uniq));
    step.add_(1.0);
    m.mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    v.mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
    auto m_hat = m / (1.0 - torch::pow(options_.beta1, step));
    auto v_hat = v / (1.0 - torch::pow(options_.beta2, step));
    w.sub_(lr * m_hat / (v_hat.sqrt() + options_.eps));
    DGLD_RETURN_IF_ERROR(write_rows(*store_, 1, uniq, m));
    DGLD_RETURN_IF_ERROR(write_rows(*store_, 2, uniq, v));
    DGLD_RETURN_IF_ERROR(write_rows(*store_, 3, uniq, step));
  }
  return write_rows(*store_, 0, uniq, w);
}

Status SparseEmbedding::save(torch::serialize::OutputArchive& archive) const {
  const auto ids = store_->owned_ids();
  archive.write("embedding/ids", ids_tensor(ids));
  for (int t = 0; t < store_->num_tables(); ++t) {
    DGLD_ASSIGN_OR_RETURN(auto rows, read_rows(*store_, t, ids));
    archive.write("embedding/table" + std::to_string(t), rows);
  }
  return Status::ok();
}

Status SparseEmbedding::load(torch::serialize::InputArchive& archive) {
  torch::Tensor ids_t;
  if (!archive.try_read("embedding/ids", ids_t)) return corruption("the checkpoint has no embedding shard");
  const auto expected = store_->owned_ids();
  if (ids_t.numel() != static_cast<int64_t>(expected.size()) ||
      !std::equal(expected.begin(), expected.end(), ids_t.data_ptr<int64_t>())) {
    return invalid_argument(fmt::format("the checkpoint's embedding shard holds {} rows, not the {} this trainer "
                                        "owns (was the job's trainer count or partitioning different?)",
                                        ids_t.numel(), expected.size()));
  }
  for (int t = 0; t < store_->num_tables(); ++t) {
    torch::Tensor rows;
    const std::string key = "embedding/table" + std::to_string(t);
    if (!archive.try_read(key, rows)) return corruption("the checkpoint has no '" + key + "'");
    if (rows.dim() != 2 || rows.size(0) != ids_t.numel() || rows.size(1) != store_->dim(t)) {
      return invalid_argument(fmt::format("the checkpoint's '{}' is [{}], expected [{}, {}] (another --embed-dim or "
                                          "--sparse-optimizer?)",
                                          key, fmt::join(rows.sizes(), ", "), ids_t.numel(), store_->dim(t)));
    }
    DGLD_RETURN_IF_ERROR(write_rows(*store_, t, expected, rows.to(torch::kFloat32)));
  }
  return Status::ok();
}

}  // namespace dgld::trainer
