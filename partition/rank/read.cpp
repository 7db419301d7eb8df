#include "partition/rank/rank_job.h"

#include <algorithm>

#include "common/partition/array_file.h"

namespace dgld::rank {

Status RankJob::read_share() {
  DGLD_ASSIGN_OR_RETURN(g_, read_chunked_metadata(o_.chunks));
  if (g_.num_nodes() > INT32_MAX) {
    return invalid_argument(fmt::format("{} nodes: PT-Scotch (32-bit SCOTCH_Num here) takes at most 2^31-1",
                                        g_.num_nodes()));
  }
  // Node ranges of every rank, from the chunk blocks.
  starts_.assign(static_cast<size_t>(P_) + 1, 0);
  for (int r = 0; r < P_; ++r) {
    const auto [b, e] = block(g_.num_node_chunks(), P_, r);
    starts_[static_cast<size_t>(r) + 1] = e < g_.num_node_chunks() ? g_.node_chunk_start(e) : g_.num_nodes();
    (void)b;
  }
  n_local_ = starts_[me_ + 1] - starts_[me_];
  // Node data is read when the nodes move (step 5), so that it does not
  // sit in memory through PT-Scotch; its headers are checked now.
  const auto [nb, ne] = block(g_.num_node_chunks(), P_, me_);
  for (const ChunkedNodeData& d : g_.node_data) {
    for (int c = nb; c < ne; ++c) {
      DGLD_ASSIGN_OR_RETURN(NpyHeader h, check_node_data_chunk(g_, d.name, c));
      feature_bytes_ += h.rows * h.cols * static_cast<int64_t>(dtype_size(h.dtype));
    }
  }
  const auto [eb, ee] = block(g_.num_edge_chunks(), P_, me_);
  for (int c = eb; c < ee; ++c) {
    // Straight into 16-byte records: no 64-bit copy of the chunk's ids.
    int64_t eid = g_.edge_chunk_start(c);
    read_.reserve(read_.size() + static_cast<size_t>(g_.edge_chunk_sizes[static_cast<size_t>(c)]));
    DGLD_RETURN_IF_ERROR(for_each_edge_in_chunk(g_, c, [&](int64_t u, int64_t v) {
      read_.push_back({static_cast<int32_t>(u), static_cast<int32_t>(v), eid++});
    }));
    share_edges_ += g_.edge_chunk_sizes[static_cast<size_t>(c)];
  }
  return Status::ok();
}

Status RankJob::read_node_data() {
  const auto [nb, ne] = block(g_.num_node_chunks(), P_, me_);
  for (const ChunkedNodeData& d : g_.node_data) {
    Column col;
    col.name = d.name;
    for (int c = nb; c < ne; ++c) {
      DGLD_ASSIGN_OR_RETURN(NodeDataChunk chunk, read_node_data_chunk(g_, d.name, c));
      col.dtype = chunk.dtype;
      col.cols = chunk.cols;
      if (col.data.empty()) {
        col.data = std::move(chunk.data);  // one chunk per rank (--to-chunks P): no copy
      } else {
        col.data.insert(col.data.end(), chunk.data.begin(), chunk.data.end());
      }
    }
    columns_.push_back(std::move(col));
  }
  return Status::ok();
}

Status RankJob::spill_edges(bool in , bool out) {
  if (in) DGLD_RETURN_IF_ERROR(spill(in_, "in", spilled_in_));
  if (out) DGLD_RETURN_IF_ERROR(spill(out_, "out", spilled_out_));
  return Status::ok();
}

Status RankJob::unspill_edges(bool in , bool out) {
  if (in) DGLD_RETURN_IF_ERROR(unspill(in_, "in", spilled_in_));
  if (out) DGLD_RETURN_IF_ERROR(unspill(out_, "out", spilled_out_));
  return Status::ok();
}

}  // namespace dgld::rank
