// PartitionWriter (part_writer.h): the partition's graph file and node
// feature file; part_writer_edges.cpp writes its edge files.
#include "partition/part_writer.h"

#include "partition/part_writer_impl.h"

namespace dgld {
namespace fs = std::filesystem;
Status PartitionWriter::Impl::write(int p, const fs::path& dir, PartStats* st, int64_t* cut) {
  p_ = p;
  range_ = L_.node_map[p];
  n_inner_ = range_.size();
  for (int64_t i = 0; i < n_inner_; ++i) g2l_[range_.start + i] = static_cast<int32_t>(i);
  discover_halo(cut);
  count_rows();
  index_inner_edges();
  fs::create_directories(dir);
  DGLD_RETURN_IF_ERROR(write_graph(dir / "graph.dgld"));
  DGLD_RETURN_IF_ERROR(write_node_feats(dir / "node_feat.dgld"));
  DGLD_RETURN_IF_ERROR(write_edge_feats(dir / "edge_feat.dgld"));
  if (link_.present) DGLD_RETURN_IF_ERROR(write_link_split(dir / "link_split.dgld"));

  st->owned_nodes = n_inner_;
  st->halo_nodes = static_cast<int64_t>(halo_.size());
  st->owned_edges = L_.edge_map[p].size();
  st->local_edges = in_indptr_.back();
  st->out_edges = out_indptr_.back();
  st->train_nodes = 0;
  if (!g_.train_mask.empty()) {
    for (int64_t v = range_.start; v < range_.end; ++v) st->train_nodes += g_.train_mask[L_.new2orig[v]];
  }
  // Reset the global -> local map for the next partition.
  for (int64_t v = range_.start; v < range_.end; ++v) g2l_[v] = -1;
  for (int64_t h : halo_) g2l_[h] = -1;
  return Status::ok();
}

void PartitionWriter::Impl::mark(int64_t new_id, int depth, std::vector<std::pair<int64_t, int>>* found) {
  if (g2l_[new_id] == -1) {
    g2l_[new_id] = kHaloMark;
    found->emplace_back(new_id, depth);
  }
}

void PartitionWriter::Impl::discover_halo(int64_t* cut) {
  std::vector<std::pair<int64_t, int>> found;
  // Sources of in-edges of inner nodes.
  for (int64_t v = range_.start; v < range_.end; ++v) {
    const int32_t o = L_.new2orig[v];
    for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) {
      const int32_t s = g_.src[k];
      if (!is_inner_orig(s)) {
        ++*cut;
        mark(L_.orig2new[s], 1, &found);
      }
    }
  }
  // Destinations of out-edges of inner nodes, and the out-degrees. In a
  // symmetric graph they are the in-edges' sources, found above, and the
  // in-degrees; otherwise they take a scan of the whole graph.
  out_count_.assign(n_inner_ + 1, 0);
  if (g_.symmetric_simple) {
    for (int64_t v = range_.start; v < range_.end; ++v) {
      const int32_t o = L_.new2orig[v];
      out_count_[v - range_.start + 1] = g_.indptr[o + 1] - g_.indptr[o];
    }
  } else {
    for (int64_t d = 0; d < g_.num_nodes; ++d) {
      const bool outside = !is_inner_orig(static_cast<int32_t>(d));
      for (int64_t k = g_.indptr[d]; k < g_.indptr[d + 1]; ++k) {
        const int32_t s = g_.src[k];
        if (is_inner_orig(s)) {
          ++out_count_[L_.orig2new[s] - range_.start + 1];
          if (outside) mark(L_.orig2new[d], 1, &found);
        }
      }
    }
  }
  // Further hops follow in-edges of the previous frontier.
  size_t frontier_begin = 0;
  for (int hop = 2; hop <= o_.num_hops; ++hop) {
    const size_t frontier_end = found.size();
    for (size_t i = frontier_begin; i < frontier_end; ++i) {
      if (found[i].second != hop - 1) continue;
      const int32_t o = L_.new2orig[found[i].first];
      for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) mark(L_.orig2new[g_.src[k]], hop, &found);
    }
    frontier_begin = frontier_end;
  }
  std::sort(found.begin(), found.end());
  halo_.resize(found.size());
  halo_depth_.resize(found.size());
  for (size_t i = 0; i < found.size(); ++i) {
    halo_[i] = found[i].first;
    halo_depth_[i] = found[i].second;
    g2l_[found[i].first] = static_cast<int32_t>(n_inner_ + static_cast<int64_t>(i));
  }
}

void PartitionWriter::Impl::count_rows() {
  const int64_t n_local = n_inner_ + static_cast<int64_t>(halo_.size());
  in_indptr_.assign(n_local + 1, 0);
  for_each_in_edge([&](int64_t r, int64_t, int64_t) { ++in_indptr_[r + 1]; });
  std::partial_sum(in_indptr_.begin(), in_indptr_.end(), in_indptr_.begin());
  out_indptr_.assign(out_count_.begin(), out_count_.end());
  std::partial_sum(out_indptr_.begin(), out_indptr_.end(), out_indptr_.begin());
}

void PartitionWriter::Impl::fill_out_edges(std::vector<int64_t>* indices, std::vector<int64_t>* eids) const {
  indices->resize(out_indptr_.back());
  eids->resize(out_indptr_.back());
  std::vector<int64_t> cursor(out_indptr_.begin(), out_indptr_.end() - 1);
  for (int64_t d = 0; d < g_.num_nodes; ++d) {
    for (int64_t k = g_.indptr[d]; k < g_.indptr[d + 1]; ++k) {
      const int32_t s = g_.src[k];
      if (is_inner_orig(s)) {
        const int64_t pos = cursor[L_.orig2new[s] - range_.start]++;
        (*indices)[pos] = g2l_[L_.orig2new[d]];
        (*eids)[pos] = L_.new_eid(d, k);
      }
    }
  }
}

Status PartitionWriter::Impl::write_graph(const fs::path& path) {
  namespace pa = part_arrays;
  const int64_t n_local = n_inner_ + static_cast<int64_t>(halo_.size());
  const int64_t e_local = in_indptr_.back(), e_inner = in_indptr_[n_inner_], e_out = out_indptr_.back();
  GraphFileCounts counts;
  counts.part_id = p_;
  counts.num_parts = L_.num_parts;
  counts.inner_nodes = n_inner_;
  counts.local_nodes = n_local;
  counts.inner_edges = e_inner;
  counts.local_edges = e_local;
  counts.out_edges = e_out;
  counts.halo_hops = o_.num_hops;
  counts.typed = g_.types.present();
  const bool typed = counts.typed;
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::partition_graph, graph_file_arrays(counts)));
  const std::vector<int64_t> meta = graph_file_meta(counts);
  DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(meta)));
  {
    Appender<int64_t> a(*w);
    for (int64_t i = 0; i < n_local; ++i) a.push(i < n_inner_ ? range_.start + i : halo_[i - n_inner_]);
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  {
    Appender<uint8_t> a(*w);
    for (int64_t i = 0; i < n_local; ++i) a.push(i < n_inner_ ? 1 : 0);
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  {
    Appender<int32_t> a(*w);
    for (int64_t i = 0; i < n_local; ++i) a.push(L_.part[orig_of_local(i)]);
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  {
    // Heterogeneous graphs: the per-type original id (DGL's orig_nids per type).
    Appender<int64_t> a(*w);
    for (int64_t i = 0; i < n_inner_; ++i) {
      const int64_t o = L_.new2orig[range_.start + i];
      a.push(typed ? o - g_.types.ntype_offset[g_.types.type_of(o)] : o);
    }
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(in_indptr_)));
  {
    Appender<int64_t> a(*w);
    for_each_in_edge([&](int64_t, int64_t, int64_t k) { a.push(g2l_[L_.orig2new[g_.src[k]]]); });
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  {
    Appender<int64_t> a(*w);
    for_each_in_edge([&](int64_t, int64_t o, int64_t k) { a.push(L_.new_eid(o, k)); });
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  {
    // In-edges of inner nodes come first: e_inner ones, then zeros.
    const std::vector<uint8_t> ones(std::min<int64_t>(e_local, 1 << 20), 1), zeros(ones.size(), 0);
    for (int64_t done = 0; done < e_local;) {
      const auto& src = done < e_inner ? ones : zeros;
      const int64_t n = std::min<int64_t>(done < e_inner ? e_inner - done : e_local - done, src.size());
      DGLD_RETURN_IF_ERROR(w->append(src.data(), static_cast<size_t>(n)));
      done += n;
    }
  }
  {
    Appender<int64_t> a(*w);
    for_each_inner_edge([&](int64_t k) { a.push(g_.orig_edge_id(k)); });
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(out_indptr_)));
  {
    std::vector<int64_t> indices, eids;
    fill_out_edges(&indices, &eids);
    DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(indices)));
    DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(eids)));
  }
  if (typed) {
    Appender<int32_t> a(*w);
    for_each_in_edge([&](int64_t, int64_t, int64_t k) { a.push(g_.edge_type[k]); });
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  return w->finish();
}

Status PartitionWriter::Impl::write_typed_node_feats(const fs::path& path) {
  const GraphTypes& ty = g_.types;
  std::vector<ArraySpec> specs;
  std::vector<int> featured;
  for (int t = 0; t < ty.num_ntypes(); ++t) {
    if (ty.feat_dim[t] > 0 && !ty.type_features[t].empty()) {
      featured.push_back(t);
      specs.push_back({ty.ntypes[t] + "/features", DType::float32, {L_.ntype_map[t][p_].size(), ty.feat_dim[t]}});
    }
  }
  const std::pair<const char*, const std::vector<uint8_t>*> masks[] = {
      {"train_mask", &g_.train_mask}, {"val_mask", &g_.val_mask}, {"test_mask", &g_.test_mask}};
  const int target = ty.target;
  const IdRange tr = target >= 0 ? L_.ntype_map[target][p_] : IdRange{};
  const std::string tp = target >= 0 ? ty.ntypes[target] + "/" : "";
  if (target >= 0 && !g_.labels.empty()) specs.push_back({tp + "labels", DType::int64, {tr.size()}});
  for (const auto& [name, m] : masks) {
    if (target >= 0 && !m->empty()) specs.push_back({tp + name, DType::uint8, {tr.size()}});
  }
  specs.push_back({"_N/trainer_id", DType::int64, {n_inner_}});
  const bool trainers = o_.num_trainers_per_machine > 1;  // DGL's "<ntype>/trainer_id" as well
  for (int t = 0; trainers && t < ty.num_ntypes(); ++t) {
    specs.push_back({ty.ntypes[t] + "/trainer_id", DType::int64, {L_.ntype_map[t][p_].size()}});
  }
  for (const NamedTensor& x : g_.node_tensors) {
    specs.push_back(named_spec(ty.ntypes[x.type] + "/", x, L_.ntype_map[x.type][p_].size()));
  }
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::node_features, std::move(specs)));
  for (int t : featured) {
    Appender<float> a(*w);
    const int64_t d = ty.feat_dim[t];
    const IdRange r = L_.ntype_map[t][p_];
    for (int64_t v = r.start; v < r.end; ++v) {
      const int64_t row = L_.new2orig[v] - ty.ntype_offset[t];
      a.push(ty.type_features[t].data() + row * d, static_cast<size_t>(d));
    }
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  if (target >= 0 && !g_.labels.empty()) DGLD_RETURN_IF_ERROR(write_node_column<int64_t>(*w, g_.labels, tr));
  for (const auto& [name, m] : masks) {
    if (target >= 0 && !m->empty()) DGLD_RETURN_IF_ERROR(write_node_column<uint8_t>(*w, *m, tr));
  }
  DGLD_RETURN_IF_ERROR(write_node_column<int64_t>(*w, L_.piece));
  for (int t = 0; trainers && t < ty.num_ntypes(); ++t) {
    DGLD_RETURN_IF_ERROR(write_node_column<int64_t>(*w, L_.piece, L_.ntype_map[t][p_]));
  }
  for (const NamedTensor& x : g_.node_tensors) {
    DGLD_RETURN_IF_ERROR(write_named_rows(*w, x, [&](auto&& row) {
      const IdRange r = L_.ntype_map[x.type][p_];
      for (int64_t v = r.start; v < r.end; ++v) row(L_.new2orig[v] - ty.ntype_offset[x.type]);
    }));
  }
  return w->finish();
}

Status PartitionWriter::Impl::write_node_feats(const fs::path& path) {
  if (g_.types.present()) return write_typed_node_feats(path);
  const std::string nt = "_N/";
  const bool has_feats = g_.feat_dim > 0 && !g_.features.empty();
  std::vector<ArraySpec> specs;
  if (has_feats) specs.push_back({nt + "features", DType::float32, {n_inner_, g_.feat_dim}});
  if (!g_.labels.empty()) specs.push_back({nt + "labels", DType::int64, {n_inner_}});
  const std::pair<const char*, const std::vector<uint8_t>*> masks[] = {
      {"train_mask", &g_.train_mask}, {"val_mask", &g_.val_mask}, {"test_mask", &g_.test_mask}};
  for (const auto& [name, m] : masks) {
    if (!m->empty()) specs.push_back({nt + name, DType::uint8, {n_inner_}});
  }
  specs.push_back({nt + "trainer_id", DType::int64, {n_inner_}});
  for (const NamedTensor& t : g_.node_tensors) specs.push_back(named_spec(nt, t, n_inner_));
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::node_features, std::move(specs)));
  if (has_feats) {
    Appender<float> a(*w);
    const int64_t d = g_.feat_dim;
    for (int64_t v = range_.start; v < range_.end; ++v) {
      a.push(g_.features.data() + static_cast<int64_t>(L_.new2orig[v]) * d, static_cast<size_t>(d));
    }
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  if (!g_.labels.empty()) DGLD_RETURN_IF_ERROR(write_node_column<int64_t>(*w, g_.labels));
  for (const auto& [name, m] : masks) {
    if (!m->empty()) DGLD_RETURN_IF_ERROR(write_node_column<uint8_t>(*w, *m));
  }
  DGLD_RETURN_IF_ERROR(write_node_column<int64_t>(*w, L_.piece));
  for (const NamedTensor& t : g_.node_tensors) {
    DGLD_RETURN_IF_ERROR(write_named_rows(*w, t, [&](auto&& row) {
      for (int64_t v = range_.start; v < range_.end; ++v) row(L_.new2orig[v]);
    }));
  }
  return w->finish();
}

PartitionWriter::PartitionWriter(const Layout& L, const PartitionOptions& o, const LinkSplitResult& link,
                                 const LinkBuckets& buckets)
    : impl_(std::make_unique<Impl>(L, o, link, buckets)) {}

PartitionWriter::~PartitionWriter() = default;

Status PartitionWriter::write(int p, const fs::path& dir, PartStats* st, int64_t* cut) {
  return impl_->write(p, dir, st, cut);
}

}  // namespace dgld
