// The training loop: every node's outputs into --output-dir (loop.h).

#include <cmath>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "common/buffer_pool.h"
#include "common/file_util.h"
#include "daemons/trainer_host/loop.h"
#include "daemons/trainer_host/progress.h"

namespace dgld::trainer {

Result<std::vector<int64_t>> Loop::new_ids_by_original_id() {
  const int64_t n = b_.num_nodes();
  std::vector<int64_t> orig(static_cast<size_t>(n));
  constexpr int64_t kChunk = 1 << 20;
  for (int64_t start = 0; start < n; start += kChunk) {
    DGLD_RETURN_IF_ERROR(b_.original_node_ids(start, std::min(kChunk, n - start), orig.data() + start)
                             .with_context("reading the nodes' original ids"));
  }
  std::vector<int64_t> new_of_orig(static_cast<size_t>(n), -1);
  for (int64_t v = 0; v < n; ++v) {
    const int64_t o = orig[static_cast<size_t>(v)];
    if (o < 0 || o >= n || new_of_orig[static_cast<size_t>(o)] >= 0) {
      return corruption(fmt::format("the partitions' original node ids are not a permutation of 0..{}: node {} has "
                                    "original id {}{}",
                                    n - 1, v, o, o >= 0 && o < n ? " twice" : ""));
    }
    new_of_orig[static_cast<size_t>(o)] = v;
  }
  return new_of_orig;
}

Status Loop::write_layer(int layer, int64_t width, const RowReader& read, const std::vector<int64_t>& new_of_orig) {
  const int L = model_->num_layers();
  const bool last = layer == L - 1;
  const std::string stem = last ? (link_ ? "embeddings" : "logits") : fmt::format("embeddings-{}", layer);
  const std::filesystem::path dir(c_.output_dir);
  const auto path = dir / (stem + ".npy");
  const int64_t n = static_cast<int64_t>(new_of_orig.size());
  AtomicFile f;
  DGLD_RETURN_IF_ERROR(f.open(path));
  const std::vector<int64_t> shape{n, width};
  DGLD_RETURN_IF_ERROR(f.write(npy_header("<f4", shape)));
  std::vector<float> rows;
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(c_.batch_size_eval, (int64_t{64} << 20) / (4 * std::max<int64_t>(1, width))));
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    rows.resize(static_cast<size_t>(len * width));
    DGLD_RETURN_IF_ERROR(read(std::span<const int64_t>(new_of_orig.data() + start, static_cast<size_t>(len)),
                              rows.data())
                             .with_context(fmt::format("reading layer {}'s output", layer)));
    DGLD_RETURN_IF_ERROR(f.write(std::string_view(reinterpret_cast<const char*>(rows.data()), rows.size() * 4)));
  }
  DGLD_RETURN_IF_ERROR(f.commit());
  const nlohmann::json meta = {{"file", path.filename().string()},
                               {"shape", shape},
                               {"dtype", "float32"},
                               {"order", "original node id: row i is node i of the input graph"},
                               {"output", last && !link_ ? "logits" : "embeddings"},
                               {"layer", layer},
                               {"num_layers", L},
                               {"model", model_->describe()},
                               {"model_file", c_.model_file},
                               {"graph_name", b_.graph_name()},
                               {"num_nodes", n},
                               {"num_trainers", b_.world_size()},
                               {"feature", c_.feature}};
  const auto meta_path = dir / (stem + ".json");
  DGLD_RETURN_IF_ERROR(write_file_atomic(meta_path, meta.dump(2) + "\n"));
  r_.output_files.push_back(path.string());
  r_.output_files.push_back(meta_path.string());
  log_->info("wrote layer {}'s output for {} nodes ({} x {} float32) to {}", layer, n, n, width, path.string());
  return Status::ok();
}

Status Loop::write_outputs() {
  const auto t0 = Clock::now();
  const int L = model_->num_layers();
  LayerwiseRequest request;
  if (c_.embeddings_layer >= 0 && c_.embeddings_layer != L - 1) request.keep.push_back(c_.embeddings_layer);
  request.keep.push_back(L - 1);
  std::vector<int64_t> new_of_orig;
  request.on_kept = [&](int layer, int64_t width, const RowReader& read) -> Status {
    if (new_of_orig.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(c_.output_dir, ec);
      if (ec) return io_error(fmt::format("--output-dir {}: {}", c_.output_dir, ec.message()));
      DGLD_ASSIGN_OR_RETURN(new_of_orig, new_ids_by_original_id());
    }
    return write_layer(layer, width, read, new_of_orig);
  };
  auto counts = layerwise(request);
  if (!counts.is_ok()) return counts.status().with_context("offline inference");
  r_.inference_time_s = seconds_since(t0);
  if (c_.infer) {
    r_.val_acc = counts->val_total > 0 ? static_cast<double>(counts->val_correct) / counts->val_total : 0.0;
    r_.test_acc = counts->test_total > 0 ? static_cast<double>(counts->test_correct) / counts->test_total : 0.0;
  }
  log_->info("offline inference over {} nodes in {:.2f} s (val acc {:.4f}, test acc {:.4f})", b_.num_nodes(),
             r_.inference_time_s,
             counts->val_total > 0 ? static_cast<double>(counts->val_correct) / counts->val_total : 0.0,
             counts->test_total > 0 ? static_cast<double>(counts->test_correct) / counts->test_total : 0.0);
  return Status::ok();
}

}  // namespace dgld::trainer
