#include "partition/rank/rank_job.h"

#include <algorithm>
#include <numeric>

#include "common/file_util.h"
#include "common/part_config.h"
#include "common/partition/graph_file.h"
#include "common/partition/partition.h"

namespace dgld::rank {

Status RankJob::write_partition() {
  namespace pa = part_arrays;
  const int64_t first = part_start_[me_], n_inner = part_start_[me_ + 1] - first;
  auto inner = [&](int64_t v) { return v >= first && v < first + n_inner; };
  // The halo rows' edges: out-edges of inner nodes to nodes elsewhere, by
  // destination then original edge id, with their new edge ids.
  struct HaloEdge {
    int32_t v, u;
    int64_t eid, neid;
  };
  std::vector<HaloEdge> halo_edges;
  // Halo nodes: sources of in-edges and destinations of out-edges
  // elsewhere (a bit per node of the graph marks them).
  std::vector<uint64_t> is_halo((static_cast<size_t>(g_.num_nodes()) + 63) / 64, 0);
  auto mark = [&](int64_t v) { is_halo[static_cast<size_t>(v) >> 6] |= uint64_t{1} << (v & 63); };
  for (const EdgeRec& e : in_) if (!inner(e.u)) mark(e.u);
  DGLD_RETURN_IF_ERROR(for_each_spilled_out([&](const EdgeRec& e, int64_t neid) {
    if (!inner(e.v)) {
      mark(e.v);
      halo_edges.push_back({e.v, e.u, e.eid, neid});
    }
  }));
  std::sort(halo_edges.begin(), halo_edges.end(),
            [](const HaloEdge& a, const HaloEdge& b) { return a.v != b.v ? a.v < b.v : a.eid < b.eid; });
  std::vector<int64_t> halo;
  for (size_t w = 0; w < is_halo.size(); ++w) {
    for (uint64_t bits = is_halo[w]; bits != 0; bits &= bits - 1) {
      halo.push_back(static_cast<int64_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
    }
  }
  std::vector<uint64_t>().swap(is_halo);
  auto local = [&](int64_t v) -> int64_t {
    if (inner(v)) return v - first;
    return n_inner + (std::lower_bound(halo.begin(), halo.end(), v) - halo.begin());
  };
  const int64_t n_local = n_inner + static_cast<int64_t>(halo.size());
  const int64_t e_inner = static_cast<int64_t>(in_.size()), e_local = e_inner + static_cast<int64_t>(halo_edges.size());
  const auto n_out = static_cast<int64_t>(spilled_out_);
  GraphFileCounts counts;
  counts.part_id = me_;
  counts.num_parts = P_;
  counts.inner_nodes = n_inner;
  counts.local_nodes = n_local;
  counts.inner_edges = e_inner;
  counts.local_edges = e_local;
  counts.out_edges = n_out;
  counts.halo_hops = 1;
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(staging_ / "graph.dgld", ArrayFileKind::partition_graph,
                                                        graph_file_arrays(counts)));
  const std::vector<int64_t> meta = graph_file_meta(counts);
  DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(meta)));
  // Node arrays, one at a time.
  auto gid = [&](int64_t i) { return i < n_inner ? first + i : halo[static_cast<size_t>(i - n_inner)]; };
  DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, n_local, [&](int64_t i) { return gid(i); }));
  DGLD_RETURN_IF_ERROR(stream<uint8_t>(*w, n_local, [&](int64_t i) { return static_cast<uint8_t>(i < n_inner); }));
  DGLD_RETURN_IF_ERROR(stream<int32_t>(*w, n_local, [&](int64_t i) { return static_cast<int32_t>(part_of_new(gid(i))); }));
  DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(orig_)));
  std::vector<int64_t>().swap(orig_);
  {
    std::vector<int64_t> indptr(static_cast<size_t>(n_local) + 1, 0);
    for (const EdgeRec& e : in_) ++indptr[static_cast<size_t>(e.v - first) + 1];
    for (const HaloEdge& h : halo_edges) ++indptr[static_cast<size_t>(local(h.v)) + 1];
    std::partial_sum(indptr.begin(), indptr.end(), indptr.begin());
    DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(indptr)));
  }
  // In-edges (inner rows in order), then the halo rows' edges.
  DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, e_local, [&](int64_t k) {
    return k < e_inner ? local(in_[static_cast<size_t>(k)].u) : halo_edges[static_cast<size_t>(k - e_inner)].u - first;
  }));
  DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, e_local, [&](int64_t k) {
    return k < e_inner ? edge_start_ + k : halo_edges[static_cast<size_t>(k - e_inner)].neid;
  }));
  DGLD_RETURN_IF_ERROR(stream<uint8_t>(*w, e_local, [&](int64_t k) { return static_cast<uint8_t>(k < e_inner); }));
  DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, e_inner, [&](int64_t k) { return in_[static_cast<size_t>(k)].eid; }));
  std::vector<HaloEdge>().swap(halo_edges);
  std::vector<EdgeRec>().swap(in_);
  halo_nodes_ = static_cast<int64_t>(halo.size());
  // Out-edges of inner nodes (CSR), by source then new edge id.
  DGLD_RETURN_IF_ERROR(unspill(out_, "out", spilled_out_));
  DGLD_RETURN_IF_ERROR(unspill(out_new_eid_, "out-eids", spilled_out_eids_));
  if (out_.size() > UINT32_MAX) {
    return resource_exhausted(fmt::format("{} out-edges in partition {}: at most 2^32-1 per partition", out_.size(), me_));
  }
  {
    std::vector<int64_t> out_indptr(static_cast<size_t>(n_inner) + 1, 0);
    for (const EdgeRec& e : out_) ++out_indptr[static_cast<size_t>(e.u - first) + 1];
    std::partial_sum(out_indptr.begin(), out_indptr.end(), out_indptr.begin());
    DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(out_indptr)));
  }
  std::vector<uint32_t> order(out_.size());
  std::iota(order.begin(), order.end(), uint32_t{0});
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return out_[a].u != out_[b].u ? out_[a].u < out_[b].u : out_new_eid_[a] < out_new_eid_[b];
  });
  DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, n_out, [&](int64_t k) { return local(out_[order[static_cast<size_t>(k)]].v); }));
  DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, n_out, [&](int64_t k) { return out_new_eid_[order[static_cast<size_t>(k)]]; }));
  DGLD_RETURN_IF_ERROR(w->finish());
  DGLD_ASSIGN_OR_RETURN(auto ew, ArrayFileWriter::create(staging_ / "edge_feat.dgld", ArrayFileKind::edge_features, {}));
  return ew->finish();
}

Status RankJob::commit_partition() {
  const fs::path final_dir = o_.output / fmt::format("part{}", me_);
  std::error_code ec;
  if (fs::exists(final_dir)) {
    if (!o_.overwrite) {
      return invalid_argument(fmt::format("{} exists (give --overwrite to replace it)", final_dir.string()));
    }
    fs::remove_all(final_dir, ec);
  }
  fs::rename(staging_, final_dir, ec);
  if (ec) return io_error(fmt::format("renaming {} to {}: {}", staging_.string(), final_dir.string(), ec.message()));
  staging_.clear();
  return Status::ok();
}

Status RankJob::write_config() {
  PartitionConfig c;
  c.graph_name = o_.graph_name.empty() ? g_.graph_name : o_.graph_name;
  c.num_nodes = g_.num_nodes();
  c.num_edges = num_edges_;
  c.part_method = "ptscotch";
  c.num_parts = P_;
  c.halo_hops = 1;
  const auto& edge_counts = edge_counts_all_;
  int64_t e = 0;
  for (int p = 0; p < P_; ++p) {
    c.node_map.push_back({part_start_[static_cast<size_t>(p)], part_start_[static_cast<size_t>(p) + 1]});
    c.edge_map.push_back({e, e + edge_counts[static_cast<size_t>(p)]});
    e += edge_counts[static_cast<size_t>(p)];
    const std::string dir = fmt::format("part{}", p);
    c.parts.push_back({dir + "/node_feat.dgld", dir + "/edge_feat.dgld", dir + "/graph.dgld", ""});
  }
  const std::string name = c.graph_name + ".json";
  DGLD_RETURN_IF_ERROR(validate_part_config(c, name));
  return write_file_atomic(o_.output / name, part_config_to_json(c));
}

nlohmann::json RankJob::figures() {
  const int64_t share = share_bytes();
  const auto rss = comm_.allgather<int64_t>(peak_rss_bytes());
  const auto shares = comm_.allgather<int64_t>(share);
  const auto halos = comm_.allgather<int64_t>(halo_nodes_);
  const int64_t cut = comm_.sum(cut_);
  nlohmann::json j;
  j["num_parts"] = P_;
  j["num_nodes"] = g_.num_nodes();
  j["num_edges"] = num_edges_;
  j["edge_cut"] = cut;
  j["peak_rss_bytes"] = rss;
  j["share_bytes"] = shares;
  j["halo_nodes"] = halos;
  double worst = 0;
  for (int r = 0; r < P_; ++r) {
    worst = std::max(worst, static_cast<double>(rss[static_cast<size_t>(r)]) / static_cast<double>(std::max<int64_t>(1, shares[static_cast<size_t>(r)])));
  }
  j["max_rss_over_share"] = worst;
  j["scotch_s"] = scotch_s_;
  j["cut_before_refine"] = cut_before_refine_;
  j["cut_after_refine"] = cut_after_refine_;
  j["refine_rounds"] = refine_rounds_;
  j["refine_moved"] = refine_moved_;
  j["refine_s"] = refine_s_;
  j["scotch_edge_fraction"] = scotch_fraction_;
  j["total_s"] = total_s_;
  return j;
}

void RankJob::clean_up() {
  std::error_code ec;
  if (!staging_.empty()) fs::remove_all(staging_, ec);
  for (const char* which : {"in", "out", "out-eids"}) fs::remove(spill_path(which), ec);
}

}  // namespace dgld::rank
