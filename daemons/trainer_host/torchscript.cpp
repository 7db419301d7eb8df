// TorchScript models (docs/models.md): loading a module and checking it
// against the contract, the ScriptedModel that trains it, and where the
// built-in kinds' files are (python/dgld/models scripted at build time).
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
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/custom_class.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/script.h>

#include "common/ops/message_passing.h"
#include "common/ops/torch_library.h"
#include "daemons/trainer_host/model_impl.h"
#include "daemons/trainer_host/training_loop.h"  // first_line
#include "dgld_paths.h"

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
  // The graph executor runs the module's graph as written: its optimising
  // passes decompose addmm (SAGEConv's accumulating products) into mm + add,
  // a full-size pass and a [rows, out] temporary more per layer, and profile
  // and specialise on the batches' shapes, which differ every batch; on the
  // CPU they fuse nothing (docs/performance.md, "The model step by
  // operator"). Process-wide, like LibTorch's own setting.
  jit::setGraphExecutorOptimize(false);
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
  // `builtin_file`: the built-in kind's file it was loaded from (config.kind
  // names it); empty: config.model_file, a user's module.
  ScriptedModel(const ModelConfig& c, jit::Module m, std::string builtin_file = "")
      : Impl(c), m_(std::move(m)), builtin_file_(std::move(builtin_file)) {}

  // Runs the module once on a small made-up batch (eval mode, no gradient):
  // forward's output must be [1, num_classes], and chaining forward_layer
  // must give the same; records each layer's width.
  Status probe() {
    const std::string& path = builtin_file_.empty() ? config.model_file : builtin_file_;
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
      if (uses_edge_types()) {  // every relation on the probe's edges, in turn
        const int64_t rels = std::max<int64_t>(config.num_rels, 1);
        DGLD_RETURN_IF_ERROR(blocks.back()->set_etypes(torch::arange(nd * ns, torch::kInt64).remainder(rels), rels));
      }
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

  // Every call runs on this model's kernels (--kernels): the operators'
  // switch is process-wide, and a benchmark may alternate two models.
  torch::Tensor forward(const std::vector<ops::BlockGraphPtr>& blocks, const torch::Tensor& x) override {
    ops::set_reference_kernels(config.kernels == Kernels::reference);
    c10::impl::GenericList list(block_type());
    list.reserve(blocks.size());
    for (const auto& b : blocks) list.push_back(c10::IValue(b));
    return m_.forward({c10::IValue(std::move(list)), x}).toTensor();
  }

  torch::Tensor forward_layer(int layer, const ops::BlockGraphPtr& b, const torch::Tensor& h_src) override {
    ops::set_reference_kernels(config.kernels == Kernels::reference);
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
    const ModelConfig& c = config;
    if (builtin_file_.empty()) {
      return fmt::format("{} from {} (layers={}, in={}, classes={})", type_name(), c.model_file, c.num_layers,
                         c.in_dim, c.num_classes);
    }
    std::string s = fmt::format("{}(in={}, hidden={}, classes={}, layers={}, dropout={}", c.kind, c.in_dim,
                                c.num_hidden, c.num_classes, c.num_layers, c.dropout);
    if (m_.hasattr("num_heads")) s += fmt::format(", heads={}", c.num_heads);
    if (uses_edge_types()) s += fmt::format(", rels={}, bases={}", c.num_rels, c.num_bases);
    if (c.kernels != Kernels::fused) s += fmt::format(", kernels={}", kernels_name(c.kernels));
    return s + ")";
  }
  int dense_maps() const override {
    return m_.hasattr("dense_maps") && m_.attr("dense_maps").isInt() ? static_cast<int>(m_.attr("dense_maps").toInt())
                                                                     : 1;
  }
  std::string checkpoint_name() const override {
    return builtin_file_.empty() ? "torchscript:" + type_name() : config.kind;
  }

 private:
  bool uses_edge_types() const { return m_.hasattr("uses_edge_types") && m_.attr("uses_edge_types").toBool(); }

  std::string type_name() const { return m_.type()->name() ? m_.type()->name()->qualifiedName() : "module"; }

  jit::Module m_;
  std::string builtin_file_;
  std::vector<int64_t> out_dims_;
  std::vector<torch::Tensor> params_;
};

// ---------------------------------------------------------------- the built-in models

namespace fs = std::filesystem;

// <kind>-<layers>.pt: the kind and the depth, or nullopt for another name.
std::optional<std::pair<std::string, int>> model_file_name(const std::string& name) {
  const auto dash = name.rfind('-');
  if (dash == std::string::npos || dash == 0 || name.size() < dash + 5 || name.substr(name.size() - 3) != ".pt") {
    return std::nullopt;
  }
  const std::string depth = name.substr(dash + 1, name.size() - 3 - dash - 1);
  if (depth.empty() || depth.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::make_pair(name.substr(0, dash), std::stoi(depth));
}

bool holds_models(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (model_file_name(e.path().filename().string())) return true;
  }
  return false;
}

std::string canonical_kind(std::string_view kind) { return kind == "graphsage" ? "sage" : std::string(kind); }

}  // namespace

std::string builtin_model_dir() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("DGLD_MODEL_DIR"); env && *env) dirs.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / "models");
  }
  dirs.emplace_back(DGLD_INSTALL_MODEL_DIR);  // the installed package's (meson's prefix and datadir)
  if (!ec) dirs.push_back(exe.parent_path().parent_path() / "share" / "dgld" / "models");
#ifdef DGLD_BUILD_MODEL_DIR
  dirs.emplace_back(DGLD_BUILD_MODEL_DIR);
#endif
  for (const auto& d : dirs) {
    if (holds_models(d)) return d.string();
  }
  return "";
}

std::vector<std::string> builtin_model_kinds() {
  std::set<std::string> kinds;
  const std::string dir = builtin_model_dir();
  std::error_code ec;
  if (!dir.empty()) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (auto k = model_file_name(e.path().filename().string())) kinds.insert(k->first);
    }
  }
  return {kinds.begin(), kinds.end()};
}

Result<std::string> builtin_model_file(std::string_view kind_name, int layers) {
  const std::string dir = builtin_model_dir();
  if (dir.empty()) {
    return not_found("no built-in model files (python/dgld/models scripted at build time into <kind>-<layers>.pt): "
                     "none in $DGLD_MODEL_DIR, in 'models' beside this program, in " DGLD_INSTALL_MODEL_DIR
                     " or in ../share/dgld/models; build dgld with its Python package (or install the dgld "
                     "package), or give --model-file");
  }
  const std::string kind = canonical_kind(kind_name);
  const fs::path file = fs::path(dir) / fmt::format("{}-{}.pt", kind, layers);
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) return file.string();
  const auto kinds = builtin_model_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
    return invalid_argument(fmt::format("unknown model '{}' (known: {})", kind_name, fmt::join(kinds, ", ")));
  }
  std::vector<int> depths;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    auto k = model_file_name(e.path().filename().string());
    if (k && k->first == kind) depths.push_back(k->second);
  }
  std::sort(depths.begin(), depths.end());
  return invalid_argument(fmt::format("the built-in {} model has {} layers ({} in {}), not {}: a deeper model is a "
                                      "--model-file (docs/models.md)",
                                      kind, fmt::join(depths, ", "), kind, dir, layers));
}

Result<ModelKindInfo> builtin_model_info(std::string_view kind) {
  DGLD_ASSIGN_OR_RETURN(const std::string file, builtin_model_file(kind, 1));
  return model_info(kind, file);
}

Result<ModelKindInfo> model_info(std::string_view kind, const std::string& model_file) {
  if (model_file.empty()) return builtin_model_info(kind);
  const std::string& file = model_file;
  try {
    jit::Module m = jit::load(file);
    ModelKindInfo info;
    info.uses_edge_types = m.hasattr("uses_edge_types") && m.attr("uses_edge_types").toBool();
    return info;
  } catch (const std::exception& e) {
    return invalid_argument(fmt::format("{}: {}", file, torch_error_message(e)));
  }
}

namespace {
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

Result<std::unique_ptr<Model::Impl>> load_builtin_model(const ModelConfig& config) {
  DGLD_ASSIGN_OR_RETURN(const std::string file, builtin_model_file(config.kind, config.num_layers));
  try {
    DGLD_ASSIGN_OR_RETURN(auto m, open_module(file));
    // Sized for this graph: every weight drawn from the global generator, in
    // the order the Python constructor draws them.
    m.run_method("configure", config.in_dim, config.num_hidden, config.num_classes, config.dropout,
                 static_cast<int64_t>(config.num_heads), static_cast<int64_t>(config.num_rels),
                 static_cast<int64_t>(config.num_bases));
    ModelConfig c = config;
    c.kind = canonical_kind(config.kind);
    auto model = std::make_unique<ScriptedModel>(c, std::move(m), file);
    DGLD_RETURN_IF_ERROR(model->probe());
    return std::unique_ptr<Model::Impl>(std::move(model));
  } catch (const std::exception& e) {
    return invalid_argument(fmt::format("the built-in {} model ({}): {}", config.kind, file, torch_error_message(e)));
  }
}

}  // namespace dgld::trainer
