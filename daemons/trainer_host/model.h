#pragma once
// The GNN models trainer-host trains: GraphSAGE (mean aggregator), GCN, GAT
// and R-GCN (heterogeneous graphs: blocks with edge types), or a user's
// TorchScript module (docs/models.md); each a stack of layers that run over sampled blocks (common/sampling/block.h),
// input layer first, as DGL's examples build them.
//
// This header is torch-free so that options parsing, tools and tests that only
// configure a model do not pay for LibTorch. The layers and the forward pass
// live behind Model::Impl, in the private header model_impl.h (training code
// only).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dgld::trainer {

enum class ModelKind { sage, gcn, gat, rgcn };

// "sage" | "gcn" | "gat" | "rgcn"; invalid_argument naming the known kinds otherwise.
Result<ModelKind> parse_model_kind(std::string_view name);
const char* model_kind_name(ModelKind kind);

// How layers aggregate over a block: the fused kernels of common/ops (one
// pass over the CSR, no per-edge rows), or the index_select + index_add_
// reference they are checked against.
enum class Kernels { fused, reference };
// "fused" | "reference" (also "index-add"); invalid_argument otherwise.
Result<Kernels> parse_kernels(std::string_view name);
const char* kernels_name(Kernels kernels);

// Shape of a model. Hidden layers have num_hidden units (per head for GAT,
// whose hidden layers concatenate their heads and whose output layer averages
// them, as DGL's GAT example); the last layer has num_classes outputs.
struct ModelConfig {
  ModelKind kind = ModelKind::sage;
  int64_t in_dim = 0;
  int64_t num_hidden = 16;
  int64_t num_classes = 0;
  int num_layers = 2;     // must equal the number of blocks of every batch
  double dropout = 0.5;   // applied after the activation between layers
  int num_heads = 1;      // GAT only
  Kernels kernels = Kernels::fused;
  // A TorchScript module written by Python (docs/models.md) instead of a
  // built-in model: kind, num_hidden, num_heads, dropout and kernels are then
  // the module's own; in_dim, num_classes and num_layers are checked against
  // it.
  std::string model_file;
  // R-GCN only (last, so that positional initialisers of the fields above
  // keep working). num_rels: the graph's edge types (> 0; every block's edge
  // type ids must be below it). num_bases: 0 or >= num_rels gives one weight
  // matrix per relation; 0 < num_bases < num_rels shares num_bases basis
  // matrices, W_r = sum_b a[r, b] V_b (DGL RelGraphConv regularizer='basis').
  int num_rels = 0;
  int num_bases = 0;
};

// invalid_argument naming the field when a size is not positive, dropout is
// outside [0, 1), or an R-GCN has num_rels < 1 or num_bases < 0.
Status validate_model_config(const ModelConfig& config);

// Whether `path` holds a TorchScript module that meets the contract of
// docs/models.md as far as it can be told without the graph: forward and
// forward_layer with the right signatures, an int num_layers, finite
// weights. invalid_argument (not_found, io_error) naming the file and what is
// missing. Cheap enough to run before any server is contacted.
Status check_model_file(const std::string& path);

// A model with its parameters. Owns a LibTorch module (Model::Impl, see
// model_impl.h). Not thread-safe: one trainer thread uses it.
class Model {
 public:
  struct Impl;

  // Builds the layers with weights drawn from torch's global generator (seed it
  // first with torch::manual_seed for reproducible runs), or loads
  // config.model_file.
  static Result<std::unique_ptr<Model>> create(const ModelConfig& config);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const;
  int64_t num_parameters() const;
  int num_layers() const { return config().num_layers; }
  // The model with its current weights as TorchScript (docs/models.md), for
  // torch.jit.load in Python and --model-file; atomic (temporary name, then
  // renamed).
  Status save_torchscript(const std::string& path) const;
  // What checkpoints record as the model ("sage", "torchscript:<type>").
  std::string checkpoint_name() const;
  // "sage(in=1433, hidden=16, classes=7, layers=2)" for logs.
  std::string describe() const;

  Impl& impl() { return *impl_; }
  const Impl& impl() const { return *impl_; }

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgld::trainer
