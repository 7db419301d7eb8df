#pragma once
// Private to training code: the LibTorch side of model.h. Includes
// <torch/torch.h>, so include it only from .cpp files that train or test
// models (about 20 s of compile time per translation unit).
//
// A block reaches the layers as BlockTensors: index tensors built once per
// block and shared by every layer that runs on it. Aggregation is
// index_select over the edges' sources followed by index_add_ into their
// destinations; a destination with no in-edges aggregates to 0.

#include <cstdint>
#include <span>
#include <vector>

#include <torch/torch.h>

#include "common/sampling/block.h"
#include "common/sampling/multi_layer_sampler.h"
#include "common/status.h"
#include "daemons/trainer_host/model.h"

namespace dgld::trainer {

// One block as tensors. Edges keep the block's CSR order (grouped by dst).
struct BlockTensors {
  int64_t num_src = 0;
  int64_t num_dst = 0;
  torch::Tensor src;     // int64 [E]: local src index of each edge (Block::indices)
  torch::Tensor dst;     // int64 [E]: local dst index of each edge
  torch::Tensor in_deg;  // float [num_dst]: in-degree of each dst in the block

  int64_t num_edges() const { return src.defined() ? src.size(0) : 0; }
};

// Builds the index tensors of `block` (copies its arrays). invalid_argument if
// the block's arrays are inconsistent (indptr length, an index out of range,
// src_nodes shorter than dst_nodes).
Result<BlockTensors> make_block_tensors(const Block& block);

// What a model's forward pass takes: every block of the batch and the input
// features of blocks[0].src_nodes ([num_src, in_dim], float32).
struct ModelInput {
  std::vector<BlockTensors> blocks;
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

// Sum over in-edges of h_src rows into [num_dst, ...]; mean divides by the
// in-degree, zero-degree dst giving 0.
torch::Tensor aggregate_sum(const BlockTensors& b, const torch::Tensor& h_src);
torch::Tensor aggregate_mean(const BlockTensors& b, const torch::Tensor& h_src);

// DGL SAGEConv(aggregator_type='mean'):
//   h_dst' = W_self h_dst + W_neigh mean_{u in N(v)} h_u + b
// with h_dst = h_src[:num_dst]. When in > out, W_neigh is applied before the
// aggregation (DGL's lin_before_mp; same result, less work).
class SageConvImpl : public torch::nn::Module {
 public:
  SageConvImpl(int64_t in_dim, int64_t out_dim);
  torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h_src);
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
  GraphConvImpl(int64_t in_dim, int64_t out_dim);
  torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h_src);
  torch::Tensor weight, bias;
};
TORCH_MODULE(GraphConv);

// DGL GATConv(num_heads, negative_slope=0.2, no residual, attn_drop=0):
//   z = W h;  e_uv = LeakyReLU(a_l . z_u + a_r . z_v);  alpha = softmax over v's in-edges
//   h_v' = sum_u alpha_uv z_u + b      -> [num_dst, heads, out_dim]
// A dst with no in-edges gets b (DGL's allow_zero_in_degree=True).
class GatConvImpl : public torch::nn::Module {
 public:
  GatConvImpl(int64_t in_dim, int64_t out_dim, int64_t num_heads);
  torch::Tensor forward(const BlockTensors& b, const torch::Tensor& h_src);
  int64_t out_dim, num_heads;
  torch::nn::Linear fc{nullptr};
  torch::Tensor attn_l, attn_r, bias;
};
TORCH_MODULE(GatConv);

// The layer stack. Between layers: activation (ReLU; ELU for GAT, as DGL's GAT
// example), then dropout. GAT hidden layers concatenate heads, the last layer
// averages them.
class GnnNetImpl : public torch::nn::Module {
 public:
  explicit GnnNetImpl(const ModelConfig& config);
  // Every layer over its block; returns logits [blocks.back().num_dst, classes].
  // Callers check the shapes first (see forward_checked).
  torch::Tensor forward(const std::vector<BlockTensors>& blocks, torch::Tensor x);
  // Layer `layer` alone, activation/dropout included unless it is the last:
  // what layer-wise inference runs.
  torch::Tensor forward_layer(int layer, const BlockTensors& b, const torch::Tensor& h_src);
  // Output width of layer `layer` (after head concatenation / averaging).
  int64_t layer_out_dim(int layer) const;
  int num_layers() const { return config_.num_layers; }

 private:
  ModelConfig config_;
  std::vector<SageConv> sage_;
  std::vector<GraphConv> gcn_;
  std::vector<GatConv> gat_;
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(GnnNet);

struct Model::Impl {
  ModelConfig config;
  GnnNet net{nullptr};
};

// Checks that the input fits the model (one block per layer, blocks chained:
// blocks[i].num_dst == blocks[i+1].num_src, x is [blocks[0].num_src, in_dim])
// and runs the forward pass; LibTorch errors become internal errors.
Result<torch::Tensor> forward_checked(Model& model, const ModelInput& input);

}  // namespace dgld::trainer
