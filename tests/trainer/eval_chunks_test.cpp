// Layer-wise evaluation in bounded memory (daemons/trainer_host/eval_chunks.h):
// the chunks cover every node once, stay within the budget, are split when a
// sampled chunk is over it, and a budget too small for one node is refused
// naming the option and the minimum; a standalone run evaluates to the same
// accuracy whatever the budget.
#include "daemons/trainer_host/eval_chunks.h"

#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

using namespace dgld;
using namespace dgld::trainer;

namespace {

// Runs a chunker over `edges` the way for_each_eval_chunk does, sampling
// "exactly" (sources = edges + dests, their upper bound, times `share`).
std::vector<std::pair<size_t, size_t>> run(EvalChunker& c, const std::vector<int64_t>& edges, double share = 1.0) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t b = 0, e = 0;
  while (c.next(b, e)) {
    int64_t ne = 0;
    for (size_t i = b; i < e; ++i) ne += edges[i];
    const auto d = static_cast<int64_t>(e - b);
    const auto s = static_cast<int64_t>(share * static_cast<double>(ne + d));
    if (c.accept(ne, std::max<int64_t>(s, d), d)) out.emplace_back(b, e);
  }
  return out;
}

void check_cover(const std::vector<std::pair<size_t, size_t>>& chunks, size_t n) {
  size_t at = 0;
  for (const auto& [b, e] : chunks) {
    REQUIRE(b == at);
    REQUIRE(e > b);
    at = e;
  }
  REQUIRE(at == n);
}

}  // namespace

TEST_CASE("the bytes of a chunk: edges, input rows twice, the outputs; messages only for reference kernels") {
  const EvalLayerWidths w{100, 16, false};
  CHECK(eval_chunk_bytes(w, 10, 5, 2) == 10 * kEvalEdgeBytes + 5 * 4 * 100 * 2 + 2 * 4 * (100 + 32));
  const EvalLayerWidths ref{100, 16, true};
  CHECK(eval_chunk_bytes(ref, 10, 5, 2) - eval_chunk_bytes(w, 10, 5, 2) == 10 * 4 * 100);
}

TEST_CASE("chunks cover every node once within the budget and the node cap") {
  std::vector<int64_t> edges(10000);
  for (size_t i = 0; i < edges.size(); ++i) edges[i] = static_cast<int64_t>(i % 50);  // 0..49 in-edges
  const EvalLayerWidths w{64, 16, false};
  const int64_t budget = 1 << 20;
  EvalChunker c(edges, w, budget, 100000);
  const auto chunks = run(c, edges);
  check_cover(chunks, edges.size());
  CHECK(c.splits() == 0);  // sources at their upper bound: the plan holds
  CHECK(c.largest_bytes() <= budget);
  CHECK(c.chunks() > 10);           // 1 MiB holds a few hundred of these nodes
  CHECK(c.largest_bytes() > budget / 2);  // and the chunks are not needlessly small

  EvalChunker capped(edges, w, int64_t{1} << 40, 1000);
  const auto by_count = run(capped, edges);
  check_cover(by_count, edges.size());
  CHECK(by_count.size() == 10);

  // Fewer distinct sources than edges (neighbours shared): the chunks grow.
  EvalChunker shared(edges, w, budget, 100000);
  check_cover(run(shared, edges, 0.2), edges.size());
  CHECK(shared.chunks() < c.chunks());
}

TEST_CASE("a chunk found over the budget once sampled is split and sampled again") {
  std::vector<int64_t> edges(1000, 20);
  const EvalLayerWidths w{64, 16, false};
  const int64_t budget = 512 << 10;
  EvalChunker c(edges, w, budget, 100000);
  // The first chunks share their sources (the estimate learns 0.1), then a
  // run of nodes whose neighbourhoods do not overlap comes: over the budget.
  std::vector<std::pair<size_t, size_t>> chunks;
  size_t b = 0, e = 0;
  int over = 0;
  while (c.next(b, e)) {
    const auto d = static_cast<int64_t>(e - b);
    const int64_t ne = 20 * d;
    const double share = b < 300 ? 0.1 : 1.0;
    const auto s = static_cast<int64_t>(share * static_cast<double>(ne + d));
    if (eval_chunk_bytes(w, ne, s, d) > budget) ++over;
    if (c.accept(ne, s, d)) chunks.emplace_back(b, e);
  }
  check_cover(chunks, edges.size());
  CHECK(over > 0);
  CHECK(c.splits() == over);
  CHECK(c.largest_bytes() <= budget);
}

TEST_CASE("a budget too small for one node's neighbourhood names the option, the node and the minimum") {
  const std::vector<int64_t> nodes = {7, 8, 9};
  const std::vector<int64_t> edges = {3, 4000, 10};
  const std::vector<EvalLayerWidths> layers = {{100, 16, false}, {16, 4, false}};
  const auto need = EvalChunker::smallest_budget(nodes, edges, layers);
  CHECK(need.node == 8);
  CHECK(need.in_edges == 4000);
  CHECK(need.layer == 0);
  CHECK(need.bytes == eval_chunk_bytes(layers[0], 4000, 4001, 1));
  CHECK(EvalChunker::check_budget(need, 64 << 20).is_ok());
  const Status st = EvalChunker::check_budget(need, 1 << 20);
  REQUIRE(!st.is_ok());
  CHECK(st.message() ==
        "--eval-memory-mb 1: too small for node 8's neighbourhood alone (4000 in-edges: 3.3 MiB in layer 0) in "
        "layer-wise evaluation; at least 4 MiB");
  // Another trainer's node: the minimum without the node.
  const Status other = EvalChunker::check_budget({need.bytes, -1, 0, 0}, 1 << 20);
  CHECK(other.message().find("another trainer's largest neighbourhood") != std::string::npos);
}

TEST_CASE("the evaluation fanout caps the in-edges a chunk plans for") {
  CHECK(eval_in_edges({3, 40, 0}, -1, 1) == std::vector<int64_t>{3, 40, 0});
  CHECK(eval_in_edges({3, 40, 0}, 10, 1) == std::vector<int64_t>{3, 10, 0});
  CHECK(eval_in_edges({3, 40, 0}, 10, 3) == std::vector<int64_t>{3, 30, 0});
}
