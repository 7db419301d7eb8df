#include "partition/assign.h"

#if DGLD_HAVE_METIS
#include <metis.h>
#endif

#include <algorithm>
#include <climits>
#include <numeric>
#include <random>
#include <string>

#include "common/logging.h"
#include "partition/progress.h"

namespace dgld {
#if DGLD_HAVE_METIS
namespace {

static_assert(sizeof(idx_t) == sizeof(int32_t), "dgl-partition expects Debian's 32-bit METIS idx_t");

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

}  // namespace

Status metis_assign(GraphData& g, const PartitionOptions& o, std::vector<int32_t>* piece, double* metis_s) {
  auto log = logger("partition");
  const int64_t n = g.num_nodes;
  std::vector<idx_t> xadj, adj_store;
  idx_t* adjncy = nullptr;
  DGLD_RETURN_IF_ERROR(build_metis_graph(g, &xadj, &adj_store, &adjncy));
  // Constraint columns: node count (or train / non-train, or one per balance
  // type as DGL's balance_ntypes), then in-degree.
  const int32_t types = g.balance_type.empty() ? 0 : g.num_balance_types;
  idx_t ncon = types > 0 ? types : o.balance_train ? 2 : 1;
  if (o.balance_edges) ++ncon;
  std::vector<idx_t> vwgt;
  if (ncon > 1 || o.balance_train || types > 0) {
    vwgt.resize(static_cast<size_t>(n) * ncon);
    for (int64_t v = 0; v < n; ++v) {
      idx_t* w = &vwgt[v * ncon];
      int c = 0;
      if (types > 0) {
        for (int32_t t = 0; t < types; ++t) w[c++] = g.balance_type[v] == t ? 1 : 0;
      } else if (o.balance_train) {
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
  const auto t = PartitionClock::now();
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

#else

Status metis_assign(GraphData&, const PartitionOptions&, std::vector<int32_t>*, double*) {
  return invalid_argument(
      "--part-method metis: this dgl-partition was built without METIS (meson -Dmetis=disabled, or libmetis-dev "
      "missing when it was configured); install libmetis-dev and reconfigure, or use --part-method random");
}
#endif  // DGLD_HAVE_METIS

void random_assign(int64_t n, int pieces, uint64_t seed, std::vector<int32_t>* piece) {
  std::vector<int32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  piece->resize(n);
  for (int64_t i = 0; i < n; ++i) (*piece)[perm[i]] = static_cast<int32_t>(i * pieces / n);
}

}  // namespace dgld
