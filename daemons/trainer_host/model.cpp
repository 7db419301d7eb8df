#include "daemons/trainer_host/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "daemons/trainer_host/model_impl.h"

namespace dgld::trainer {

Result<ModelKind> parse_model_kind(std::string_view name) {
  if (name == "sage" || name == "graphsage") return ModelKind::sage;
  if (name == "gcn") return ModelKind::gcn;
  if (name == "gat") return ModelKind::gat;
  return invalid_argument("unknown model '" + std::string(name) + "' (known: sage, gcn, gat)");
}

const char* model_kind_name(ModelKind kind) {
  switch (kind) {
    case ModelKind::sage: return "sage";
    case ModelKind::gcn: return "gcn";
    case ModelKind::gat: return "gat";
  }
  return "?";
}

Status validate_model_config(const ModelConfig& c) {
  if (c.in_dim < 1) return invalid_argument(fmt::format("model input dimension must be >= 1, got {}", c.in_dim));
  if (c.num_hidden < 1) return invalid_argument(fmt::format("--num-hidden must be >= 1, got {}", c.num_hidden));
  if (c.num_classes < 1) return invalid_argument(fmt::format("number of classes must be >= 1, got {}", c.num_classes));
  if (c.num_layers < 1) return invalid_argument(fmt::format("--num-layers must be >= 1, got {}", c.num_layers));
  if (!(c.dropout >= 0.0 && c.dropout < 1.0)) {
    return invalid_argument(fmt::format("--dropout must be in [0, 1), got {}", c.dropout));
  }
  if (c.num_heads < 1) return invalid_argument(fmt::format("--num-heads must be >= 1, got {}", c.num_heads));
  return Status::ok();
}

// ---------------------------------------------------------------- tensors

Result<BlockTensors> make_block_tensors(const Block& block) {
  const int64_t nd = block.num_dst(), ns = block.num_src();
  const int64_t ne = static_cast<int64_t>(block.indices.size());
  if (ns < nd) return invalid_argument(fmt::format("block has {} src nodes but {} dst nodes", ns, nd));
  if (static_cast<int64_t>(block.indptr.size()) != nd + 1) {
    return invalid_argument(fmt::format("block indptr has {} entries for {} dst nodes", block.indptr.size(), nd));
  }
  if (block.indptr[0] != 0 || block.indptr[nd] != ne) {
    return invalid_argument(fmt::format("block indptr runs {}..{} for {} edges", block.indptr[0], block.indptr[nd], ne));
  }
  BlockTensors t;
  t.num_src = ns;
  t.num_dst = nd;
  t.src = torch::empty({ne}, torch::kInt64);
  t.dst = torch::empty({ne}, torch::kInt64);
  t.in_deg = torch::empty({nd}, torch::kFloat32);
  int64_t* src = t.src.data_ptr<int64_t>();
  int64_t* dst = t.dst.data_ptr<int64_t>();
  float* deg = t.in_deg.data_ptr<float>();
  for (int64_t v = 0; v < nd; ++v) {
    const int64_t b = block.indptr[v], e = block.indptr[v + 1];
    if (e < b) return invalid_argument(fmt::format("block indptr decreases at dst {}", v));
    deg[v] = static_cast<float>(e - b);
    for (int64_t k = b; k < e; ++k) {
      const int64_t u = block.indices[k];
      if (u < 0 || u >= ns) return invalid_argument(fmt::format("block edge {} has src index {} of {}", k, u, ns));
      src[k] = u;
      dst[k] = v;
    }
  }
  return t;
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
    auto t = make_block_tensors(batch.blocks[i]);
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

torch::Tensor aggregate_sum(const BlockTensors& b, const torch::Tensor& h_src) {
  auto sizes = h_src.sizes().vec();
  sizes[0] = b.num_dst;
  auto out = torch::zeros(sizes, h_src.options());
  if (b.num_edges() == 0) return out;
  return out.index_add_(0, b.dst, h_src.index_select(0, b.src));
}

torch::Tensor aggregate_mean(const BlockTensors& b, const torch::Tensor& h_src) {
  auto sum = aggregate_sum(b, h_src);
  std::vector<int64_t> shape(static_cast<size_t>(h_src.dim()), 1);
  shape[0] = b.num_dst;
  return sum / b.in_deg.clamp_min(1.0).to(h_src.dtype()).view(shape);
}

// ---------------------------------------------------------------- layers

namespace {
const double kReluGain = std::sqrt(2.0);  // nn.init.calculate_gain('relu'), as DGL's reset_parameters
}

SageConvImpl::SageConvImpl(int64_t in_dim, int64_t out_dim) {
  fc_self = register_module("fc_self", torch::nn::Linear(torch::nn::LinearOptions(in_dim, out_dim).bias(false)));
  fc_neigh = register_module("fc_neigh", torch::nn::Linear(torch::nn::LinearOptions(in_dim, out_dim).bias(false)));
  bias = register_parameter("bias", torch::zeros({out_dim}));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(fc_self->weight, kReluGain);
  torch::nn::init::xavier_uniform_(fc_neigh->weight, kReluGain);
}

torch::Tensor SageConvImpl::forward(const BlockTensors& b, const torch::Tensor& h_src) {
  const auto h_dst = h_src.narrow(0, 0, b.num_dst);
  const int64_t in_dim = fc_self->options.in_features(), out_dim = fc_self->options.out_features();
  torch::Tensor neigh = in_dim > out_dim ? aggregate_mean(b, fc_neigh(h_src)) : fc_neigh(aggregate_mean(b, h_src));
  return fc_self(h_dst) + neigh + bias;
}

GraphConvImpl::GraphConvImpl(int64_t in_dim, int64_t out_dim) {
  weight = register_parameter("weight", torch::empty({in_dim, out_dim}));
  bias = register_parameter("bias", torch::zeros({out_dim}));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(weight);
}

torch::Tensor GraphConvImpl::forward(const BlockTensors& b, const torch::Tensor& h_src) {
  // The block plus one self edge per dst node.
  BlockTensors g;
  g.num_src = b.num_src;
  g.num_dst = b.num_dst;
  const auto self = torch::arange(b.num_dst, torch::kInt64);
  g.src = b.num_edges() ? torch::cat({b.src, self}) : self;
  g.dst = b.num_edges() ? torch::cat({b.dst, self}) : self;
  const auto out_deg =
      torch::zeros({b.num_src}, torch::kFloat32).index_add_(0, g.src, torch::ones({g.src.size(0)}, torch::kFloat32));
  const auto norm_src = out_deg.clamp_min(1.0).pow(-0.5).unsqueeze(1);
  const auto norm_dst = (b.in_deg + 1.0).pow(-0.5).unsqueeze(1);
  const auto h = h_src * norm_src;
  torch::Tensor rst = weight.size(0) > weight.size(1) ? aggregate_sum(g, h.matmul(weight))
                                                      : aggregate_sum(g, h).matmul(weight);
  return rst * norm_dst + bias;
}

namespace {
// Per-dst, per-head maximum of edge values `e` ([E, H] float): a plain loop,
// since scatter_reduce is still beta (and warns) in LibTorch 1.13.
torch::Tensor segment_max(const BlockTensors& b, const torch::Tensor& e) {
  const auto ec = e.contiguous();
  const int64_t ne = ec.size(0), h = ec.size(1);
  auto out = torch::zeros({b.num_dst, h}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  const float* x = ec.data_ptr<float>();
  const int64_t* dst = b.dst.data_ptr<int64_t>();
  for (int64_t k = 0; k < ne; ++k) {
    float* row = o + dst[k] * h;
    const float* in = x + k * h;
    const bool first = k == 0 || dst[k - 1] != dst[k];  // edges are grouped by dst
    for (int64_t j = 0; j < h; ++j) row[j] = first ? in[j] : std::max(row[j], in[j]);
  }
  return out;
}
}  // namespace

GatConvImpl::GatConvImpl(int64_t in_dim, int64_t out, int64_t heads) : out_dim(out), num_heads(heads) {
  fc = register_module("fc", torch::nn::Linear(torch::nn::LinearOptions(in_dim, out * heads).bias(false)));
  attn_l = register_parameter("attn_l", torch::empty({1, heads, out}));
  attn_r = register_parameter("attn_r", torch::empty({1, heads, out}));
  bias = register_parameter("bias", torch::zeros({heads * out}));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_normal_(fc->weight, kReluGain);
  torch::nn::init::xavier_normal_(attn_l, kReluGain);
  torch::nn::init::xavier_normal_(attn_r, kReluGain);
}

torch::Tensor GatConvImpl::forward(const BlockTensors& b, const torch::Tensor& h_src) {
  const auto z_src = fc(h_src).view({-1, num_heads, out_dim});  // [Ns, H, F]
  const auto z_dst = z_src.narrow(0, 0, b.num_dst);
  const auto el = (z_src * attn_l).sum(-1);  // [Ns, H]
  const auto er = (z_dst * attn_r).sum(-1);  // [Nd, H]
  auto out = torch::zeros({b.num_dst, num_heads, out_dim}, z_src.options());
  if (b.num_edges() > 0) {
    const auto e = torch::leaky_relu(el.index_select(0, b.src) + er.index_select(0, b.dst), 0.2);  // [E, H]
    // Edge softmax over each dst's in-edges, shifted by the per-dst max for stability
    // (the shift does not change the result, so it carries no gradient).
    const auto emax = segment_max(b, e.detach());
    const auto ex = torch::exp(e - emax.index_select(0, b.dst));
    const auto denom = torch::zeros({b.num_dst, num_heads}, e.options()).index_add_(0, b.dst, ex);
    const auto alpha = ex / denom.index_select(0, b.dst);
    out = out.index_add_(0, b.dst, z_src.index_select(0, b.src) * alpha.unsqueeze(-1));
  }
  return out + bias.view({1, num_heads, out_dim});
}

GnnNetImpl::GnnNetImpl(const ModelConfig& config) : config_(config) {
  const int L = config.num_layers;
  for (int l = 0; l < L; ++l) {
    const bool last = l == L - 1;
    const int64_t out = last ? config.num_classes : config.num_hidden;
    int64_t in = config.in_dim;
    if (l > 0) in = config.kind == ModelKind::gat ? config.num_hidden * config.num_heads : config.num_hidden;
    const std::string name = "layer" + std::to_string(l);
    switch (config.kind) {
      case ModelKind::sage: sage_.push_back(register_module(name, SageConv(in, out))); break;
      case ModelKind::gcn: gcn_.push_back(register_module(name, GraphConv(in, out))); break;
      case ModelKind::gat: gat_.push_back(register_module(name, GatConv(in, out, config.num_heads))); break;
    }
  }
  dropout_ = register_module("dropout", torch::nn::Dropout(config.dropout));
}

int64_t GnnNetImpl::layer_out_dim(int layer) const {
  if (layer == config_.num_layers - 1) return config_.num_classes;
  return config_.kind == ModelKind::gat ? config_.num_hidden * config_.num_heads : config_.num_hidden;
}

torch::Tensor GnnNetImpl::forward_layer(int layer, const BlockTensors& b, const torch::Tensor& h_src) {
  const bool last = layer == config_.num_layers - 1;
  torch::Tensor h;
  switch (config_.kind) {
    case ModelKind::sage: h = sage_[layer]->forward(b, h_src); break;
    case ModelKind::gcn: h = gcn_[layer]->forward(b, h_src); break;
    case ModelKind::gat: {
      h = gat_[layer]->forward(b, h_src);
      h = last ? h.mean(1) : h.flatten(1);
      break;
    }
  }
  if (!last) {
    h = config_.kind == ModelKind::gat ? torch::elu(h) : torch::relu(h);
    h = dropout_(h);
  }
  return h;
}

torch::Tensor GnnNetImpl::forward(const std::vector<BlockTensors>& blocks, torch::Tensor x) {
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
    if (blocks[i].num_dst != blocks[i + 1].num_src) {
      return invalid_argument(fmt::format("block {} has {} dst nodes but block {} has {} src nodes", i,
                                          blocks[i].num_dst, i + 1, blocks[i + 1].num_src));
    }
  }
  if (!input.x.defined() || input.x.dim() != 2 || input.x.size(0) != blocks[0].num_src || input.x.size(1) != c.in_dim) {
    return invalid_argument(fmt::format("input features must be [{}, {}] (blocks[0] src nodes x input dimension), got {}",
                                        blocks[0].num_src, c.in_dim,
                                        input.x.defined() ? fmt::format("{}", fmt::join(input.x.sizes(), " x ")) : "none"));
  }
  try {
    return model.impl().net->forward(blocks, input.x);
  } catch (const c10::Error& e) {
    return internal_error(std::string("forward pass failed: ") + e.what_without_backtrace());
  }
}

// ---------------------------------------------------------------- Model

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::create(const ModelConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_model_config(config));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  try {
    impl->net = GnnNet(config);
  } catch (const c10::Error& e) {
    return internal_error(std::string("building the model failed: ") + e.what_without_backtrace());
  }
  return std::unique_ptr<Model>(new Model(std::move(impl)));
}

const ModelConfig& Model::config() const { return impl_->config; }

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : impl_->net->parameters()) n += p.numel();
  return n;
}

std::string Model::describe() const {
  const ModelConfig& c = impl_->config;
  std::string s = fmt::format("{}(in={}, hidden={}, classes={}, layers={}, dropout={}", model_kind_name(c.kind),
                              c.in_dim, c.num_hidden, c.num_classes, c.num_layers, c.dropout);
  if (c.kind == ModelKind::gat) s += fmt::format(", heads={}", c.num_heads);
  return s + fmt::format("; {} parameters)", num_parameters());
}

}  // namespace dgld::trainer
