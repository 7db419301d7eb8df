// TorchScript models (docs/models.md): loading a user's module and checking
// it against the contract, the ScriptedModel that trains it, and the export
// of the built-in models as TorchScript modules of the same contract.
//
// The contract, for blocks of type torch.classes.dgld.Block:
//   forward(self, blocks: List[Block], x: Tensor) -> Tensor        logits
//   forward_layer(self, i: int, block: Block, h: Tensor) -> Tensor layer i
//   num_layers: int
// with forward equal to chaining forward_layer in eval mode.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/custom_class.h>
#include <torch/script.h>

#include "common/ops/torch_library.h"
#include "daemons/trainer_host/model_impl.h"
#include "daemons/trainer_host/training_loop.h"  // first_line

namespace dgld::trainer {

namespace {

namespace jit = torch::jit;

constexpr const char* kBlockType = "__torch__.torch.classes.dgld.Block";
constexpr const char* kContract =
    "forward(self, blocks: List[torch.classes.dgld.Block], x: Tensor) -> Tensor, "
    "forward_layer(self, i: int, block: torch.classes.dgld.Block, h: Tensor) -> Tensor and an int attribute "
    "num_layers (docs/models.md)";

}  // namespace

std::string torch_error_message(const std::exception& e) {
  const auto* c10e = dynamic_cast<const c10::Error*>(&e);
  const std::string text = c10e ? c10e->what_without_backtrace() : e.what();
  if (text.find("TorchScript interpreter") == std::string::npos) return first_line(text);
  // The interpreter's trace ends with the error itself ("RuntimeError: ...").
  size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return text;
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
}

namespace {

std::string schema_string(const c10::FunctionSchema& schema) {
  std::ostringstream os;
  os << schema;
  return os.str();
}

c10::TypePtr block_type() {
  ops::torch_library_namespace();  // the class is registered when the ops library is linked in
  return torch::getCustomClass(kBlockType);
}

// Writes `m` to a temporary name beside `path`, then renames it: a crash
// leaves no partial file under the final name.
Status save_module_atomic(const jit::Module& m, const std::string& path) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  try {
    m.save(tmp);
  } catch (const c10::Error& e) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return io_error(fmt::format("writing the model to {}: {}", tmp, first_line(e.what_without_backtrace())));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return io_error(fmt::format("renaming {} to {}: {}", tmp, path, ec.message()));
  }
  return Status::ok();
}

// ---------------------------------------------------------------- loading and checking

Status check_method(const jit::Module& m, const std::string& path, const std::string& name,
                    const std::vector<c10::TypePtr>& arg_types) {
  auto method = m.find_method(name);
  if (!method) return invalid_argument(fmt::format("{}: the module has no method '{}'; a model needs {}", path, name, kContract));
  const c10::FunctionSchema& schema = method->function().getSchema();
  const auto& args = schema.arguments();  // args[0] is self
  bool ok = args.size() >= arg_types.size() + 1 && schema.returns().size() == 1 &&
            schema.returns()[0].type()->kind() == c10::TypeKind::TensorType;
  for (size_t i = 0; ok && i < arg_types.size(); ++i) ok = *args[i + 1].type() == *arg_types[i];
  for (size_t i = arg_types.size() + 1; ok && i < args.size(); ++i) ok = args[i].default_value().has_value();
  if (!ok) {
    return invalid_argument(fmt::format("{}: '{}' has the signature {}; a model needs {}", path, name,
                                        schema_string(schema), kContract));
  }
  return Status::ok();
}

// The module at `path`, checked as far as possible without the graph.
Result<jit::Module> open_module(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return not_found(fmt::format("model file {} does not exist or is not a file", path));
  }
  jit::Module m;
  try {
    m = jit::load(path);
  } catch (const c10::Error& e) {
    return invalid_argument(fmt::format("{} is not a TorchScript module ({}); write the model with "
                                        "torch.jit.save(torch.jit.script(model), path), after import dgld",
                                        path, first_line(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    return invalid_argument(fmt::format("{} is not a TorchScript module ({})", path, first_line(e.what())));
  }
  const auto block = block_type();
  DGLD_RETURN_IF_ERROR(check_method(m, path, "forward", {c10::ListType::create(block), c10::TensorType::get()}));
  DGLD_RETURN_IF_ERROR(
      check_method(m, path, "forward_layer", {c10::IntType::get(), block, c10::TensorType::get()}));
  if (!m.hasattr("num_layers") || !m.attr("num_layers").isInt()) {
    return invalid_argument(fmt::format("{}: the module has no int attribute 'num_layers'; a model needs {}", path,
                                        kContract));
  }
  if (m.attr("num_layers").toInt() < 1) {
    return invalid_argument(fmt::format("{}: num_layers is {}, must be >= 1", path, m.attr("num_layers").toInt()));
  }
  for (const auto& p : m.named_parameters(/*recurse=*/true)) {
    if (!p.value.is_floating_point()) continue;
    if (!torch::isfinite(p.value).all().item<bool>()) {
      return invalid_argument(fmt::format("{}: parameter '{}' holds NaN or infinite values", path, p.name));
    }
  }
  return m;
}

class ScriptedModel : public Model::Impl {
 public:
  ScriptedModel(const ModelConfig& c, jit::Module m) : Impl(c), m_(std::move(m)) {}

  // Runs the module once on a small made-up batch (eval mode, no gradient):
  // forward's output must be [1, num_classes], and chaining forward_layer
  // must give the same; records each layer's width.
  Status probe() {
    const std::string& path = config.model_file;
    const int L = static_cast<int>(m_.attr("num_layers").toInt());
    if (L != config.num_layers) {
      return invalid_argument(fmt::format("{}: the model has num_layers = {}, but this run samples {} layer(s) "
                                          "(--num-layers / --fan-out must match the model)",
                                          path, L, config.num_layers));
    }
    // Block l: L - l dst nodes, L - l + 1 src nodes, every src -> every dst.
    std::vector<ops::BlockGraphPtr> blocks;
    for (int l = 0; l < L; ++l) {
      const int64_t nd = L - l, ns = nd + 1;
      auto indptr = torch::arange(0, (nd + 1) * ns, ns, torch::kInt64);
      auto indices = torch::arange(ns, torch::kInt64).repeat({nd});
      blocks.push_back(c10::make_intrusive<ops::BlockGraph>(indptr, indices, ns));
    }
    // Deterministic input (no draw from the global generator).
    auto x = torch::sin(torch::arange(static_cast<double>((L + 1) * config.in_dim), torch::kFloat32))
                 .view({L + 1, config.in_dim});
    torch::NoGradGuard no_grad;
    set_training(false);
    // Back to training mode on every way out of the probe.
    struct Restore {
      ScriptedModel* m;
      ~Restore() { m->set_training(true); }
    } restore{this};
    torch::Tensor out, layered = x;
    try {
      out = forward(blocks, x);
    } catch (const std::exception& e) {
      return invalid_argument(fmt::format("{}: forward failed on a probe batch with {}-dim input features (the "
                                          "graph's input width): {}",
                                          path, config.in_dim, torch_error_message(e)));
    }
    if (out.dim() != 2 || out.size(0) != 1 || out.size(1) != config.num_classes) {
      return invalid_argument(fmt::format("{}: forward returned a [{}] tensor for 1 seed; it must return [1, {}] "
                                          "(one logit per class of the graph's labels)",
                                          path, fmt::join(out.sizes(), ", "), config.num_classes));
    }
    out_dims_.clear();
    for (int l = 0; l < L; ++l) {
      try {
        layered = forward_layer(l, blocks[static_cast<size_t>(l)], layered);
      } catch (const std::exception& e) {
        return invalid_argument(fmt::format("{}: forward_layer({}) failed on the probe batch: {}", path, l,
                                            torch_error_message(e)));
      }
      if (layered.dim() != 2 || layered.size(0) != L - l) {
        return invalid_argument(fmt::format("{}: forward_layer({}) returned a [{}] tensor for {} dst nodes; it must "
                                            "return one row per dst node",
                                            path, l, fmt::join(layered.sizes(), ", "), L - l));
      }
      out_dims_.push_back(layered.size(1));
    }
    const double diff = (layered - out).abs().max().item<double>();
    if (!(diff <= 1e-4 * (1.0 + out.abs().max().item<double>()))) {
      return invalid_argument(fmt::format("{}: chaining forward_layer over the layers differs from forward (max "
                                          "difference {:.3g} in eval mode); layer-wise inference would not compute "
                                          "the model",
                                          path, diff));
    }
    for (const auto& p : m_.parameters(/*recurse=*/true)) {
      if (p.requires_grad()) params_.push_back(p);
    }
    return Status::ok();
  }

  std::vector<torch::Tensor> parameters() override { return params_; }
  void set_training(bool on) override { m_.train(on); }

  torch::Tensor forward(const std::vector<ops::BlockGraphPtr>& blocks, const torch::Tensor& x) override {
    c10::impl::GenericList list(block_type());
    list.reserve(blocks.size());
    for (const auto& b : blocks) list.push_back(c10::IValue(b));
    return m_.forward({c10::IValue(std::move(list)), x}).toTensor();
  }

  torch::Tensor forward_layer(int layer, const ops::BlockGraphPtr& b, const torch::Tensor& h_src) override {
    return m_.get_method("forward_layer")({c10::IValue(static_cast<int64_t>(layer)), c10::IValue(b), h_src})
        .toTensor();
  }

  int64_t layer_out_dim(int layer) const override { return out_dims_.at(static_cast<size_t>(layer)); }

  void save_state(torch::serialize::OutputArchive& archive) override {
    for (const auto& p : m_.named_parameters(/*recurse=*/true)) archive.write(p.name, p.value);
    for (const auto& b : m_.named_buffers(/*recurse=*/true)) archive.write(b.name, b.value, /*is_buffer=*/true);
  }

  void load_state(torch::serialize::InputArchive& archive) override {
    for (const auto& p : m_.named_parameters(/*recurse=*/true)) {
      torch::Tensor t = p.value;
      archive.read(p.name, t);
    }
    for (const auto& b : m_.named_buffers(/*recurse=*/true)) {
      torch::Tensor t = b.value;
      archive.read(b.name, t, /*is_buffer=*/true);
    }
  }

  Status save_torchscript(const std::string& path) override { return save_module_atomic(m_, path); }

  std::string describe() const override {
    return fmt::format("{} from {} (layers={}, in={}, classes={})", type_name(), config.model_file,
                       config.num_layers, config.in_dim, config.num_classes);
  }
  std::string checkpoint_name() const override { return "torchscript:" + type_name(); }

 private:
  std::string type_name() const { return m_.type()->name() ? m_.type()->name()->qualifiedName() : "module"; }

  jit::Module m_;
  std::vector<int64_t> out_dims_;
  std::vector<torch::Tensor> params_;
};

// ---------------------------------------------------------------- the built-in models as TorchScript

// Resolves `dgld` to the dgld operator namespace and `Block` to the block
// class in the sources below (jit's native resolver knows neither).
struct DgldResolver : jit::Resolver {
  std::shared_ptr<jit::SugaredValue> resolveValue(const std::string& name, jit::GraphFunction& fn,
                                                  const jit::SourceRange& loc) override {
    if (name == "dgld") return std::make_shared<jit::BuiltinModule>("dgld");
    return jit::nativeResolver()->resolveValue(name, fn, loc);
  }
  c10::TypePtr resolveType(const std::string& name, const jit::SourceRange& loc) override {
    if (name == "Block") return block_type();
    return jit::nativeResolver()->resolveType(name, loc);
  }
};

// The layers' code: what model.cpp's SageConvImpl, GraphConvImpl and
// GatConvImpl compute (tests/python/test_model_files.py checks that a saved
// model gives trainer-host's outputs).
constexpr const char* kLinearSource = R"(
def forward(self, x: Tensor) -> Tensor:
    return torch.linear(x, self.weight)
)";

constexpr const char* kSageSource = R"(
def forward(self, block: Block, h_src: Tensor) -> Tensor:
    h_dst = h_src[:block.num_dst_nodes()]
    if dgld.project_before_aggregating(block, self.in_feats, self.out_feats, h_src.requires_grad, False):
        h_neigh = dgld.copy_u_reduce(block, self.fc_neigh.forward(h_src), "mean", False)
    else:
        h_neigh = self.fc_neigh.forward(dgld.copy_u_reduce(block, h_src, "mean", False))
    return self.fc_self.forward(h_dst) + h_neigh + self.bias
)";

constexpr const char* kGcnSource = R"(
def forward(self, block: Block, h_src: Tensor) -> Tensor:
    nd = block.num_dst_nodes()
    out_deg = block.out_degrees().float()
    out_deg.narrow(0, 0, nd).add_(1.0)
    norm_src = out_deg.clamp_min(1.0).pow(-0.5).unsqueeze(1)
    norm_dst = (block.in_degrees().float() + 1.0).pow(-0.5).unsqueeze(1)
    if dgld.project_before_aggregating(block, self.in_feats, self.out_feats, h_src.requires_grad, True):
        rst = dgld.copy_u_reduce(block, torch.matmul(h_src, self.weight) * norm_src, "sum", True)
    else:
        rst = torch.matmul(dgld.copy_u_reduce(block, h_src * norm_src, "sum", True), self.weight)
    return rst * norm_dst + self.bias
)";

constexpr const char* kGatSource = R"(
def forward(self, block: Block, h_src: Tensor) -> Tensor:
    z = self.fc.forward(h_src).view(-1, self.num_heads, self.out_feats)
    out = dgld.gat_aggregate(block, z, self.attn_l, self.attn_r, 0.2)
    return out + self.bias.view(1, self.num_heads, self.out_feats)
)";

// One layer of a built-in model as the export writes it: its parameters and
// submodules (from the trained model's parameters) before its forward.
struct LayerExport {
  jit::Module& layer;
  const std::function<void(const std::string&)>& linear;  // a Linear submodule `name`
  const std::function<void(const std::string&)>& param;   // the layer's parameter `name`
  const ModelConfig& c;
};

// Per built-in kind, what the export writes for a layer and its TorchScript
// forward (the kinds of model.cpp's table that can be exported).
struct ExportRow {
  ModelKind kind;
  const char* source;
  void (*fill)(const LayerExport& e);
};

const ExportRow kExports[] = {
    {ModelKind::sage, kSageSource,
     [](const LayerExport& e) {
       e.linear("fc_self");
       e.linear("fc_neigh");
       e.param("bias");
     }},
    {ModelKind::gcn, kGcnSource,
     [](const LayerExport& e) {
       e.param("weight");
       e.param("bias");
     }},
    {ModelKind::gat, kGatSource,
     [](const LayerExport& e) {
       e.layer.register_attribute("num_heads", c10::IntType::get(), static_cast<int64_t>(e.c.num_heads));
       e.linear("fc");
       e.param("attn_l");
       e.param("attn_r");
       e.param("bias");
     }},
};

const ExportRow* export_row(ModelKind kind) {
  for (const ExportRow& r : kExports) {
    if (r.kind == kind) return &r;
  }
  return nullptr;
}

jit::Module make_module(const std::string& name) {
  jit::Module m("__torch__.dgld.builtin." + name);
  m.register_attribute("training", c10::BoolType::get(), true);
  return m;
}

void add_parameter(jit::Module& m, const std::string& name, const torch::Tensor& value) {
  m.register_parameter(name, value.detach().clone().set_requires_grad(true), /*is_buffer=*/false);
}

// The GnnNet stack's forward_layer and forward for `c`.
std::string stack_source(const ModelConfig& c) {
  const int L = c.num_layers;
  std::string s = "def forward_layer(self, i: int, block: Block, h: Tensor) -> Tensor:\n";
  s += fmt::format("    assert 0 <= i and i < {}, \"forward_layer: no such layer\"\n", L);
  for (int l = 0; l < L; ++l) {
    s += fmt::format("    {} i == {}:\n        h = self.layer{}.forward(block, h)\n", l == 0 ? "if" : "elif", l, l);
  }
  const bool gat = c.kind == ModelKind::gat;
  s += fmt::format("    if i == {}:\n", L - 1);
  s += gat ? "        h = h.mean(1)\n" : "        pass\n";
  s += "    else:\n";
  s += gat ? "        h = torch.elu(h.flatten(1))\n" : "        h = torch.relu(h)\n";
  s += "        h = torch.dropout(h, self.dropout, self.training)\n";
  s += "    return h\n\n";
  s += "def forward(self, blocks: List[Block], x: Tensor) -> Tensor:\n";
  s += "    h = x\n";
  s += fmt::format("    for i in range({}):\n", L);
  s += "        h = self.forward_layer(i, blocks[i], h)\n";
  s += "    return h\n";
  return s;
}

}  // namespace

Status check_model_file(const std::string& path) {
  try {
    DGLD_ASSIGN_OR_RETURN(auto m, open_module(path));
    (void)m;
    return Status::ok();
  } catch (const std::exception& e) {
    return invalid_argument(fmt::format("{}: {}", path, torch_error_message(e)));
  }
}

Result<std::unique_ptr<Model::Impl>> load_scripted_model(const ModelConfig& config) {
  try {
    DGLD_ASSIGN_OR_RETURN(auto m, open_module(config.model_file));
    auto model = std::make_unique<ScriptedModel>(config, std::move(m));
    DGLD_RETURN_IF_ERROR(model->probe());
    return std::unique_ptr<Model::Impl>(std::move(model));
  } catch (const std::exception& e) {
    return invalid_argument(fmt::format("{}: {}", config.model_file, torch_error_message(e)));
  }
}

Status BuiltinModel::save_torchscript(const std::string& path) {
  const ModelConfig& c = config;
  const std::string kind = model_kind_name(c.kind);
  const ExportRow* row = export_row(c.kind);
  if (row == nullptr) return invalid_argument(fmt::format("--save-model is not supported for {} yet", kind));
  auto resolver = std::make_shared<DgldResolver>();
  jit::Module top = make_module(kind);
  try {
    std::map<std::string, torch::Tensor> params;
    for (const auto& p : net->named_parameters()) params[p.key()] = p.value();
    for (int l = 0; l < c.num_layers; ++l) {
      const std::string prefix = fmt::format("layer{}.", l);
      jit::Module layer = make_module(fmt::format("{}.Layer{}", kind, l));
      const int64_t in = l == 0 ? c.in_dim : c.kind == ModelKind::gat ? c.num_hidden * c.num_heads : c.num_hidden;
      const int64_t out = l == c.num_layers - 1 ? c.num_classes : c.num_hidden;
      layer.register_attribute("in_feats", c10::IntType::get(), in);
      layer.register_attribute("out_feats", c10::IntType::get(), out);
      const std::function<void(const std::string&)> linear = [&](const std::string& name) {
        jit::Module fc = make_module(fmt::format("{}.Layer{}.{}", kind, l, name));
        add_parameter(fc, "weight", params.at(prefix + name + ".weight"));
        fc.define(kLinearSource, resolver);
        layer.register_module(name, fc);
      };
      const std::function<void(const std::string&)> param = [&](const std::string& name) {
        add_parameter(layer, name, params.at(prefix + name));
      };
      row->fill(LayerExport{layer, linear, param, c});
      layer.define(row->source, resolver);
      top.register_module(fmt::format("layer{}", l), layer);
    }
    top.register_attribute("num_layers", c10::IntType::get(), static_cast<int64_t>(c.num_layers));
    top.register_attribute("dropout", c10::FloatType::get(), c.dropout);
    top.register_attribute("in_feats", c10::IntType::get(), c.in_dim);
    top.register_attribute("n_classes", c10::IntType::get(), c.num_classes);
    top.register_attribute("dgld_model", c10::StringType::get(), describe());
    top.define(stack_source(c), resolver);
    top.train(net->is_training());
  } catch (const c10::Error& e) {
    return internal_error(fmt::format("exporting the {} model as TorchScript: {}", kind,
                                      first_line(e.what_without_backtrace())));
  }
  return save_module_atomic(top, path);
}

}  // namespace dgld::trainer
