#include "partition/layout.h"

#include <algorithm>
#include <numeric>

namespace dgld {

namespace {

// Heterogeneous graphs: edge ids partition-major, then by type, then CSC slot.
void number_typed_edges(Layout* L) {
  const GraphData& g = L->g;
  const int ne = g.types.num_etypes();
  L->etype_map.assign(ne, {});
  L->slot_eid.resize(static_cast<size_t>(g.num_edges()));
  std::vector<int64_t> next(ne);
  for (int p = 0; p < L->num_parts; ++p) {
    const IdRange nodes = L->node_map[p];
    std::fill(next.begin(), next.end(), 0);
    for (int64_t v = nodes.start; v < nodes.end; ++v) {
      const int32_t o = L->new2orig[v];
      for (int64_t k = g.indptr[o]; k < g.indptr[o + 1]; ++k) ++next[g.edge_type[k]];
    }
    int64_t at = L->edge_map[p].start;
    for (int t = 0; t < ne; ++t) {
      L->etype_map[t].push_back({at, at + next[t]});
      next[t] = at;
      at += L->etype_map[t].back().size();
    }
    for (int64_t v = nodes.start; v < nodes.end; ++v) {
      const int32_t o = L->new2orig[v];
      for (int64_t k = g.indptr[o], slot = L->new_indptr[v]; k < g.indptr[o + 1]; ++k, ++slot) {
        L->slot_eid[slot] = next[g.edge_type[k]]++;
      }
    }
  }
}

// One partition keeping the input's edge ids (build_layout): slot_eid =
// each CSC slot's original id (node ids are the original ones, so slot k is
// CSC position k), when those ids are [0, E) once each and, on a typed graph,
// every type's edges hold the ids of its range.
void keep_input_edge_ids(Layout* L) {
  const GraphData& g = L->g;
  const int64_t e = g.num_edges();
  std::vector<int64_t> ids(static_cast<size_t>(e));
  std::vector<uint8_t> seen(static_cast<size_t>(e), 0);
  for (int64_t k = 0; k < e; ++k) {
    const int64_t id = g.orig_edge_id(k);
    if (id < 0 || id >= e || seen[id]) return;
    seen[id] = 1;
    if (g.types.present()) {
      const IdRange& r = L->etype_map[g.edge_type[k]][0];
      if (id < r.start || id >= r.end) return;
    }
    ids[k] = id;
  }
  L->slot_eid = std::move(ids);
}

}  // namespace

void build_layout(int trainers, Layout* L, bool keep_edge_ids) {
  const GraphData& g = L->g;
  const int64_t n = g.num_nodes;
  const int nt = g.types.present() ? g.types.num_ntypes() : 1;
  // Bucket of a node: (partition, type, piece within the partition).
  const int64_t buckets = int64_t{L->num_parts} * nt * trainers;
  std::vector<int32_t> type(g.types.present() ? n : 0);
  for (int t = 0; t < (g.types.present() ? nt : 0); ++t) {
    std::fill(type.begin() + g.types.ntype_offset[t], type.begin() + g.types.ntype_offset[t + 1], t);
  }
  const bool keep_ids = L->num_parts == 1;  // DGL's one partition: the input's ids
  auto bucket = [&](int64_t v) -> int64_t {
    const int32_t piece = L->piece[v];
    const int64_t part = piece / trainers, t = type.empty() ? 0 : type[v];
    return (part * nt + t) * trainers + (keep_ids ? 0 : piece % trainers);
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
  if (g.types.present()) number_typed_edges(L);
  if (keep_ids && keep_edge_ids) keep_input_edge_ids(L);
}

}  // namespace dgld
