#pragma once
// Private to training code: the LibTorch side of model.h. Includes
// <torch/torch.h>, so include it only from .cpp files that train or test
// models (about 20 s of compile time per translation unit).
//
// A block reaches the model as an ops::BlockGraph (common/ops/): its CSR as
// tensors, built once per block and shared by every layer that runs on it
// (torch.classes.dgld.Block to the TorchScript module).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/ops/block_graph.h"
#include "common/ops/message_passing.h"
#include "common/sampling/block.h"
#include "common/sampling/multi_layer_sampler.h"
#include "common/status.h"
#include "daemons/trainer_host/model.h"

namespace dgld::trainer {

// The block's CSR as a BlockGraph (copies its arrays), with the block's edge
// types (Block::etypes) when it has any: num_etypes relations, 0 meaning max
// type + 1 (ops::BlockGraph::set_etypes). Pass the graph's relation count
// (ModelConfig::num_rels) when known: with num_etypes > 0 a block with no
// edges gets (empty) edge types too. invalid_argument if the block's arrays
// are inconsistent (indptr length, an index out of range, src_nodes shorter
// than dst_nodes, etypes not one per edge or a type >= num_etypes).
Result<ops::BlockGraphPtr> make_block_graph(const Block& block, int64_t num_etypes = 0);

// What a model's forward pass takes: every block of the batch and the input
// features of blocks[0].src_nodes ([num_src, in_dim], float32).
struct ModelInput {
  std::vector<ops::BlockGraphPtr> blocks;
  torch::Tensor x;
};

// The batch -> tensors step, shared by the local trainer (rows gathered from
// memory) and the distributed one (rows pulled from graph servers).
// `input_rows` holds feat_dim floats per node of batch.input_nodes, in that
// order; they are copied, so the buffer may be reused at once.
// invalid_argument if the sizes disagree or a block is malformed.
Result<ModelInput> make_model_input(const MiniBatch& batch, std::span<const float> input_rows,
                                    int64_t feat_dim);
// The same with layer 0's input already a [input_nodes, d] tensor (features,
// a learnable embedding, or both); x is used as is (not copied).
Result<ModelInput> make_model_input(const MiniBatch& batch, torch::Tensor x);

// What training, evaluation and inference need from a model: a TorchScript
// module (torchscript.cpp, the contract of docs/models.md), a built-in kind's
// or a user's.
struct Model::Impl {
  explicit Impl(ModelConfig c) : config(std::move(c)) {}
  virtual ~Impl() = default;
  ModelConfig config;

  // Every trainable tensor, in a fixed order (the gradient bucket's, Adam's).
  virtual std::vector<torch::Tensor> parameters() = 0;
  // train() / eval(): dropout on or off.
  virtual void set_training(bool on) = 0;
  // Logits [blocks.back().num_dst, classes]; callers check shapes first
  // (forward_checked).
  virtual torch::Tensor forward(const std::vector<ops::BlockGraphPtr>& blocks, const torch::Tensor& x) = 0;
  // Layer `layer` alone with what follows it in forward (activation,
  // dropout): what layer-wise inference runs.
  virtual torch::Tensor forward_layer(int layer, const ops::BlockGraphPtr& b, const torch::Tensor& h_src) = 0;
  // Output width of layer `layer`.
  virtual int64_t layer_out_dim(int layer) const = 0;
  // The weights (and buffers) for checkpoints.
  virtual void save_state(torch::serialize::OutputArchive& archive) = 0;
  virtual void load_state(torch::serialize::InputArchive& archive) = 0;
  // The model with its current weights as a TorchScript module at `path`
  // (written to a temporary name, then renamed).
  virtual Status save_torchscript(const std::string& path) = 0;
  virtual std::string describe() const = 0;
  // What a checkpoint records as the model ("sage", "torchscript:<type>").
  virtual std::string checkpoint_name() const = 0;
  virtual int dense_maps() const = 0;  // Model::dense_maps
};

// The model of config.model_file, or of the built-in kind config.kind (its
// file sized by configure()) (torchscript.cpp): loads it, checks the
// contract of docs/models.md against config (in_dim, num_classes,
// num_layers) by running it once on a small made-up batch, and wraps it.
// invalid_argument naming the file and what is wrong otherwise.
Result<std::unique_ptr<Model::Impl>> load_scripted_model(const ModelConfig& config);
Result<std::unique_ptr<Model::Impl>> load_builtin_model(const ModelConfig& config);

// One line for an error LibTorch threw: the message without its C++
// backtrace, and for the TorchScript interpreter's trace its last line (the
// Python-level error).
std::string torch_error_message(const std::exception& e);

// Checks that the input fits the model (one block per layer, blocks chained:
// blocks[i].num_dst == blocks[i+1].num_src, x is [blocks[0].num_src, in_dim])
// and runs the forward pass; LibTorch errors become internal errors.
Result<torch::Tensor> forward_checked(Model& model, const ModelInput& input);

}  // namespace dgld::trainer
