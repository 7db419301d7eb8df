#pragma once
// The GNN models trainer-host trains: the built-in kinds (GraphSAGE with the
// mean aggregator, GCN, GAT, R-GCN for heterogeneous graphs; python/dgld/models
// scripted at build time, the same code Python runs) or a user's TorchScript
// module (docs/models.md); each a stack of layers that run over sampled
// blocks (common/sampling/block.h), input layer first, as DGL's examples
// build them. Both kinds of model run through the same TorchScript path.
//
// This header is torch-free so that options parsing, tools and tests that only
// configure a model do not pay for LibTorch. The layers and the forward pass
// live behind Model::Impl, in the private header model_impl.h (training code
// only).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dgld::trainer {

// How layers aggregate over a block: the fused kernels of common/ops (one
// pass over the CSR, no per-edge rows), or the index_select + index_add_
// reference they are checked against (ops::set_reference_kernels: the
// operators every model calls, built-in or not, switch for the process).
enum class Kernels { fused, reference };
// "fused" | "reference" (also "index-add"); invalid_argument otherwise.
Result<Kernels> parse_kernels(std::string_view name);
const char* kernels_name(Kernels kernels);

// The built-in models are the modules of python/dgld/models, scripted at
// build time into one file per kind and depth, <kind>-<layers>.pt
// (docs/models.md), found in: $DGLD_MODEL_DIR, the directory `models`
// beside the running executable, ../share/dgld/models from it (installed),
// then the build tree's. Empty when none holds a model file.
std::string builtin_model_dir();
// The kinds there ("gat, gcn, rgcn, sage"), sorted.
std::vector<std::string> builtin_model_kinds();
// The file of `kind` with `layers` layers; invalid_argument naming the
// known kinds and the depths there otherwise. "graphsage" is "sage".
Result<std::string> builtin_model_file(std::string_view kind, int layers);
// What trainer-host needs to know of a kind before it builds one: whether its
// layers read the blocks' edge types (R-GCN: heterogeneous graphs only).
struct ModelKindInfo {
  bool uses_edge_types = false;
};
Result<ModelKindInfo> builtin_model_info(std::string_view kind);
// The same for a run's model: `model_file` when given (its uses_edge_types
// attribute, false without one), else the built-in `kind`.
Result<ModelKindInfo> model_info(std::string_view kind, const std::string& model_file);

// Shape of a model: the arguments of a built-in model's configure(). Hidden
// layers have num_hidden units (per head for GAT, whose hidden layers
// concatenate their heads and whose output layer averages them, as DGL's GAT
// example); the last layer has num_classes outputs.
struct ModelConfig {
  std::string kind = "sage";  // a built-in kind (builtin_model_kinds)
  int64_t in_dim = 0;
  int64_t num_hidden = 16;
  int64_t num_classes = 0;
  int num_layers = 2;     // must equal the number of blocks of every batch
  double dropout = 0.5;   // applied after the activation between layers
  int num_heads = 1;      // GAT only
  Kernels kernels = Kernels::fused;
  // A TorchScript module written by Python (docs/models.md) instead of a
  // built-in model: kind, num_hidden, num_heads and dropout are then the
  // module's own; in_dim, num_classes and num_layers are checked against it.
  std::string model_file;
  // R-GCN only. num_rels: the graph's edge types (> 0; every block's edge
  // type ids must be below it). num_bases: W_r = sum_b a[r, b] V_b over
  // num_bases shared bases (DGL RelGraphConv regularizer='basis'); 0 or >=
  // num_rels: as many bases as relations.
  int num_rels = 0;
  int num_bases = 0;
};

// invalid_argument naming the field when a size is not positive or dropout is
// outside [0, 1).
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

  // Loads the built-in kind's file and sizes it (configure()), drawing the
  // weights from torch's global generator (seed it first with
  // torch::manual_seed for reproducible runs), or loads config.model_file.
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
  // What checkpoints record as the model ("builtin:sage", "torchscript:<type>").
  std::string checkpoint_name() const;
  // "sage(in=1433, hidden=16, classes=7, layers=2)" for logs.
  std::string describe() const;
  // Dense maps of a destination row per layer, for FLOP estimates (the
  // module's int attribute dense_maps; SAGE: 2, self and neighbours; else 1).
  int dense_maps() const;

  Impl& impl() { return *impl_; }
  const Impl& impl() const { return *impl_; }

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dgld::trainer
