#include "daemons/trainer_host/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "daemons/trainer_host/model_impl.h"

namespace dgld::trainer {

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
  if (c.num_rels < 0) return invalid_argument(fmt::format("the number of relations must be >= 0, got {}", c.num_rels));
  if (c.num_bases < 0) return invalid_argument(fmt::format("--num-bases must be >= 0, got {}", c.num_bases));
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

// ---------------------------------------------------------------- Model

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::create(const ModelConfig& config) {
  DGLD_RETURN_IF_ERROR(validate_model_config(config));
  std::unique_ptr<Impl> impl;
  if (!config.model_file.empty()) {
    DGLD_ASSIGN_OR_RETURN(impl, load_scripted_model(config));
  } else {
    DGLD_ASSIGN_OR_RETURN(impl, load_builtin_model(config));
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

int Model::dense_maps() const { return impl_->dense_maps(); }

}  // namespace dgld::trainer
