#include "common/sampling/block.h"

#include <algorithm>
#include <string>

#include "common/sampling/id_map.h"

namespace dgld {

Result<Block> build_block(std::span<const int64_t> dst_nodes, SampledEdges&& edges, int64_t node_id_range) {
  const size_t num_edges = edges.eid.size();
  if (edges.src.size() != num_edges || edges.dst.size() != num_edges) {
    return invalid_argument("sampled edges have src/dst/eid arrays of lengths " +
                            std::to_string(edges.src.size()) + "/" +
                            std::to_string(edges.dst.size()) + "/" + std::to_string(num_edges));
  }
  const bool typed = !edges.etype.empty();
  if (typed && edges.etype.size() != num_edges) {
    return invalid_argument("sampled edges have " + std::to_string(edges.etype.size()) + " edge types for " +
                            std::to_string(num_edges) + " edges");
  }
  const auto num_dst = static_cast<int64_t>(dst_nodes.size());
  // Scratch kept per thread: fresh multi-megabyte tables per block cost more
  // in page faults than the relabelling itself.
  thread_local IdMap map;
  map.clear();
  map.set_direct_range(node_id_range);
  // Room for the dst nodes and a quarter of the edges as new sources: the
  // map grows when more come. Reserving one slot pair per edge cost a full
  // neighbourhood's block (2 M edges, 170 k distinct sources) a 134 MB table.
  map.reserve(dst_nodes.size() + num_edges / 4);
  for (const int64_t v : dst_nodes) {
    if (!map.insert_or_find(v).second) {
      return invalid_argument("dst node " + std::to_string(v) + " appears twice");
    }
  }

  // Calls f(i, local) for every edge with its dst's local index; runs of one
  // dst (the usual layout) cost one lookup.
  auto for_each_dst = [&](auto&& f) -> Status {
    int64_t prev_id = 0;
    int32_t prev = -1;
    for (size_t i = 0; i < num_edges; ++i) {
      const int64_t d = edges.dst[i];
      if (prev < 0 || d != prev_id) {
        prev = map.find(d);
        if (prev < 0) {
          return invalid_argument("edge " + std::to_string(edges.eid[i]) + " has dst " + std::to_string(d) +
                                  ", which is not a dst node");
        }
        prev_id = d;
      }
      f(i, prev);
    }
    return Status::ok();
  };
  Block block;
  block.indptr.assign(num_dst + 1, 0);
  bool grouped = true;
  int32_t last = -1;
  DGLD_RETURN_IF_ERROR(for_each_dst([&](size_t, int32_t d) {
    grouped = grouped && d >= last;
    last = d;
    ++block.indptr[d + 1];
  }));
  for (int64_t d = 0; d < num_dst; ++d) block.indptr[d + 1] += block.indptr[d];

  // Source relabelling in edge order; new ids extend src_nodes after the dst nodes.
  if (grouped) {
    // Already in CSR order: the sampled arrays become the block's, relabelled
    // in place (a full neighbourhood's block holds no second copy of its edges).
    std::vector<int64_t>().swap(edges.dst);
    for (int64_t& u : edges.src) u = map.insert_or_find(u).first;
    block.indices = std::move(edges.src);
    block.eids = std::move(edges.eid);
    block.etypes = std::move(edges.etype);
  } else {
    block.indices.resize(num_edges);
    block.eids.resize(num_edges);
    if (typed) block.etypes.resize(num_edges);
    std::vector<int64_t> cursor(block.indptr.begin(), block.indptr.end() - 1);
    DGLD_RETURN_IF_ERROR(for_each_dst([&](size_t i, int32_t d) {
      const int64_t at = cursor[d]++;
      block.indices[at] = map.insert_or_find(edges.src[i]).first;
      block.eids[at] = edges.eid[i];
      if (typed) block.etypes[at] = edges.etype[i];
    }));
  }
  block.dst_nodes.assign(dst_nodes.begin(), dst_nodes.end());
  block.src_nodes = map.release_ids();
  // A block far larger than a training batch's (a full neighbourhood in
  // layer-wise inference) leaves no tens of MB of scratch in the thread.
  // (The direct array, at most 8 MiB, is not counted; a map dropped here
  // gets it again from the next call's set_direct_range.)
  constexpr size_t kKeepScratchBytes = size_t{16} << 20;
  if (map.memory_bytes() - map.direct_bytes() > kKeepScratchBytes) map = IdMap();
  return block;
}

Result<Block> build_block(std::span<const int64_t> dst_nodes, const SampledEdges& edges, int64_t node_id_range) {
  SampledEdges copy = edges;
  return build_block(dst_nodes, std::move(copy), node_id_range);
}

}  // namespace dgld
