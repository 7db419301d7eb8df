#pragma once
// Layer-wise evaluation in bounded memory: which nodes go into each chunk of
// a layer so that the chunk's working set stays within --eval-memory-mb.
// Torch-free; both backends (local_trainer.cpp, dist_evaluation.cpp) use it.
//
// A chunk's working set, in bytes, for E sampled in-edges, S input (source)
// rows and D output (destination) rows of a layer from `in` to `out` floats:
//   E * kEvalEdgeBytes                 the sampler's edges and the block's CSR
//   + E * 4 * max(in, out)             messages, only with --kernels reference
//   + S * 4 * in * 2                   the rows pulled and the layer's input tensor
//   + D * 4 * (in + 2 * out)           the aggregate, the projections, the output
// E and D are known from the nodes' in-degrees before sampling; S (the
// distinct sources) only after. A chunk is planned with S estimated from the
// chunks before it (at first S = E + D, its largest value), then checked once
// sampled: one found over the budget is split in half and sampled again.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/sampling/multi_layer_sampler.h"
#include "common/status.h"

namespace dgld::trainer {

inline constexpr int64_t kEvalEdgeBytes = 64;

struct EvalLayerWidths {
  int64_t in = 0, out = 0;
  bool edge_messages = false;  // --kernels reference materialises a message per edge
};

// Bytes of a chunk of e edges, s source rows and d destination rows.
int64_t eval_chunk_bytes(const EvalLayerWidths& w, int64_t e, int64_t s, int64_t d);

// The chunks of one layer over `nodes` (their sampled in-degrees in
// `edges`: the in-degree, capped by the evaluation fanout), each within
// `budget_bytes` and at most `max_nodes` nodes.
class EvalChunker {
 public:
  EvalChunker(std::span<const int64_t> edges, EvalLayerWidths widths, int64_t budget_bytes, int64_t max_nodes);

  // The smallest budget that holds the neighbourhood of each of `nodes`
  // alone in every layer (one node's chunk), and the node that needs it.
  struct Need {
    int64_t bytes = 0, node = -1, in_edges = 0;
    int layer = 0;
  };
  static Need smallest_budget(std::span<const int64_t> nodes, std::span<const int64_t> edges,
                              const std::vector<EvalLayerWidths>& layers);
  // The error naming --eval-memory-mb and that minimum when `budget_bytes`
  // is below it (`need` may be another trainer's, its node then unknown).
  static Status check_budget(const Need& need, int64_t budget_bytes);

  // The next chunk, [begin, end) of the nodes; false when the layer is done.
  bool next(size_t& begin, size_t& end);
  // After sampling the chunk next() gave: true when it fits (then the next
  // call moves on); false when it does not, and the next call gives its
  // first half.
  bool accept(int64_t edges, int64_t sources, int64_t dests);

  int64_t chunks() const { return chunks_; }
  int64_t splits() const { return splits_; }
  int64_t largest_bytes() const { return largest_; }

 private:
  std::span<const int64_t> edges_;
  EvalLayerWidths w_;
  int64_t budget_, max_nodes_;
  size_t begin_ = 0, end_ = 0;
  size_t cap_ = 0;               // after a split: the most nodes the next chunk may take
  double sources_per_slot_ = 1;  // S / (E + D) seen so far (1: nothing seen yet)
  int64_t chunks_ = 0, splits_ = 0, largest_ = 0;
};

// What the chunkers of one evaluation did, for its log line.
struct EvalChunkStats {
  int64_t chunks = 0, splits = 0, largest_bytes = 0;
  void record(const EvalChunker& c);
  // "12 chunks (1 split again), the largest working set 61.2 MiB of --eval-memory-mb 64"
  std::string describe(int64_t budget_mb) const;
};

// Samples and runs every chunk of one layer over `nodes`: `sample` makes a
// chunk's block, `compute` runs the layer on it. A chunk found over the
// budget once sampled is dropped, split and sampled again.
using SampleChunk = std::function<Result<MiniBatch>(std::span<const int64_t> nodes)>;
using ComputeChunk = std::function<Status(std::span<const int64_t> nodes, MiniBatch& batch)>;
Status for_each_eval_chunk(EvalChunker& chunker, std::span<const int64_t> nodes, const SampleChunk& sample,
                           const ComputeChunk& compute);

// The in-degree of each node as layer-wise evaluation samples it: capped by
// the evaluation fanout (per edge type: times the number of edge types).
std::vector<int64_t> eval_in_edges(std::vector<int64_t> in_degrees, int64_t eval_fan_out, int num_etypes);

class Model;
// Each layer's input and output widths (heads concatenated) and whether its
// kernels make a message per edge.
std::vector<EvalLayerWidths> eval_layer_widths(const Model& model);

}  // namespace dgld::trainer
