#include "partition/part_writer.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "common/part_config.h"
#include "common/partition/array_file.h"
#include "common/partition/graph_file.h"
#include "common/partition/link_split.h"
#include "common/partition/partition.h"

namespace dgld {
namespace fs = std::filesystem;
namespace {

// Appends values to an array of an ArrayFileWriter through a buffer.
template <typename T>
class Appender {
 public:
  explicit Appender(ArrayFileWriter& w) : w_(w) { buf_.reserve(kCap); }
  void push(T v) {
    buf_.push_back(v);
    if (buf_.size() == kCap) flush();
  }
  void push(const T* v, size_t n) {
    if (buf_.size() + n > kCap) flush();
    buf_.insert(buf_.end(), v, v + n);
  }
  Status finish() {
    flush();
    return st_;
  }

 private:
  static constexpr size_t kCap = (1 << 20) / sizeof(T);
  void flush() {
    if (st_.is_ok() && !buf_.empty()) st_ = w_.append(buf_.data(), buf_.size() * sizeof(T));
    buf_.clear();
  }
  ArrayFileWriter& w_;
  std::vector<T> buf_;
  Status st_;
};

}  // namespace

class PartitionWriter::Impl {
 public:
  Impl(const Layout& L, const PartitionOptions& o, const LinkSplitResult& link, const LinkBuckets& buckets)
      : L_(L), g_(L.g), o_(o), link_(link), buckets_(buckets), g2l_(g_.num_nodes, -1) {}

  Status write(int p, const fs::path& dir, PartStats* st, int64_t* cut);

 private:
  static constexpr int32_t kHaloMark = -2;

  bool is_inner_orig(int32_t orig) const { return L_.part[orig] == p_; }
  int64_t orig_of_local(int64_t local) const {
    return L_.new2orig[local < n_inner_ ? range_.start + local : halo_[local - n_inner_]];
  }
  // Rows of halo nodes at depth < num_hops hold all their in-edges; deeper ones
  // only the edges from inner nodes (out-edges of inner nodes).
  bool full_row(int64_t local) const { return local < n_inner_ || halo_depth_[local - n_inner_] < o_.num_hops; }

  void mark(int64_t new_id, int depth, std::vector<std::pair<int64_t, int>>* found);

  void discover_halo(int64_t* cut);

  // Calls f(local_row, original CSC position) for every local in-edge, in CSC order.
  template <typename F>
  void for_each_in_edge(F&& f) const {
    const int64_t n_local = n_inner_ + static_cast<int64_t>(halo_.size());
    for (int64_t r = 0; r < n_local; ++r) {
      const int64_t o = orig_of_local(r);
      const bool full = full_row(r);
      for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) {
        if (full || is_inner_orig(g_.src[k])) f(r, o, k);
      }
    }
  }

  // Calls f(original CSC position) for every inner edge, in local (= global
  // edge id) order.
  template <typename F>
  void for_each_inner_edge(F&& f) const {
    for (int64_t v = range_.start; v < range_.end; ++v) {
      const int32_t o = L_.new2orig[v];
      for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) f(k);
    }
  }

  void count_rows();

  // Out-edges of inner nodes, filled by a second full scan.
  void fill_out_edges(std::vector<int64_t>* indices, std::vector<int64_t>* eids) const;

  Status write_graph(const fs::path& path);

  // The rows of `column` (by original id) of the new ids `rows` (default: the partition's).
  template <typename T, typename Src>
  Status write_node_column(ArrayFileWriter& w, const std::vector<Src>& column, IdRange rows = {-1, -1}) {
    if (rows.start < 0) rows = range_;
    Appender<T> a(w);
    for (int64_t v = rows.start; v < rows.end; ++v) a.push(static_cast<T>(column[L_.new2orig[v]]));
    return a.finish();
  }

  // Heterogeneous graphs: "<ntype>/features" for each type with features, the
  // target type's labels and masks, each over the partition's nodes of that
  // type (docs/heterogeneous.md); "_N/trainer_id" over every inner node (and
  // "<ntype>/trainer_id" per type with several trainers per machine); the
  // named tensors of an in-memory input under their types.
  Status write_typed_node_feats(const fs::path& path);

  Status write_node_feats(const fs::path& path);

  // The inner edges' tensors: the link split's train mask, if any, and the
  // graph's named edge tensors.
  Status write_edge_feats(const fs::path& path);
  // Heterogeneous graphs: "<src:rel:dst>/features" for each edge type with
  // features, "<src:rel:dst>/trainer_id" with several trainers per machine and
  // the named tensors, rows in edge id order over the partition's edges of
  // that type.
  Status write_typed_edge_feats(const fs::path& path);

  // A named tensor's array: `rows` rows under "<prefix><name>".
  static ArraySpec named_spec(const std::string& prefix, const NamedTensor& t, int64_t rows);

  // Appends the rows of `t` that `rows(row)` names, in the order it calls row(i).
  template <typename Rows>
  Status write_named_rows(ArrayFileWriter& w, const NamedTensor& t, Rows&& rows) {
    Appender<uint8_t> a(w);
    const int64_t b = t.row_bytes();
    const auto* base = reinterpret_cast<const uint8_t*>(t.data);
    rows([&](int64_t i) { a.push(base + i * b, static_cast<size_t>(b)); });
    return a.finish();
  }

  // The held-out edges whose destination this partition owns (common/partition/link_split.h).
  Status write_link_split(const fs::path& path);

  const Layout& L_;
  const GraphData& g_;
  const PartitionOptions& o_;
  const LinkSplitResult& link_;
  const LinkBuckets& buckets_;
  std::vector<int32_t> g2l_;  // new global id -> local id of the current partition, or -1
  int p_ = 0;
  IdRange range_;
  int64_t n_inner_ = 0;
  std::vector<int64_t> halo_;  // new global ids, sorted
  std::vector<int> halo_depth_;
  std::vector<int64_t> out_count_, in_indptr_, out_indptr_;
};

Status PartitionWriter::Impl::write(int p, const fs::path& dir, PartStats* st, int64_t* cut) {
  p_ = p;
  range_ = L_.node_map[p];
  n_inner_ = range_.size();
  for (int64_t i = 0; i < n_inner_; ++i) g2l_[range_.start + i] = static_cast<int32_t>(i);
  discover_halo(cut);
  count_rows();
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

Status PartitionWriter::Impl::write_typed_edge_feats(const fs::path& path) {
  const GraphTypes& ty = g_.types;
  std::vector<ArraySpec> specs;
  std::vector<int> featured;
  for (int t = 0; t < static_cast<int>(ty.edge_feat_dim.size()); ++t) {
    if (ty.edge_feat_dim[t] > 0 && !ty.edge_features[ty.edge_feat_of[t]].empty()) {
      featured.push_back(t);
      specs.push_back({ty.etypes[t].name() + "/features", DType::float32,
                       {L_.etype_map[t][p_].size(), ty.edge_feat_dim[t]}});
    }
  }
  const bool trainers = o_.num_trainers_per_machine > 1;  // DGL's "<etype>/trainer_id": its destination's
  for (int t = 0; trainers && t < ty.num_etypes(); ++t) {
    specs.push_back({ty.etypes[t].name() + "/trainer_id", DType::int64, {L_.etype_map[t][p_].size()}});
  }
  for (const NamedTensor& x : g_.edge_tensors) {
    specs.push_back(named_spec(ty.etypes[x.type].name() + "/", x, L_.etype_map[x.type][p_].size()));
  }
  const bool empty = specs.empty();
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::edge_features, std::move(specs)));
  if (empty) return w->finish();
  // Original CSC position and destination of each inner edge, by edge id.
  const IdRange er = L_.edge_map[p_];
  std::vector<int64_t> by_eid(static_cast<size_t>(er.size()));
  std::vector<int32_t> dst_of(static_cast<size_t>(er.size()));
  for (int64_t v = range_.start; v < range_.end; ++v) {
    const int32_t o = L_.new2orig[v];
    for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) {
      by_eid[L_.new_eid(o, k) - er.start] = k;
      dst_of[L_.new_eid(o, k) - er.start] = o;
    }
  }
  for (int t : featured) {
    Appender<float> a(*w);
    const int64_t d = ty.edge_feat_dim[t];
    const std::vector<float>& rows = ty.edge_features[ty.edge_feat_of[t]];
    const IdRange tr = L_.etype_map[t][p_];
    for (int64_t e = tr.start; e < tr.end; ++e) {
      const int64_t row = g_.orig_edge_id(by_eid[e - er.start]) - ty.etype_first_orig[t];
      a.push(rows.data() + row * d, static_cast<size_t>(d));
    }
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  for (int t = 0; trainers && t < ty.num_etypes(); ++t) {
    Appender<int64_t> a(*w);
    for (int64_t e = L_.etype_map[t][p_].start; e < L_.etype_map[t][p_].end; ++e) a.push(L_.piece[dst_of[e - er.start]]);
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  for (const NamedTensor& x : g_.edge_tensors) {
    DGLD_RETURN_IF_ERROR(write_named_rows(*w, x, [&](auto&& row) {
      const IdRange tr = L_.etype_map[x.type][p_];
      for (int64_t e = tr.start; e < tr.end; ++e) {
        row(g_.orig_edge_id(by_eid[e - er.start]) - ty.etype_first_orig[x.type]);
      }
    }));
  }
  return w->finish();
}

Status PartitionWriter::Impl::write_edge_feats(const fs::path& path) {
  if (g_.types.present()) return write_typed_edge_feats(path);
  const int64_t e_inner = L_.edge_map[p_].size();
  const std::string et = PartitionConfig{}.etype + "/";
  std::vector<ArraySpec> specs;
  const bool mask = link_.present;
  if (mask) specs.push_back({link_train_mask_name(PartitionConfig{}), DType::uint8, {e_inner}});
  const bool trainers = o_.num_trainers_per_machine > 1;  // DGL's: each edge's destination's trainer
  if (trainers) specs.push_back({et + "trainer_id", DType::int64, {e_inner}});
  for (const NamedTensor& t : g_.edge_tensors) specs.push_back(named_spec(et, t, e_inner));
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::edge_features, std::move(specs)));
  if (mask) {
    Appender<uint8_t> a(*w);
    for_each_inner_edge([&](int64_t k) { a.push(g_.edge_train_mask[k]); });
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  if (trainers) {
    Appender<int64_t> a(*w);
    for (int64_t v = range_.start; v < range_.end; ++v) {
      const int32_t o = L_.new2orig[v];
      for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) a.push(L_.piece[o]);
    }
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  for (const NamedTensor& t : g_.edge_tensors) {
    DGLD_RETURN_IF_ERROR(write_named_rows(*w, t, [&](auto&& row) {
      for_each_inner_edge([&](int64_t k) { row(g_.orig_edge_id(k)); });
    }));
  }
  return w->finish();
}

ArraySpec PartitionWriter::Impl::named_spec(const std::string& prefix, const NamedTensor& t, int64_t rows) {
  std::vector<int64_t> shape = t.shape;
  shape[0] = rows;
  return {prefix + t.name, t.dtype, std::move(shape)};
}

Status PartitionWriter::Impl::write_link_split(const fs::path& path) {
  namespace la = link_arrays;
  const int64_t k = link_.num_negatives;
  const HeldOutEdges* sets[2] = {&link_.valid, &link_.test};
  std::vector<ArraySpec> specs = {{la::kMeta, DType::int64, {la::kMetaSize}}};
  for (int s = 0; s < 2; ++s) {
    const int64_t n = static_cast<int64_t>(buckets_[p_][s].size());
    const std::string set = std::string(la::kSets[s]) + "/";
    for (const char* name : {la::kSrc, la::kDst, la::kOrigSrc, la::kOrigDst}) {
      specs.push_back({set + name, DType::int64, {n}});
    }
    if (k > 0) specs.push_back({set + la::kNegDst, DType::int64, {n, k}});
  }
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::link_split, std::move(specs)));
  std::vector<int64_t> meta(la::kMetaSize, 0);
  meta[la::kMetaPartId] = p_;
  meta[la::kMetaNumParts] = L_.num_parts;
  meta[la::kMetaNumNegatives] = k;
  DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(meta)));
  for (int s = 0; s < 2; ++s) {
    const HeldOutEdges& e = *sets[s];
    const std::vector<int64_t>& idx = buckets_[p_][s];
    auto column = [&](auto&& value) -> Status {
      Appender<int64_t> a(*w);
      for (int64_t i : idx) a.push(value(i));
      return a.finish();
    };
    DGLD_RETURN_IF_ERROR(column([&](int64_t i) -> int64_t { return L_.orig2new[e.src[i]]; }));
    DGLD_RETURN_IF_ERROR(column([&](int64_t i) -> int64_t { return L_.orig2new[e.dst[i]]; }));
    DGLD_RETURN_IF_ERROR(column([&](int64_t i) -> int64_t { return e.src[i]; }));
    DGLD_RETURN_IF_ERROR(column([&](int64_t i) -> int64_t { return e.dst[i]; }));
    if (k > 0) {
      Appender<int64_t> a(*w);
      for (int64_t i : idx) {
        for (int64_t j = 0; j < k; ++j) a.push(L_.orig2new[e.neg[i * k + j]]);
      }
      DGLD_RETURN_IF_ERROR(a.finish());
    }
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
