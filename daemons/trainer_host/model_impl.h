#pragma once
// Private to training code: the LibTorch side of model.h. Includes
// <torch/torch.h>, so include it only from .cpp files that train or test
// models (about 20 s of compile time per translation unit).
//
// A block reaches the layers as an ops::BlockGraph (common/ops/): its CSR as
// tensors, built once per block and shared by every layer that runs on it.
// Aggregation runs the fused kernels of common/ops/message_passing.h, or with
// Kernels::reference their index_select + index_add_ reference; a destination
// with no in-edges aggregates to 0.

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

// Sum (or mean) over each dst's in-edges of h_src rows, with `kernels`.
torch::Tensor aggregate(Kernels kernels, const ops::BlockGraphPtr& b, const torch::Tensor& h_src, ops::Reduce reduce,
                        bool self_loop = false);

// DGL SAGEConv(aggregator_type='mean'):
//   h_dst' = W_self h_dst + W_neigh mean_{u in N(v)} h_u + b
// with h_dst = h_src[:num_dst]. W_neigh is applied before the aggregation
// when that costs less (ops::project_before_aggregating; same result).
class SageConvImpl : public torch::nn::Module {
 public:
  SageConvImpl(int64_t in_dim, int64_t out_dim, Kernels kernels);
  Kernels kernels;
  torch::Tensor forward(const ops::BlockGraphPtr& b, const torch::Tensor& h_src);
  torch::nn::Linear fc_self{nullptr}, fc_neigh{nullptr};
  torch::Tensor bias;
};
TORCH_MODULE(SageConv);

// DGL GraphConv(norm='both') run on the block with one self edge added per
// dst node (dst i is src i): the block form of dgl.add_self_loop, so a node's
// own features reach it whatever the fanout.
//   h_dst'[v] = b + sum_{u in N(v) + v} h_u W / sqrt(d_out(u) d_in(v))
// d_out(u): edges leaving src u in the block (self edges included), d_in(v):
// edges entering dst v (>= 1 thanks to the self edge), as GraphConv counts
// them on a block.
class GraphConvImpl : public torch::nn::Module {
 public:
  GraphConvImpl(int64_t in_dim, int64_t out_dim, Kernels kernels);
  Kernels kernels;
  torch::Tensor forward(const ops::BlockGraphPtr& b, const torch::Tensor& h_src);
  torch::Tensor weight, bias;
};
TORCH_MODULE(GraphConv);

// DGL GATConv(num_heads, negative_slope=0.2, no residual, attn_drop=0):
//   z = W h;  e_uv = LeakyReLU(a_l . z_u + a_r . z_v);  alpha = softmax over v's in-edges
//   h_v' = sum_u alpha_uv z_u + b      -> [num_dst, heads, out_dim]
// A dst with no in-edges gets b (DGL's allow_zero_in_degree=True).
class GatConvImpl : public torch::nn::Module {
 public:
  GatConvImpl(int64_t in_dim, int64_t out_dim, int64_t num_heads, Kernels kernels);
  Kernels kernels;
  torch::Tensor forward(const ops::BlockGraphPtr& b, const torch::Tensor& h_src);
  int64_t out_dim, num_heads;
  torch::nn::Linear fc{nullptr};
  torch::Tensor attn_l, attn_r, bias;
};
TORCH_MODULE(GatConv);

// DGL RelGraphConv(self_loop=True, bias=True, activation=None) with each
// relation's messages averaged (DGL's entity-classification example
// normalises by in-degree per relation):
//   h_dst'[v] = h_dst[v] W_self + b + sum_r mean_{u in N_r(v)} h_src[u] W_r
// with h_dst = h_src[:num_dst] and N_r(v) v's in-edges of type r
// (b->relation(r)); a dst with no in-edges of type r gets 0 from r. Each
// relation is aggregated first (num_dst <= num_src rows), then all are
// projected in one product. W_r = weight[r] without bases; with 0 < num_bases
// < num_rels, W_r = sum_b w_comp[r, b] weight[b] (regularizer='basis').
// The block must carry edge types (an edgeless block may have none), all
// below num_rels; c10::Error otherwise.
class RelGraphConvImpl : public torch::nn::Module {
 public:
  // num_bases: 0 or >= num_rels gives one matrix per relation.
  RelGraphConvImpl(int64_t in_dim, int64_t out_dim, int64_t num_rels, int64_t num_bases, Kernels kernels);
  Kernels kernels;
  torch::Tensor forward(const ops::BlockGraphPtr& b, const torch::Tensor& h_src);
  // W_r for every relation: [num_rels, in_dim, out_dim].
  torch::Tensor relation_weights() const;
  bool uses_bases() const { return w_comp.defined(); }
  int64_t num_rels;
  torch::Tensor weight;       // [num_rels or num_bases, in_dim, out_dim]
  torch::Tensor w_comp;       // [num_rels, num_bases]; undefined without bases
  torch::Tensor loop_weight;  // [in_dim, out_dim]
  torch::Tensor bias;         // [out_dim]
};
TORCH_MODULE(RelGraphConv);

// The layer stack. Between layers: activation (ReLU; ELU for GAT, as DGL's GAT
// example), then dropout. GAT hidden layers concatenate heads, the last layer
// averages them. R-GCN: RelGraphConv layers, ReLU.
class GnnNetImpl : public torch::nn::Module {
 public:
  explicit GnnNetImpl(const ModelConfig& config);
  // Every layer over its block; returns logits [blocks.back().num_dst, classes].
  // Callers check the shapes first (see forward_checked).
  torch::Tensor forward(const std::vector<ops::BlockGraphPtr>& blocks, torch::Tensor x);
  // Layer `layer` alone, activation/dropout included unless it is the last:
  // what layer-wise inference runs.
  torch::Tensor forward_layer(int layer, const ops::BlockGraphPtr& b, const torch::Tensor& h_src);
  // Output width of layer `layer` (after head concatenation / averaging).
  int64_t layer_out_dim(int layer) const;
  int num_layers() const { return config_.num_layers; }

 private:
  ModelConfig config_;
  bool multi_head_ = false;  // GAT: heads concatenated between layers, averaged at the output
  std::vector<torch::nn::AnyModule> layers_;  // one conv per layer, made by the kind's table row (model.cpp)
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(GnnNet);

// What training, evaluation and inference need from a model, built in
// (BuiltinModel, the GnnNet above) or loaded from a TorchScript file
// (torchscript.cpp, the contract of docs/models.md).
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
};

// A built-in model: GnnNet. save_torchscript: invalid_argument for rgcn (not
// exported yet).
struct BuiltinModel : Model::Impl {
  explicit BuiltinModel(const ModelConfig& c) : Impl(c), net(c) {}
  GnnNet net;
  std::vector<torch::Tensor> parameters() override { return net->parameters(); }
  void set_training(bool on) override { net->train(on); }
  torch::Tensor forward(const std::vector<ops::BlockGraphPtr>& blocks, const torch::Tensor& x) override {
    return net->forward(blocks, x);
  }
  torch::Tensor forward_layer(int layer, const ops::BlockGraphPtr& b, const torch::Tensor& h_src) override {
    return net->forward_layer(layer, b, h_src);
  }
  int64_t layer_out_dim(int layer) const override { return net->layer_out_dim(layer); }
  void save_state(torch::serialize::OutputArchive& archive) override { net->save(archive); }
  void load_state(torch::serialize::InputArchive& archive) override { net->load(archive); }
  Status save_torchscript(const std::string& path) override;  // torchscript.cpp
  std::string describe() const override;
  std::string checkpoint_name() const override { return model_kind_name(config.kind); }
};

// The model of config.model_file (torchscript.cpp): loads it, checks the
// contract of docs/models.md against config (in_dim, num_classes,
// num_layers) by running it once on a small made-up batch, and wraps it.
// invalid_argument naming the file and what is wrong otherwise.
Result<std::unique_ptr<Model::Impl>> load_scripted_model(const ModelConfig& config);

// One line for an error LibTorch threw: the message without its C++
// backtrace, and for the TorchScript interpreter's trace its last line (the
// Python-level error).
std::string torch_error_message(const std::exception& e);

// Checks that the input fits the model (one block per layer, blocks chained:
// blocks[i].num_dst == blocks[i+1].num_src, x is [blocks[0].num_src, in_dim])
// and runs the forward pass; LibTorch errors become internal errors.
Result<torch::Tensor> forward_checked(Model& model, const ModelInput& input);

}  // namespace dgld::trainer
