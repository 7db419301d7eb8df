#include "daemons/trainer_host/eval_chunks.h"

#include <algorithm>

#include <fmt/format.h>

#include "daemons/trainer_host/model.h"
#include "daemons/trainer_host/model_impl.h"

namespace dgld::trainer {

int64_t eval_chunk_bytes(const EvalLayerWidths& w, int64_t e, int64_t s, int64_t d) {
  int64_t bytes = e * kEvalEdgeBytes + s * 4 * w.in * 2 + d * 4 * (w.in + 2 * w.out);
  if (w.edge_messages) bytes += e * 4 * std::max(w.in, w.out);
  return bytes;
}

EvalChunker::EvalChunker(std::span<const int64_t> edges, EvalLayerWidths widths, int64_t budget_bytes,
                         int64_t max_nodes)
    : edges_(edges), w_(widths), budget_(budget_bytes), max_nodes_(std::max<int64_t>(1, max_nodes)) {}

EvalChunker::Need EvalChunker::smallest_budget(std::span<const int64_t> nodes, std::span<const int64_t> edges,
                                                const std::vector<EvalLayerWidths>& layers) {
  Need need;
  if (edges.empty()) return need;
  // The node with the most in-edges needs the most in every layer.
  const size_t v = static_cast<size_t>(std::max_element(edges.begin(), edges.end()) - edges.begin());
  need.node = v < nodes.size() ? nodes[v] : -1;
  need.in_edges = edges[v];
  for (size_t l = 0; l < layers.size(); ++l) {
    const int64_t b = eval_chunk_bytes(layers[l], edges[v], edges[v] + 1, 1);
    if (b > need.bytes) need.bytes = b, need.layer = static_cast<int>(l);
  }
  return need;
}

Status EvalChunker::check_budget(const Need& need, int64_t budget_bytes) {
  if (need.bytes <= budget_bytes) return Status::ok();
  const int64_t mib = (need.bytes + (1 << 20) - 1) >> 20;
  const std::string who = need.node >= 0 ? fmt::format("node {}'s neighbourhood alone ({} in-edges: {:.1f} MiB in "
                                                        "layer {})",
                                                        need.node, need.in_edges,
                                                        static_cast<double>(need.bytes) / (1 << 20), need.layer)
                                         : std::string("another trainer's largest neighbourhood");
  return invalid_argument(fmt::format("--eval-memory-mb {}: too small for {} in layer-wise evaluation; at least {} MiB",
                                      budget_bytes >> 20, who, mib));
}

bool EvalChunker::next(size_t& begin, size_t& end) {
  if (begin_ >= edges_.size()) return false;
  // Add nodes while the estimate stays within the budget (at least one node).
  int64_t e = 0, d = 0;
  size_t stop = begin_;
  const size_t most = std::min<size_t>(edges_.size() - begin_, cap_ > 0 ? cap_ : static_cast<size_t>(max_nodes_));
  while (stop - begin_ < most) {
    const int64_t e2 = e + edges_[stop], d2 = d + 1;
    const auto s2 = static_cast<int64_t>(sources_per_slot_ * static_cast<double>(e2 + d2)) + 1;
    if (stop > begin_ && eval_chunk_bytes(w_, e2, std::min(s2, e2 + d2), d2) > budget_) break;
    e = e2, d = d2;
    ++stop;
  }
  end_ = stop;
  begin = begin_, end = end_;
  return true;
}

bool EvalChunker::accept(int64_t edges, int64_t sources, int64_t dests) {
  const int64_t bytes = eval_chunk_bytes(w_, edges, sources, dests);
  const size_t n = end_ - begin_;
  if (bytes > budget_ && n > 1) {
    cap_ = n / 2;
    ++splits_;
    return false;
  }
  // The share of distinct sources in this chunk, with a margin, for the next.
  const double seen = static_cast<double>(sources) / static_cast<double>(std::max<int64_t>(1, edges + dests));
  sources_per_slot_ = std::min(1.0, seen * 1.1);
  cap_ = 0;
  largest_ = std::max(largest_, bytes);
  ++chunks_;
  begin_ = end_;
  return true;
}

void EvalChunkStats::record(const EvalChunker& c) {
  chunks += c.chunks();
  splits += c.splits();
  largest_bytes = std::max(largest_bytes, c.largest_bytes());
}

std::string EvalChunkStats::describe(int64_t budget_mb) const {
  return fmt::format("{} chunks ({} split again), the largest working set {:.1f} MiB of --eval-memory-mb {}", chunks,
                     splits, static_cast<double>(largest_bytes) / (1 << 20), budget_mb);
}

Status for_each_eval_chunk(EvalChunker& chunker, std::span<const int64_t> nodes, const SampleChunk& sample,
                           const ComputeChunk& compute) {
  size_t begin = 0, end = 0;
  while (chunker.next(begin, end)) {
    const auto chunk = nodes.subspan(begin, end - begin);
    DGLD_ASSIGN_OR_RETURN(MiniBatch batch, sample(chunk));
    const Block& b = batch.blocks.at(0);
    if (!chunker.accept(b.num_edges(), b.num_src(), b.num_dst())) continue;
    DGLD_RETURN_IF_ERROR(compute(chunk, batch));
  }
  return Status::ok();
}

std::vector<int64_t> eval_in_edges(std::vector<int64_t> in_degrees, int64_t eval_fan_out, int num_etypes) {
  if (eval_fan_out >= 0) {
    const int64_t cap = eval_fan_out * std::max(1, num_etypes);
    for (int64_t& d : in_degrees) d = std::min(d, cap);
  }
  return in_degrees;
}

std::vector<EvalLayerWidths> eval_layer_widths(const Model& model) {
  std::vector<EvalLayerWidths> out;
  int64_t in = model.config().in_dim;
  for (int l = 0; l < model.num_layers(); ++l) {
    const int64_t w = model.impl().layer_out_dim(l);
    out.push_back({in, w, model.config().kernels == Kernels::reference});
    in = w;
  }
  return out;
}

}  // namespace dgld::trainer
