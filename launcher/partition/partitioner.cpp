#include "launcher/partition/partitioner.h"

#include "launcher/partition/staging.h"

#include <metis.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <numeric>
#include <random>
#include <thread>
#include <atomic>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/logging.h"
#include "common/part_config.h"
#include "common/partition/array_file.h"
#include "common/partition/link_split.h"
#include "common/partition/partition.h"

namespace dgld {
namespace fs = std::filesystem;
namespace {

static_assert(sizeof(idx_t) == sizeof(int32_t), "dgl-partition expects Debian's 32-bit METIS idx_t");

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

// Peak resident memory since the last reset_peak_rss() (VmHWM), or since the start
// when the kernel does not let us reset it.
int64_t phase_peak_rss_bytes() {
  int64_t kib = -1;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f)) {
      if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    }
    std::fclose(f);
  }
  return kib < 0 ? peak_rss_bytes() : kib * 1024;
}

void reset_peak_rss() {
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

// "rss 123 MiB, peak 456 MiB" for progress lines.
std::string memory_note() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  const double mib = 1 << 20;
  return fmt::format("rss {:.0f} MiB, phase peak {:.0f} MiB", static_cast<double>(resident) * ::sysconf(_SC_PAGESIZE) / mib,
                     static_cast<double>(phase_peak_rss_bytes()) / mib);
}


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

// ---------------------------------------------------------------- assignment

// Symmetric adjacency without self loops or duplicates, as METIS wants it.
Status build_metis_graph(GraphData& g, std::vector<idx_t>* xadj, std::vector<idx_t>* adjncy_store, idx_t** adjncy) {
  const int64_t n = g.num_nodes;
  auto too_big = [](int64_t entries) {
    return resource_exhausted("the symmetrised graph has " + std::to_string(entries) +
                              " adjacency entries; METIS (32-bit idx_t) takes at most 2^31-1");
  };
  xadj->resize(n + 1);
  if (g.symmetric_simple) {
    if (g.num_edges() > INT32_MAX) return too_big(g.num_edges());
    for (int64_t v = 0; v <= n; ++v) (*xadj)[v] = static_cast<idx_t>(g.indptr[v]);
    *adjncy = g.src.data();
    return Status::ok();
  }
  std::vector<int64_t> start(n + 1, 0);
  for (int64_t d = 0; d < n; ++d) {
    for (int64_t k = g.indptr[d]; k < g.indptr[d + 1]; ++k) {
      if (g.src[k] != d) {
        ++start[d + 1];
        ++start[g.src[k] + 1];
      }
    }
  }
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int32_t> adj(start[n]);
  {
    std::vector<int64_t> pos(start.begin(), start.end() - 1);
    for (int64_t d = 0; d < n; ++d) {
      for (int64_t k = g.indptr[d]; k < g.indptr[d + 1]; ++k) {
        const int32_t s = g.src[k];
        if (s != d) {
          adj[pos[d]++] = s;
          adj[pos[s]++] = static_cast<int32_t>(d);
        }
      }
    }
  }
  int64_t out = 0;
  for (int64_t v = 0; v < n; ++v) {
    auto b = adj.begin() + start[v], e = adj.begin() + start[v + 1];
    std::sort(b, e);
    auto u = std::unique(b, e);
    const int64_t row_begin = out;
    for (auto it = b; it != u; ++it) adj[out++] = *it;
    start[v] = row_begin;
  }
  start[n] = out;
  if (out > INT32_MAX) return too_big(out);
  for (int64_t v = 0; v <= n; ++v) (*xadj)[v] = static_cast<idx_t>(start[v]);
  adj.resize(out);
  adj.shrink_to_fit();
  *adjncy_store = std::move(adj);
  *adjncy = adjncy_store->data();
  return Status::ok();
}

Status metis_assign(GraphData& g, const PartitionOptions& o, std::vector<int32_t>* piece, double* metis_s) {
  auto log = logger("partition");
  const int64_t n = g.num_nodes;
  std::vector<idx_t> xadj, adj_store;
  idx_t* adjncy = nullptr;
  DGLD_RETURN_IF_ERROR(build_metis_graph(g, &xadj, &adj_store, &adjncy));
  // Constraint columns: node count (or train / non-train), then in-degree.
  idx_t ncon = o.balance_train ? 2 : 1;
  if (o.balance_edges) ++ncon;
  std::vector<idx_t> vwgt;
  if (ncon > 1 || o.balance_train) {
    vwgt.resize(static_cast<size_t>(n) * ncon);
    for (int64_t v = 0; v < n; ++v) {
      idx_t* w = &vwgt[v * ncon];
      int c = 0;
      if (o.balance_train) {
        w[c++] = g.train_mask[v] ? 1 : 0;
        w[c++] = g.train_mask[v] ? 0 : 1;
      } else {
        w[c++] = 1;
      }
      if (o.balance_edges) w[c++] = static_cast<idx_t>(g.indptr[v + 1] - g.indptr[v]);
    }
  }
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_OBJTYPE] = METIS_OBJTYPE_CUT;
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_SEED] = static_cast<idx_t>(o.seed & 0x7fffffff);
  idx_t nvtxs = static_cast<idx_t>(n);
  idx_t nparts = o.num_parts * o.num_trainers_per_machine;
  idx_t objval = 0;
  std::vector<idx_t> part(n);
  log->info("metis: {} nodes, {} adjacency entries, {} parts, {} constraint(s)", n, xadj[n], nparts, ncon);
  const auto t = Clock::now();
  const int ret = METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy, vwgt.empty() ? nullptr : vwgt.data(),
                                      nullptr, nullptr, &nparts, nullptr, nullptr, options, &objval, part.data());
  *metis_s = seconds_since(t);
  if (ret != METIS_OK) {
    return internal_error(std::string("METIS_PartGraphKway failed: ") +
                          (ret == METIS_ERROR_MEMORY ? "out of memory" : ret == METIS_ERROR_INPUT ? "bad input" : "error"));
  }
  log->info("metis: done in {:.2f} s, {} undirected edges cut ({})", *metis_s, objval, memory_note());
  piece->assign(part.begin(), part.end());
  return Status::ok();
}

// Balanced random assignment: a seeded shuffle cut into equal slices.
void random_assign(int64_t n, int pieces, uint64_t seed, std::vector<int32_t>* piece) {
  std::vector<int32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  piece->resize(n);
  for (int64_t i = 0; i < n; ++i) (*piece)[perm[i]] = static_cast<int32_t>(i * pieces / n);
}

// ---------------------------------------------------------------- layout

// The relabelling: new ids are partition-major (then trainer piece, then original id).
struct Layout {
  const GraphData& g;
  int num_parts = 1;
  std::vector<int32_t> piece, part;      // by original id
  std::vector<int32_t> new2orig, orig2new;
  std::vector<int64_t> new_indptr;       // in-edge offsets in new id order = new edge ids
  std::vector<IdRange> node_map, edge_map;
  std::vector<std::vector<IdRange>> ntype_map;  // heterogeneous: [ntype][part]

  explicit Layout(const GraphData& graph) : g(graph) {}
  // New (global) id of the edge at original CSC position `pos` of row `orig_dst`.
  int64_t new_eid(int64_t orig_dst, int64_t pos) const {
    return new_indptr[orig2new[orig_dst]] + (pos - g.indptr[orig_dst]);
  }
};

// Heterogeneous graphs: partition-major, then node type, then trainer piece,
// then original id, so each type's nodes of a partition are one range.
void build_layout(int trainers, Layout* L) {
  const GraphData& g = L->g;
  const int64_t n = g.num_nodes;
  const int nt = g.types.present() ? g.types.num_ntypes() : 1;
  // Bucket of a node: (partition, type, piece within the partition).
  const int64_t buckets = int64_t{L->num_parts} * nt * trainers;
  std::vector<int32_t> type(g.types.present() ? n : 0);
  for (int t = 0; t < (g.types.present() ? nt : 0); ++t) {
    std::fill(type.begin() + g.types.ntype_offset[t], type.begin() + g.types.ntype_offset[t + 1], t);
  }
  auto bucket = [&](int64_t v) -> int64_t {
    const int32_t piece = L->piece[v];
    const int64_t part = piece / trainers, t = type.empty() ? 0 : type[v];
    return (part * nt + t) * trainers + piece % trainers;
  };
  std::vector<int64_t> start(buckets + 1, 0);
  for (int64_t v = 0; v < n; ++v) ++start[bucket(v) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  L->new2orig.resize(n);
  L->orig2new.resize(n);
  L->part.resize(n);
  {
    std::vector<int64_t> pos(start.begin(), start.end() - 1);
    for (int64_t v = 0; v < n; ++v) {
      const int64_t id = pos[bucket(v)]++;
      L->new2orig[id] = static_cast<int32_t>(v);
      L->orig2new[v] = static_cast<int32_t>(id);
      L->part[v] = L->piece[v] / trainers;
    }
  }
  if (g.types.present()) {
    L->ntype_map.assign(nt, {});
    for (int p = 0; p < L->num_parts; ++p) {
      for (int t = 0; t < nt; ++t) {
        const int64_t b = (int64_t{p} * nt + t) * trainers;
        L->ntype_map[t].push_back({start[b], start[b + trainers]});
      }
    }
  }
  L->new_indptr.resize(n + 1);
  L->new_indptr[0] = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t o = L->new2orig[i];
    L->new_indptr[i + 1] = L->new_indptr[i] + (g.indptr[o + 1] - g.indptr[o]);
  }
  for (int p = 0; p < L->num_parts; ++p) {
    const IdRange r{start[int64_t{p} * nt * trainers], start[int64_t{p + 1} * nt * trainers]};
    L->node_map.push_back(r);
    L->edge_map.push_back({L->new_indptr[r.start], L->new_indptr[r.end]});
  }
}

// ---------------------------------------------------------------- one partition

// Indices of the valid and test edges whose destination each partition owns.
using LinkBuckets = std::vector<std::array<std::vector<int64_t>, 2>>;

class PartitionBuilder {
 public:
  PartitionBuilder(const Layout& L, const PartitionOptions& o, const LinkSplitResult& link, const LinkBuckets& buckets)
      : L_(L), g_(L.g), o_(o), link_(link), buckets_(buckets), g2l_(g_.num_nodes, -1) {}

  Status write(int p, const fs::path& dir, PartStats* st, int64_t* cut) {
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

 private:
  static constexpr int32_t kHaloMark = -2;

  bool is_inner_orig(int32_t orig) const { return L_.part[orig] == p_; }
  int64_t orig_of_local(int64_t local) const {
    return L_.new2orig[local < n_inner_ ? range_.start + local : halo_[local - n_inner_]];
  }
  // Rows of halo nodes at depth < num_hops hold all their in-edges; deeper ones
  // only the edges from inner nodes (out-edges of inner nodes).
  bool full_row(int64_t local) const { return local < n_inner_ || halo_depth_[local - n_inner_] < o_.num_hops; }

  void mark(int64_t new_id, int depth, std::vector<std::pair<int64_t, int>>* found) {
    if (g2l_[new_id] == -1) {
      g2l_[new_id] = kHaloMark;
      found->emplace_back(new_id, depth);
    }
  }

  void discover_halo(int64_t* cut) {
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

  void count_rows() {
    const int64_t n_local = n_inner_ + static_cast<int64_t>(halo_.size());
    in_indptr_.assign(n_local + 1, 0);
    for_each_in_edge([&](int64_t r, int64_t, int64_t) { ++in_indptr_[r + 1]; });
    std::partial_sum(in_indptr_.begin(), in_indptr_.end(), in_indptr_.begin());
    out_indptr_.assign(out_count_.begin(), out_count_.end());
    std::partial_sum(out_indptr_.begin(), out_indptr_.end(), out_indptr_.begin());
  }

  // Out-edges of inner nodes, filled by a second full scan.
  void fill_out_edges(std::vector<int64_t>* indices, std::vector<int64_t>* eids) const {
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

  Status write_graph(const fs::path& path) {
    namespace pa = part_arrays;
    const int64_t n_local = n_inner_ + static_cast<int64_t>(halo_.size());
    const int64_t e_local = in_indptr_.back(), e_inner = in_indptr_[n_inner_], e_out = out_indptr_.back();
    std::vector<ArraySpec> specs = {
        {pa::kMeta, DType::int64, {pa::kMetaSize}},
        {pa::kNodeGlobalId, DType::int64, {n_local}},
        {pa::kNodeInner, DType::uint8, {n_local}},
        {pa::kNodeOwner, DType::int32, {n_local}},
        {pa::kNodeOrigId, DType::int64, {n_inner_}},
        {pa::kInIndptr, DType::int64, {n_local + 1}},
        {pa::kInIndices, DType::int64, {e_local}},
        {pa::kInEids, DType::int64, {e_local}},
        {pa::kEdgeInner, DType::uint8, {e_local}},
        {pa::kEdgeOrigId, DType::int64, {e_inner}},
        {pa::kOutIndptr, DType::int64, {n_inner_ + 1}},
        {pa::kOutIndices, DType::int64, {e_out}},
        {pa::kOutEids, DType::int64, {e_out}},
    };
    const bool typed = g_.types.present();
    if (typed) specs.push_back({pa::kInEtype, DType::int32, {e_local}});
    DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::partition_graph, std::move(specs)));
    std::vector<int64_t> meta(pa::kMetaSize, 0);
    meta[pa::kMetaPartId] = p_;
    meta[pa::kMetaNumParts] = L_.num_parts;
    meta[pa::kMetaNumInnerNodes] = n_inner_;
    meta[pa::kMetaNumLocalNodes] = n_local;
    meta[pa::kMetaNumInnerEdges] = e_inner;
    meta[pa::kMetaNumLocalEdges] = e_local;
    meta[pa::kMetaNumOutEdges] = e_out;
    meta[pa::kMetaHaloHops] = o_.num_hops;
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
      for (int64_t v = range_.start; v < range_.end; ++v) {
        const int32_t o = L_.new2orig[v];
        for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) a.push(g_.orig_edge_id(k));
      }
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
  // type (docs/heterogeneous.md); "_N/trainer_id" over every inner node.
  Status write_typed_node_feats(const fs::path& path) {
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
    return w->finish();
  }

  Status write_node_feats(const fs::path& path) {
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
    return w->finish();
  }

  // The inner edges' tensors: the link split's train mask, if any.
  Status write_edge_feats(const fs::path& path) {
    const int64_t e_inner = L_.edge_map[p_].size();
    std::vector<ArraySpec> specs;
    const bool mask = link_.present;
    if (mask) specs.push_back({link_train_mask_name(PartitionConfig{}), DType::uint8, {e_inner}});
    DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::edge_features, std::move(specs)));
    if (mask) {
      Appender<uint8_t> a(*w);
      for (int64_t v = range_.start; v < range_.end; ++v) {
        const int32_t o = L_.new2orig[v];
        for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) a.push(g_.edge_train_mask[k]);
      }
      DGLD_RETURN_IF_ERROR(a.finish());
    }
    return w->finish();
  }

  // The held-out edges whose destination this partition owns (common/partition/link_split.h).
  Status write_link_split(const fs::path& path) {
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

double balance(const std::vector<PartStats>& parts, int64_t PartStats::*field) {
  int64_t total = 0, mx = 0;
  for (const auto& p : parts) {
    total += p.*field;
    mx = std::max(mx, p.*field);
  }
  if (total == 0) return 1.0;
  return static_cast<double>(mx) * static_cast<double>(parts.size()) / static_cast<double>(total);
}

}  // namespace

Status check_partition_options(const PartitionOptions& o) {
  if (o.num_parts < 1) return invalid_argument("--num-parts must be >= 1, got " + std::to_string(o.num_parts));
  if (o.part_method != "metis" && o.part_method != "random") {
    return invalid_argument("--part-method must be metis or random, got '" + o.part_method + "'");
  }
  if (o.num_hops < 1) return invalid_argument("--num-hops must be >= 1, got " + std::to_string(o.num_hops));
  if (o.num_trainers_per_machine < 1) {
    return invalid_argument("--num-trainers-per-machine must be >= 1, got " + std::to_string(o.num_trainers_per_machine));
  }
  if (o.graph_name.empty() || o.graph_name.find('/') != std::string::npos) {
    return invalid_argument("--graph-name must be a non-empty file name, got '" + o.graph_name + "'");
  }
  if (o.output.empty()) return invalid_argument("--output is required");
  return check_link_split_options(o.link);
}

Status partition_graph(GraphSource& source, const PartitionOptions& o, PartitionStats* stats) {
  auto log = logger("partition");
  const auto t_total = Clock::now();
  DGLD_RETURN_IF_ERROR(check_partition_options(o));
  DGLD_ASSIGN_OR_RETURN(auto staging, StagingDir::create(o.output, o.overwrite));

  GraphData g;
  auto t = Clock::now();
  log->info("loading {}", source.describe());
  DGLD_RETURN_IF_ERROR(source.load_structure(&g));
  stats->load_s = seconds_since(t);
  const int64_t n = g.num_nodes;
  if (n < 1) return invalid_argument(source.describe() + ": empty graph (no nodes)");
  if (g.num_edges() < 1) return invalid_argument(source.describe() + ": empty graph (no edges)");
  const int64_t pieces = int64_t{o.num_parts} * o.num_trainers_per_machine;
  if (pieces > n) {
    return invalid_argument("--num-parts " + std::to_string(o.num_parts) + " x --num-trainers-per-machine " +
                            std::to_string(o.num_trainers_per_machine) + " is larger than the node count " +
                            std::to_string(n));
  }
  if (o.balance_train && g.train_mask.empty()) {
    return invalid_argument("--balance-train needs a train mask, and " + source.describe() + " has none");
  }
  log->info("loaded {} nodes, {} edges in {:.2f} s ({})", n, g.num_edges(), stats->load_s, memory_note());
  PartitionOptions opts = o;  // a heterogeneous graph may turn train balancing on
  if (g.types.present()) {
    if (o.link.random || g.edge_split.present) {
      return invalid_argument(source.describe() +
                              ": link prediction splits of heterogeneous graphs are not supported yet");
    }
    // DGL partitions a heterogeneous graph with the target type's train mask as
    // a balance constraint; so does dgld when there is a train mask.
    if (!g.train_mask.empty() && !opts.balance_train && o.part_method == "metis" && pieces > 1) {
      opts.balance_train = true;
      log->info("heterogeneous graph: balancing the partitions' train nodes (as --balance-train)");
    }
  }

  // The link split comes first, so METIS and everything after see the graph
  // without its held-out edges.
  LinkSplitResult link;
  t = Clock::now();
  {
    LinkSplitOptions lo = o.link;
    lo.seed = o.seed;
    DGLD_RETURN_IF_ERROR(apply_link_split(lo, source.describe(), &g, &link));
    g.edge_split = {};
  }
  stats->link_split_s = seconds_since(t);

  Layout L(g);
  L.num_parts = o.num_parts;
  t = Clock::now();
  if (pieces == 1) {
    L.piece.assign(n, 0);
  } else if (o.part_method == "metis") {
    stats->peak_rss_outside_metis_bytes = phase_peak_rss_bytes();
    reset_peak_rss();
    DGLD_RETURN_IF_ERROR(metis_assign(g, opts, &L.piece, &stats->metis_s));
    stats->metis_peak_rss_bytes = phase_peak_rss_bytes();
    reset_peak_rss();
  } else {
    random_assign(n, static_cast<int>(pieces), o.seed, &L.piece);
  }
  stats->assign_s = seconds_since(t);

  t = Clock::now();
  build_layout(o.num_trainers_per_machine, &L);
  LinkBuckets link_buckets(o.num_parts);
  if (link.present) {
    const HeldOutEdges* sets[2] = {&link.valid, &link.test};
    for (int s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < sets[s]->size(); ++i) link_buckets[L.part[sets[s]->dst[i]]][s].push_back(i);
    }
  }
  stats->relabel_s = seconds_since(t);

  t = Clock::now();
  if (g.feat_dim > 0) log->info("loading node features ({} x {})", n, g.feat_dim);
  DGLD_RETURN_IF_ERROR(source.load_features(&g));
  log->info("features loaded ({})", memory_note());
  stats->features_s = seconds_since(t);

  t = Clock::now();
  stats->parts.assign(o.num_parts, {});
  stats->edge_cut = 0;
  PartitionConfig c;
  c.graph_name = o.graph_name;
  c.num_nodes = n;
  c.num_edges = g.num_edges();
  c.part_method = o.part_method;
  c.num_parts = o.num_parts;
  c.halo_hops = o.num_hops;
  c.node_map = L.node_map;
  c.edge_map = L.edge_map;
  c.num_trainers_per_machine = o.num_trainers_per_machine;
  if (g.types.present()) {
    GraphTypeInfo& ti = c.types;
    ti.ntypes = g.types.ntypes;
    ti.ntype_map = L.ntype_map;
    for (int t = 0; t < g.types.num_ntypes(); ++t) ti.ntype_count.push_back(g.types.count(t));
    ti.etype_count.assign(g.types.num_etypes(), 0);
    for (int32_t e : g.edge_type) ++ti.etype_count[e];
    for (const CanonicalEtype& e : g.types.etypes) {
      ti.etypes.push_back(e.name());
      ti.etype_src.push_back(e.src_type);
      ti.etype_dst.push_back(e.dst_type);
    }
    if (g.types.target >= 0) ti.target_ntype = g.types.ntypes[g.types.target];
    c.etype = "_E";  // edge_map: every partition's edges of all types (each edge's type is in in/etype)
  }
  for (int p = 0; p < o.num_parts; ++p) {
    const std::string dir = "part" + std::to_string(p);
    c.parts.push_back({dir + "/node_feat.dgld", dir + "/edge_feat.dgld", dir + "/graph.dgld",
                       link.present ? dir + "/link_split.dgld" : ""});
  }
  if (link.present) {
    LinkSplitInfo& ls = c.link_split;
    ls.present = true;
    ls.source = link.source;
    ls.fractions = link.fractions;
    ls.seed = link.seed;
    ls.num_negatives = link.num_negatives;
    ls.num_train = link.num_train;
    ls.num_valid = link.valid.size();
    ls.num_test = link.test.size();
    ls.symmetric = link.symmetric;
  }
  {
    // One builder per thread, each taking the next partition; the first error wins.
    const int threads = std::min<int>(o.num_parts, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    std::vector<Status> results(o.num_parts);
    std::vector<int64_t> cuts(o.num_parts, 0);
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    auto work = [&] {
      PartitionBuilder builder(L, o, link, link_buckets);
      for (int p; !failed && (p = next.fetch_add(1)) < o.num_parts;) {
        results[p] = builder.write(p, staging->path() / ("part" + std::to_string(p)), &stats->parts[p], &cuts[p]);
        if (!results[p].is_ok()) {
          failed = true;
          break;
        }
        log->info("partition {}: {} owned + {} halo nodes, {} local edges ({})", p, stats->parts[p].owned_nodes,
                  stats->parts[p].halo_nodes, stats->parts[p].local_edges, memory_note());
      }
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
    for (int p = 0; p < o.num_parts; ++p) {
      DGLD_RETURN_IF_ERROR(results[p]);
      stats->edge_cut += cuts[p];
    }
  }
  const std::string json_name = o.graph_name + ".json";
  DGLD_RETURN_IF_ERROR(validate_part_config(c, json_name));
  DGLD_RETURN_IF_ERROR(write_file_atomic(staging->path() / json_name, part_config_to_json(c)));
  DGLD_RETURN_IF_ERROR(staging->commit());
  stats->write_s = seconds_since(t);

  stats->num_nodes = n;
  stats->num_edges = g.num_edges();
  stats->feat_dim = g.feat_dim;
  stats->node_balance = balance(stats->parts, &PartStats::owned_nodes);
  stats->edge_balance = balance(stats->parts, &PartStats::owned_edges);
  stats->train_balance = balance(stats->parts, &PartStats::train_nodes);
  stats->link_split = link.present;
  stats->link_train = link.num_train;
  stats->link_valid = link.valid.size();
  stats->link_test = link.test.size();
  stats->link_negatives = link.num_negatives;
  stats->input_bytes = (n + 1) * 8 + g.num_edges() * 8 + n * g.feat_dim * 4;
  for (int t = 0; t < g.types.num_ntypes(); ++t) {
    stats->input_bytes += g.types.count(t) * g.types.feat_dim[t] * 4;
    std::string line = fmt::format("{} {}", g.types.ntypes[t], g.types.count(t));
    if (g.types.feat_dim[t] > 0) line += fmt::format(" ({} features)", g.types.feat_dim[t]);
    if (t == g.types.target) line += " [labelled]";
    stats->ntype_summary.push_back(std::move(line));
  }
  for (int e = 0; e < g.types.num_etypes(); ++e) {
    stats->etype_summary.push_back(fmt::format("{} {}", c.types.etypes[e], c.types.etype_count[e]));
  }
  stats->json_path = (staging->final_path() / json_name).string();
  stats->total_s = seconds_since(t_total);
  // Resetting VmHWM resets getrusage's figure too, so the whole-run peak is the max.
  stats->peak_rss_outside_metis_bytes = std::max(stats->peak_rss_outside_metis_bytes, phase_peak_rss_bytes());
  stats->peak_rss_bytes = std::max({peak_rss_bytes(), stats->metis_peak_rss_bytes, stats->peak_rss_outside_metis_bytes});
  return Status::ok();
}

std::string format_stats(const PartitionStats& s) {
  std::string out = fmt::format("partition config: {}\n", s.json_path);
  if (s.ntype_summary.empty()) {
    out += fmt::format("nodes {}  edges {}  feature dim {}\n", s.num_nodes, s.num_edges, s.feat_dim);
  } else {
    out += fmt::format("nodes {}  edges {}\n", s.num_nodes, s.num_edges);
    out += fmt::format("node types: {}\n", fmt::join(s.ntype_summary, ", "));
    out += fmt::format("edge types: {}\n", fmt::join(s.etype_summary, ", "));
  }
  out += fmt::format("edge cut {} ({:.2f}% of edges)\n", s.edge_cut,
                     s.num_edges ? 100.0 * static_cast<double>(s.edge_cut) / static_cast<double>(s.num_edges) : 0.0);
  out += fmt::format("{:>5} {:>12} {:>12} {:>13} {:>13} {:>13} {:>10}\n", "part", "owned", "halo", "owned edges",
                     "local edges", "out edges", "train");
  for (size_t i = 0; i < s.parts.size(); ++i) {
    const auto& p = s.parts[i];
    out += fmt::format("{:>5} {:>12} {:>12} {:>13} {:>13} {:>13} {:>10}\n", i, p.owned_nodes, p.halo_nodes,
                       p.owned_edges, p.local_edges, p.out_edges, p.train_nodes);
  }
  if (s.link_split) {
    out += fmt::format("link split: {} train / {} valid / {} test edges, {} negatives each\n", s.link_train,
                       s.link_valid, s.link_test, s.link_negatives);
  }
  out += fmt::format("balance (max/mean): nodes {:.3f}  edges {:.3f}  train {:.3f}\n", s.node_balance, s.edge_balance,
                     s.train_balance);
  out += fmt::format("time: load {:.2f} s, link split {:.2f} s, assign {:.2f} s (metis {:.2f} s), relabel {:.2f} s, "
                     "features {:.2f} s, write {:.2f} s, total {:.2f} s\n",
                     s.load_s, s.link_split_s, s.assign_s, s.metis_s, s.relabel_s, s.features_s, s.write_s, s.total_s);
  const double mib = 1 << 20;
  out += fmt::format("peak memory {:.1f} MiB: METIS call {:.1f} MiB, everything else {:.1f} MiB "
                     "(input CSR + features {:.1f} MiB)\n",
                     static_cast<double>(s.peak_rss_bytes) / mib, static_cast<double>(s.metis_peak_rss_bytes) / mib,
                     static_cast<double>(s.peak_rss_outside_metis_bytes) / mib, static_cast<double>(s.input_bytes) / mib);
  return out;
}

std::string stats_to_json(const PartitionStats& s) {
  nlohmann::json j;
  j["partition_config"] = s.json_path;
  j["num_nodes"] = s.num_nodes;
  j["num_edges"] = s.num_edges;
  j["feat_dim"] = s.feat_dim;
  j["edge_cut"] = s.edge_cut;
  j["edge_cut_fraction"] = s.num_edges ? static_cast<double>(s.edge_cut) / static_cast<double>(s.num_edges) : 0.0;
  j["parts"] = nlohmann::json::array();
  for (const auto& p : s.parts) {
    j["parts"].push_back({{"owned_nodes", p.owned_nodes}, {"halo_nodes", p.halo_nodes}, {"owned_edges", p.owned_edges},
                          {"local_edges", p.local_edges}, {"out_edges", p.out_edges}, {"train_nodes", p.train_nodes}});
  }
  j["balance"] = {{"nodes", s.node_balance}, {"edges", s.edge_balance}, {"train", s.train_balance}};
  if (s.link_split) {
    j["link_split"] = {{"num_train", s.link_train},
                       {"num_valid", s.link_valid},
                       {"num_test", s.link_test},
                       {"num_negatives", s.link_negatives}};
  }
  j["time_s"] = {{"load", s.load_s},         {"link_split", s.link_split_s}, {"assign", s.assign_s},
                 {"metis", s.metis_s},       {"relabel", s.relabel_s},       {"features", s.features_s},
                 {"write", s.write_s},       {"total", s.total_s}};
  j["peak_rss_bytes"] = s.peak_rss_bytes;
  j["metis_peak_rss_bytes"] = s.metis_peak_rss_bytes;
  j["peak_rss_outside_metis_bytes"] = s.peak_rss_outside_metis_bytes;
  j["input_bytes"] = s.input_bytes;
  return j.dump(2) + "\n";
}

}  // namespace dgld
