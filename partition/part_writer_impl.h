#pragma once
// PartitionWriter's implementation class (part_writer.h), private to
// part_writer.cpp (graph and node files) and part_writer_edges.cpp (edge
// feature and link split files).

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <utility>
#include <vector>

#include "common/part_config.h"
#include "common/partition/array_file.h"
#include "common/partition/graph_file.h"
#include "common/partition/link_split.h"
#include "common/partition/partition.h"
#include "partition/part_writer.h"

namespace dgld {
namespace part_writer_detail {

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

}  // namespace part_writer_detail

using part_writer_detail::Appender;

class PartitionWriter::Impl {
 public:
  Impl(const Layout& L, const PartitionOptions& o, const LinkSplitResult& link, const LinkBuckets& buckets)
      : L_(L), g_(L.g), o_(o), link_(link), buckets_(buckets), g2l_(g_.num_nodes, -1) {}

  Status write(int p, const std::filesystem::path& dir, PartStats* st, int64_t* cut);

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

  // Calls f(original destination, original CSC position) for every inner
  // edge, in global edge id order: the CSC order, unless the layout numbers
  // edges off it (Layout::slot_eid: typed graphs, one partition keeping the
  // input's edge ids).
  template <typename F>
  void for_each_inner_edge_at(F&& f) const {
    if (L_.slot_eid.empty()) {
      for (int64_t v = range_.start; v < range_.end; ++v) {
        const int32_t o = L_.new2orig[v];
        for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) f(o, k);
      }
      return;
    }
    for (const auto& [o, k] : inner_by_id_) f(o, k);
  }
  // Fills inner_by_id_ for the current partition when edge ids are not the
  // CSC order (once per partition, for every array written in id order).
  void index_inner_edges() {
    inner_by_id_.clear();
    if (L_.slot_eid.empty()) return;
    const IdRange er = L_.edge_map[p_];
    inner_by_id_.resize(static_cast<size_t>(er.size()));
    for (int64_t v = range_.start; v < range_.end; ++v) {
      const int32_t o = L_.new2orig[v];
      for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) inner_by_id_[L_.new_eid(o, k) - er.start] = {o, k};
    }
  }
  // The same, f(original CSC position).
  template <typename F>
  void for_each_inner_edge(F&& f) const {
    for_each_inner_edge_at([&](int32_t, int64_t k) { f(k); });
  }

  void count_rows();

  // Out-edges of inner nodes, filled by a second full scan.
  void fill_out_edges(std::vector<int64_t>* indices, std::vector<int64_t>* eids) const;

  Status write_graph(const std::filesystem::path& path);

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
  Status write_typed_node_feats(const std::filesystem::path& path);

  Status write_node_feats(const std::filesystem::path& path);

  // The inner edges' tensors: the link split's train mask, if any, and the
  // graph's named edge tensors.
  Status write_edge_feats(const std::filesystem::path& path);
  // Heterogeneous graphs: "<src:rel:dst>/features" for each edge type with
  // features, "<src:rel:dst>/trainer_id" with several trainers per machine and
  // the named tensors, rows in edge id order over the partition's edges of
  // that type.
  Status write_typed_edge_feats(const std::filesystem::path& path);

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
  Status write_link_split(const std::filesystem::path& path);

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
  std::vector<std::pair<int32_t, int64_t>> inner_by_id_;  // (destination, CSC position) by edge id; see above
  std::vector<int> halo_depth_;
  std::vector<int64_t> out_count_, in_indptr_, out_indptr_;
};

}  // namespace dgld
