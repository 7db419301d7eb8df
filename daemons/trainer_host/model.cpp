#include "daemons/trainer_host/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "daemons/trainer_host/model_impl.h"

namespace dgld::trainer {

namespace {

// Everything that differs between the built-in model kinds: the name, the
// conv of one layer (`in` wide in, `out` wide out per head) and whether it is
// multi-headed (GAT: heads concatenated between layers and averaged at the
// output, ELU between layers as DGL's GAT example; the others ReLU).
struct KindRow {
  ModelKind kind;
  const char* name;
  torch::nn::AnyModule (*make_layer)(const ModelConfig& c, int64_t in, int64_t out);
  bool multi_head;
};

const KindRow kKinds[] = {
    {ModelKind::sage, "sage",
     [](const ModelConfig& c, int64_t in, int64_t out) { return torch::nn::AnyModule(SageConv(in, out, c.kernels)); },
     false},
    {ModelKind::gcn, "gcn",
     [](const ModelConfig& c, int64_t in, int64_t out) { return torch::nn::AnyModule(GraphConv(in, out, c.kernels)); },
     false},
    {ModelKind::gat, "gat",
     [](const ModelConfig& c, int64_t in, int64_t out) {
       return torch::nn::AnyModule(GatConv(in, out, c.num_heads, c.kernels));
     },
     true},
    {ModelKind::rgcn, "rgcn",
     [](const ModelConfig& c, int64_t in, int64_t out) {
       return torch::nn::AnyModule(RelGraphConv(in, out, c.num_rels, c.num_bases, c.kernels));
     },
     false},
};

const KindRow& row_of(ModelKind kind) {
  for (const KindRow& r : kKinds) {
    if (r.kind == kind) return r;
  }
  throw std::logic_error("model kind without a row in kKinds");
}

}  // namespace

Result<ModelKind> parse_model_kind(std::string_view name) {
  if (name == "graphsage") return ModelKind::sage;
  std::string known;
  for (const KindRow& r : kKinds) {
    if (name == r.name) return r.kind;
    known += (known.empty() ? "" : ", ") + std::string(r.name);
  }
  return invalid_argument("unknown model '" + std::string(name) + "' (known: " + known + ")");
}

const char* model_kind_name(ModelKind kind) { return row_of(kind).name; }

Result<Kernels> parse_kernels(std::string_view name) {
  if (name == "fused") return Kernels::fused;
  if (name == "reference" || name == "index-add") return Kernels::reference;
  return invalid_argument("unknown --kernels '" + std::string(name) + "' (known: fused, reference)");
}

const char* kernels_name(Kernels kernels) { return kernels == Kernels::fused ? "fused" : "reference"; }

Status validate_model_config(const ModelConfig& c) {
  if (c.in_dim < 1) return invalid_argument(fmt::format("model input dimension must be >= 1, got {}", c.in_dim));
  if (c.num_hidden < 1) return invalid_argument(fmt::format("--num-hidden must be >= 1, got {}", c.num_hidden));
  if (c.num_classes < 1) return invalid_argument(fmt::format("number of classes must be >= 1, got {}", c.num_classes));
  if (c.num_layers < 1) return invalid_argument(fmt::format("--num-layers must be >= 1, got {}", c.num_layers));
  if (!(c.dropout >= 0.0 && c.dropout < 1.0)) {
    return invalid_argument(fmt::format("--dropout must be in [0, 1), got {}", c.dropout));
  }
  if (c.num_heads < 1) return invalid_argument(fmt::format("--num-heads must be >= 1, got {}", c.num_heads));
  if (c.kind == ModelKind::rgcn) {
    if (c.num_rels < 1) {
      return invalid_argument(fmt::format("rgcn needs the graph's number of edge types (num_rels) >= 1, got {} "
                                          "(R-GCN runs on heterogeneous graphs)",
                                          c.num_rels));
    }
    if (c.num_bases < 0) return invalid_argument(fmt::format("--num-bases must be >= 0, got {}", c.num_bases));
  }
  return Status::ok();
}

// ---------------------------------------------------------------- tensors

Result<ops::BlockGraphPtr> make_block_graph(const Block& block, int64_t num_etypes) {
  return ops::block_graph_from(block, /*with_ids=*/false, num_etypes);
}

Result<ModelInput> make_model_input(const MiniBatch& batch, torch::Tensor x) {
  if (batch.blocks.empty()) return invalid_argument("mini-batch has no blocks");
  const int64_t n = static_cast<int64_t>(batch.input_nodes.size());
  if (n != batch.blocks[0].num_src()) {
    return invalid_argument(fmt::format("mini-batch has {} input nodes but blocks[0] has {} src nodes", n,
                                        batch.blocks[0].num_src()));
  }
  if (!x.defined() || x.dim() != 2 || x.size(0) != n) {
    return invalid_argument(fmt::format("layer 0's input must have one row per input node ({})", n));
  }
  ModelInput in;
  in.blocks.reserve(batch.blocks.size());
  for (size_t i = 0; i < batch.blocks.size(); ++i) {
    auto t = make_block_graph(batch.blocks[i]);
    if (!t.is_ok()) return t.status().with_context(fmt::format("block {}", i));
    in.blocks.push_back(std::move(t).value());
  }
  in.x = std::move(x);
  return in;
}

Result<ModelInput> make_model_input(const MiniBatch& batch, std::span<const float> input_rows, int64_t feat_dim) {
  if (feat_dim < 1) return invalid_argument(fmt::format("feature dimension must be >= 1, got {}", feat_dim));
  const int64_t n = static_cast<int64_t>(batch.input_nodes.size());
  if (static_cast<int64_t>(input_rows.size()) != n * feat_dim) {
    return invalid_argument(fmt::format("{} feature values given for {} input nodes of dimension {}",
                                        input_rows.size(), n, feat_dim));
  }
  auto x = torch::empty({n, feat_dim}, torch::kFloat32);
  if (n > 0) std::memcpy(x.data_ptr<float>(), input_rows.data(), input_rows.size() * sizeof(float));
  return make_model_input(batch, std::move(x));
}

torch::Tensor aggregate(Kernels kernels, const ops::BlockGraphPtr& b, const torch::Tensor& h_src, ops::Reduce reduce,
                        bool self_loop) {
  return kernels == Kernels::fused ? ops::copy_u_reduce(b, h_src, reduce, self_loop)
                                   : ops::copy_u_reduce_reference(b, h_src, reduce, self_loop);
}

// ---------------------------------------------------------------- layers

namespace {
const double kReluGain = std::sqrt(2.0);  // nn.init.calculate_gain('relu'), as DGL's reset_parameters
}  // namespace

SageConvImpl::SageConvImpl(int64_t in_dim, int64_t out_dim, Kernels k) : kernels(k) {
  fc_self = register_module("fc_self", torch::nn::Linear(torch::nn::LinearOptions(in_dim, out_dim).bias(false)));
  fc_neigh = register_module("fc_neigh", torch::nn::Linear(torch::nn::LinearOptions(in_dim, out_dim).bias(false)));
  bias = register_parameter("bias", torch::zeros({out_dim}));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(fc_self->weight, kReluGain);
  torch::nn::init::xavier_uniform_(fc_neigh->weight, kReluGain);
}

torch::Tensor SageConvImpl::forward(const ops::BlockGraphPtr& b, const torch::Tensor& h_src) {
  const auto h_dst = h_src.narrow(0, 0, b->num_dst_nodes());
  const int64_t in_dim = fc_self->options.in_features(), out_dim = fc_self->options.out_features();
  // The reference path keeps the rule it always had: project first when in > out.
  const bool project = kernels == Kernels::reference
                           ? in_dim > out_dim
                           : ops::project_before_aggregating(*b, in_dim, out_dim, h_src.requires_grad(), false);
  torch::Tensor neigh = project ? aggregate(kernels, b, fc_neigh(h_src), ops::Reduce::mean)
                                : fc_neigh(aggregate(kernels, b, h_src, ops::Reduce::mean));
  return fc_self(h_dst) + neigh + bias;
}

GraphConvImpl::GraphConvImpl(int64_t in_dim, int64_t out_dim, Kernels k) : kernels(k) {
  weight = register_parameter("weight", torch::empty({in_dim, out_dim}));
  bias = register_parameter("bias", torch::zeros({out_dim}));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(weight);
}

torch::Tensor GraphConvImpl::forward(const ops::BlockGraphPtr& b, const torch::Tensor& h_src) {
  // Degrees of the block plus one self edge per dst node.
  const int64_t nd = b->num_dst_nodes();
  auto out_deg = b->out_degrees().to(torch::kFloat32);
  out_deg.narrow(0, 0, nd).add_(1.0);
  const auto norm_src = out_deg.clamp_min(1.0).pow(-0.5).unsqueeze(1);
  const auto norm_dst = (b->in_degrees().to(torch::kFloat32) + 1.0).pow(-0.5).unsqueeze(1);
  // norm_src scales rows, so it commutes with the projection: applied to the
  // narrower side.
  torch::Tensor rst;
  const bool project = kernels == Kernels::reference
                           ? weight.size(0) > weight.size(1)
                           : ops::project_before_aggregating(*b, weight.size(0), weight.size(1), h_src.requires_grad(), true);
  if (project) {
    rst = aggregate(kernels, b, h_src.matmul(weight) * norm_src, ops::Reduce::sum, /*self_loop=*/true);
  } else {
    rst = aggregate(kernels, b, h_src * norm_src, ops::Reduce::sum, /*self_loop=*/true).matmul(weight);
  }
  return rst * norm_dst + bias;
}

GatConvImpl::GatConvImpl(int64_t in_dim, int64_t out, int64_t heads, Kernels k)
    : kernels(k), out_dim(out), num_heads(heads) {
  fc = register_module("fc", torch::nn::Linear(torch::nn::LinearOptions(in_dim, out * heads).bias(false)));
  attn_l = register_parameter("attn_l", torch::empty({1, heads, out}));
  attn_r = register_parameter("attn_r", torch::empty({1, heads, out}));
  bias = register_parameter("bias", torch::zeros({heads * out}));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_normal_(fc->weight, kReluGain);
  torch::nn::init::xavier_normal_(attn_l, kReluGain);
  torch::nn::init::xavier_normal_(attn_r, kReluGain);
}

torch::Tensor GatConvImpl::forward(const ops::BlockGraphPtr& b, const torch::Tensor& h_src) {
  const auto z_src = fc(h_src).view({-1, num_heads, out_dim});  // [Ns, H, F]
  const auto out = kernels == Kernels::fused ? ops::gat_aggregate(b, z_src, attn_l, attn_r, 0.2)
                                             : ops::gat_aggregate_reference(b, z_src, attn_l, attn_r, 0.2);
  return out + bias.view({1, num_heads, out_dim});
}

RelGraphConvImpl::RelGraphConvImpl(int64_t in_dim, int64_t out_dim, int64_t rels, int64_t num_bases, Kernels k)
    : kernels(k), num_rels(rels) {
  TORCH_CHECK(rels >= 1, "RelGraphConv needs num_rels >= 1, got ", rels);
  const bool bases = num_bases > 0 && num_bases < rels;
  weight = register_parameter("weight", torch::empty({bases ? num_bases : rels, in_dim, out_dim}));
  if (bases) w_comp = register_parameter("w_comp", torch::empty({rels, num_bases}));
  loop_weight = register_parameter("loop_weight", torch::empty({in_dim, out_dim}));
  bias = register_parameter("bias", torch::zeros({out_dim}));
  torch::NoGradGuard no_grad;
  // Xavier (relu gain) per [in, out] matrix, as the self-loop weight.
  for (int64_t i = 0; i < weight.size(0); ++i) {
    auto w = weight[i];
    torch::nn::init::xavier_uniform_(w, kReluGain);
  }
  if (bases) torch::nn::init::xavier_uniform_(w_comp, kReluGain);
  torch::nn::init::xavier_uniform_(loop_weight, kReluGain);
}

namespace {
// W_r for the relations `rels` (int64 [U]): [U, in, out].
torch::Tensor weights_of(const RelGraphConvImpl& m, const torch::Tensor& rels) {
  if (!m.w_comp.defined()) return m.weight.index_select(0, rels);
  const int64_t nb = m.weight.size(0), in = m.weight.size(1), out = m.weight.size(2);
  return m.w_comp.index_select(0, rels).matmul(m.weight.reshape({nb, in * out})).view({-1, in, out});
}
}  // namespace

torch::Tensor RelGraphConvImpl::relation_weights() const {
  return weights_of(*this, torch::arange(num_rels, torch::kInt64));
}

torch::Tensor RelGraphConvImpl::forward(const ops::BlockGraphPtr& b, const torch::Tensor& h_src) {
  TORCH_CHECK(b->has_etypes() || b->num_edges() == 0,
              "rgcn: the block has no edge types (R-GCN runs on the blocks of a heterogeneous graph, whose "
              "edges carry a type id)");
  const int64_t nd = b->num_dst_nodes(), block_rels = b->num_etypes();
  TORCH_CHECK(block_rels <= num_rels, "rgcn: the block has ", block_rels, " edge types but the model has ", num_rels,
              " relations");
  auto out = h_src.narrow(0, 0, nd).matmul(loop_weight) + bias;
  // Each relation's mean over its in-edges, then one product for all of
  // them: [num_dst, U * in] x [U * in, out].
  std::vector<torch::Tensor> aggs;
  std::vector<int64_t> used;
  for (int64_t r = 0; r < block_rels; ++r) {
    const auto g = b->relation(r);
    if (g->num_edges() == 0) continue;
    aggs.push_back(aggregate(kernels, g, h_src, ops::Reduce::mean));
    used.push_back(r);
  }
  if (used.empty()) return out;
  const auto w = weights_of(*this, torch::tensor(used, torch::kInt64));
  if (used.size() == 1) return out + aggs[0].matmul(w[0]);
  return out + torch::cat(aggs, 1).matmul(w.reshape({-1, w.size(2)}));
}

GnnNetImpl::GnnNetImpl(const ModelConfig& config) : config_(config) {
  const KindRow& row = row_of(config.kind);
  multi_head_ = row.multi_head;
  for (int l = 0; l < config.num_layers; ++l) {
    const int64_t in = l == 0 ? config.in_dim : layer_out_dim(l - 1);
    const int64_t out = l == config.num_layers - 1 ? config.num_classes : config.num_hidden;
    layers_.push_back(row.make_layer(config, in, out));
    register_module("layer" + std::to_string(l), layers_.back().ptr());
  }
  dropout_ = register_module("dropout", torch::nn::Dropout(config.dropout));
}

int64_t GnnNetImpl::layer_out_dim(int layer) const {
  if (layer == config_.num_layers - 1) return config_.num_classes;
  return multi_head_ ? config_.num_hidden * config_.num_heads : config_.num_hidden;
}

torch::Tensor GnnNetImpl::forward_layer(int layer, const ops::BlockGraphPtr& b, const torch::Tensor& h_src) {
  const bool last = layer == config_.num_layers - 1;
  torch::Tensor h = layers_[static_cast<size_t>(layer)].forward(b, h_src);
  if (multi_head_) h = last ? h.mean(1) : h.flatten(1);
  if (!last) {
    h = multi_head_ ? torch::elu(h) : torch::relu(h);
    h = dropout_(h);
  }
  return h;
}

torch::Tensor GnnNetImpl::forward(const std::vector<ops::BlockGraphPtr>& blocks, torch::Tensor x) {
  torch::Tensor h = std::move(x);
  for (int l = 0; l < config_.num_layers; ++l) h = forward_layer(l, blocks[l], h);
  return h;
}

Result<torch::Tensor> forward_checked(Model& model, const ModelInput& input) {
  const ModelConfig& c = model.config();
  const auto& blocks = input.blocks;
  if (static_cast<int>(blocks.size()) != c.num_layers) {
    return invalid_argument(fmt::format("the model has {} layers but the batch has {} blocks (one block per layer: "
                                        "give as many fanouts as --num-layers)",
                                        c.num_layers, blocks.size()));
  }
  for (size_t i = 0; i + 1 < blocks.size(); ++i) {
    if (blocks[i]->num_dst_nodes() != blocks[i + 1]->num_src_nodes()) {
      return invalid_argument(fmt::format("block {} has {} dst nodes but block {} has {} src nodes", i,
                                          blocks[i]->num_dst_nodes(), i + 1, blocks[i + 1]->num_src_nodes()));
    }
  }
  if (!input.x.defined() || input.x.dim() != 2 || input.x.size(0) != blocks[0]->num_src_nodes() || input.x.size(1) != c.in_dim) {
    return invalid_argument(fmt::format("input features must be [{}, {}] (blocks[0] src nodes x input dimension), got {}",
                                        blocks[0]->num_src_nodes(), c.in_dim,
                                        input.x.defined() ? fmt::format("{}", fmt::join(input.x.sizes(), " x ")) : "none"));
  }
  try {
    return model.impl().forward(blocks, input.x);
  } catch (const std::exception& e) {
    return internal_error(std::string("forward pass failed: ") + torch_error_message(e));
  }
}

std::string BuiltinModel::describe() const {
  const ModelConfig& c = config;
  std::string s = fmt::format("{}(in={}, hidden={}, classes={}, layers={}, dropout={}", model_kind_name(c.kind),
                              c.in_dim, c.num_hidden, c.num_classes, c.num_layers, c.dropout);
  if (c.kind == ModelKind::gat) s += fmt::format(", heads={}", c.num_heads);
  if (c.kind == ModelKind::rgcn) {
    const bool bases = c.num_bases > 0 && c.num_bases < c.num_rels;
    s += bases ? fmt::format(", rels={}, bases={}", c.num_rels, c.num_bases)
               : fmt::format(", rels={}, bases=none", c.num_rels);
  }
  if (c.kernels != Kernels::fused) s += fmt::format(", kernels={}", kernels_name(c.kernels));
  return s + ")";
}

// ---------------------------------------------------------------- Model

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::create(const ModelConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_model_config(config));
  std::unique_ptr<Impl> impl;
  if (!config.model_file.empty()) {
    DGLD_ASSIGN_OR_RETURN(impl, load_scripted_model(config));
  } else {
    try {
      impl = std::make_unique<BuiltinModel>(config);
    } catch (const c10::Error& e) {
      return internal_error(std::string("building the model failed: ") + e.what_without_backtrace());
    }
  }
  return std::unique_ptr<Model>(new Model(std::move(impl)));
}

const ModelConfig& Model::config() const { return impl_->config; }

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : impl_->parameters()) n += p.numel();
  return n;
}

std::string Model::describe() const {
  return fmt::format("{}, {} parameters", impl_->describe(), num_parameters());
}

Status Model::save_torchscript(const std::string& path) const { return impl_->save_torchscript(path); }

std::string Model::checkpoint_name() const { return impl_->checkpoint_name(); }

}  // namespace dgld::trainer
