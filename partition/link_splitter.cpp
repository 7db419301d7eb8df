#include "partition/link_splitter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <span>
#include <thread>

#include "common/logging.h"
#include "common/random.h"

namespace dgld {
namespace {

// ---------------------------------------------------------------- random streams
// SplitMix64 streams derived from (seed, tag, index): the same numbers on every
// platform and whatever the thread count.

// mix(a, b): a stream state keyed by two values.
uint64_t mix(uint64_t a, uint64_t b) { return SplitMix64(SplitMix64(a).next() ^ b).next(); }

using Stream = SplitMix64;

enum : uint64_t { kTagShuffle = 0x6c696e6b01, kTagNegatives = 0x6c696e6b10 };

template <typename F>
void parallel_for(int64_t n, F&& f) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  if (n < 4096 || threads == 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  const int64_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b >= e) break;
    pool.emplace_back([&f, b, e] {
      for (int64_t i = b; i < e; ++i) f(i);
    });
  }
  for (auto& th : pool) th.join();
}

std::string S(int64_t v) { return std::to_string(v); }

// ---------------------------------------------------------------- graph lookups

bool rows_sorted(const GraphData& g) {
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    if (!std::is_sorted(g.src.begin() + g.indptr[v], g.src.begin() + g.indptr[v + 1])) return false;
  }
  return true;
}

// CSC position of the first edge s -> d, or -1.
int64_t find_edge(const GraphData& g, bool sorted, int32_t s, int32_t d) {
  const auto b = g.src.begin() + g.indptr[d], e = g.src.begin() + g.indptr[d + 1];
  const auto it = sorted ? std::lower_bound(b, e, s) : std::find(b, e, s);
  return it != e && *it == s ? it - g.src.begin() : -1;
}

// Directed pairs s -> d grouped by d, each row sorted: the held-out edges (and
// their reverses on a symmetric graph).
struct PairIndex {
  std::vector<int64_t> indptr;
  std::vector<int32_t> src;

  void build(int64_t n, bool symmetric, std::initializer_list<const HeldOutEdges*> sets) {
    indptr.assign(static_cast<size_t>(n) + 1, 0);
    for (const HeldOutEdges* e : sets) {
      for (int64_t i = 0; i < e->size(); ++i) {
        ++indptr[e->dst[i] + 1];
        if (symmetric) ++indptr[e->src[i] + 1];
      }
    }
    std::partial_sum(indptr.begin(), indptr.end(), indptr.begin());
    src.resize(indptr.back());
    std::vector<int64_t> pos(indptr.begin(), indptr.end() - 1);
    for (const HeldOutEdges* e : sets) {
      for (int64_t i = 0; i < e->size(); ++i) {
        src[pos[e->dst[i]]++] = e->src[i];
        if (symmetric) src[pos[e->src[i]]++] = e->dst[i];
      }
    }
    for (int64_t d = 0; d < n; ++d) std::sort(src.begin() + indptr[d], src.begin() + indptr[d + 1]);
  }
  std::span<const int32_t> row(int32_t d) const {
    return {src.data() + indptr[d], static_cast<size_t>(indptr[d + 1] - indptr[d])};
  }
  bool contains(int32_t s, int32_t d) const {
    auto r = row(d);
    return std::binary_search(r.begin(), r.end(), s);
  }
};

// For every source of a held-out edge, the sorted distinct destinations a negative
// may not take: the node itself, its out-neighbours in the input graph (on a
// symmetric graph also its in-neighbours, the same set) and its held-out partners.
struct Forbidden {
  std::vector<int32_t> slot;  // node -> list index, or -1
  std::vector<int64_t> indptr;
  std::vector<int32_t> ids;

  std::span<const int32_t> of(int32_t u) const {
    const int32_t s = slot[u];
    return {ids.data() + indptr[s], static_cast<size_t>(indptr[s + 1] - indptr[s])};
  }

  void build(const GraphData& g, bool symmetric, std::initializer_list<const HeldOutEdges*> sets) {
    const int64_t n = g.num_nodes;
    slot.assign(static_cast<size_t>(n), -1);
    int32_t lists = 0;
    for (const HeldOutEdges* e : sets) {
      for (int32_t u : e->src) {
        if (slot[u] < 0) slot[u] = lists++;
      }
    }
    indptr.assign(static_cast<size_t>(lists) + 1, 0);
    auto each = [&](auto&& add) {
      for (int64_t d = 0; d < n; ++d) {
        for (int64_t k = g.indptr[d]; k < g.indptr[d + 1]; ++k) add(g.src[k], static_cast<int32_t>(d));
      }
      for (const HeldOutEdges* e : sets) {
        for (int64_t i = 0; i < e->size(); ++i) {
          add(e->src[i], e->dst[i]);
          if (symmetric) add(e->dst[i], e->src[i]);
        }
      }
      for (int64_t u = 0; u < n; ++u) add(static_cast<int32_t>(u), static_cast<int32_t>(u));
    };
    each([&](int32_t s, int32_t) {
      if (slot[s] >= 0) ++indptr[slot[s] + 1];
    });
    std::partial_sum(indptr.begin(), indptr.end(), indptr.begin());
    ids.resize(indptr.back());
    {
      std::vector<int64_t> pos(indptr.begin(), indptr.end() - 1);
      each([&](int32_t s, int32_t d) {
        if (slot[s] >= 0) ids[pos[slot[s]]++] = d;
      });
    }
    // Sort and deduplicate every list in place.
    int64_t w = 0;
    for (int32_t l = 0; l < lists; ++l) {
      const auto b = ids.begin() + indptr[l], e = ids.begin() + indptr[l + 1];
      std::sort(b, e);
      const auto u = std::unique(b, e);
      indptr[l] = w;
      for (auto it = b; it != u; ++it) ids[w++] = *it;
    }
    indptr[lists] = w;
    ids.resize(w);
  }
};

// The r-th node (0-based, ascending) not in the sorted distinct list `f`.
int32_t nth_allowed(std::span<const int32_t> f, uint64_t r) {
  // f[j] - j nodes are allowed below f[j]; that count never decreases with j.
  size_t lo = 0, hi = f.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (static_cast<uint64_t>(f[mid]) - mid <= r) lo = mid + 1; else hi = mid;
  }
  return static_cast<int32_t>(r + lo);
}

Status draw_negatives(const Forbidden& F, int64_t n, int64_t k, uint64_t seed, uint64_t set_tag,
                      const std::string& set, HeldOutEdges* e) {
  if (k == 0) return Status::ok();
  for (int64_t i = 0; i < e->size(); ++i) {
    if (static_cast<int64_t>(F.of(e->src[i]).size()) >= n) {
      return invalid_argument("cannot draw negatives for the " + set + " edge " + S(e->src[i]) + " -> " +
                              S(e->dst[i]) + ": node " + S(e->src[i]) +
                              " has an edge to every node, so no destination is a negative");
    }
  }
  e->neg.resize(static_cast<size_t>(e->size() * k));
  const uint64_t base = mix(mix(seed, kTagNegatives), set_tag);
  parallel_for(e->size(), [&](int64_t i) {
    Stream rng(mix(base, static_cast<uint64_t>(i)));
    const auto f = F.of(e->src[i]);
    const uint64_t allowed = static_cast<uint64_t>(n) - f.size();
    for (int64_t j = 0; j < k; ++j) e->neg[i * k + j] = nth_allowed(f, rng.below(allowed));
  });
  return Status::ok();
}

// Listed negatives: none may be the edge's source or a positive.
Status take_listed_negatives(const Forbidden& F, ListedNegatives& L, HeldOutEdges* e) {
  const int64_t k = L.k;
  for (int64_t i = 0; i < e->size(); ++i) {
    const int32_t u = e->src[i];
    const auto f = F.of(u);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t x = L.ids[i * k + j];
      const std::string at = L.path + ":" + S(L.line[i]) + ": column " + S(j + 1) + ": negative " + S(x);
      if (x == u) return invalid_argument(at + " is the edge's own source (edge " + S(u) + " -> " + S(e->dst[i]) + ")");
      if (std::binary_search(f.begin(), f.end(), x)) {
        return invalid_argument(at + " is a positive: " + S(u) + " -> " + S(x) +
                                " is an edge of the input graph or a held-out edge (expected a non-edge)");
      }
    }
  }
  e->neg = std::move(L.ids);
  return Status::ok();
}

// Removes every edge s -> d with (s, d) in `held` (all parallel copies) from the CSC.
int64_t remove_edges(const PairIndex& held, GraphData* g) {
  if (held.src.empty()) return 0;
  if (g->orig_eid.empty()) {
    g->orig_eid.resize(g->src.size());
    std::iota(g->orig_eid.begin(), g->orig_eid.end(), 0);
  }
  int64_t w = 0, b = 0;
  for (int64_t d = 0; d < g->num_nodes; ++d) {
    const int64_t e = g->indptr[d + 1];
    const auto r = held.row(static_cast<int32_t>(d));
    for (int64_t k = b; k < e; ++k) {
      const int32_t s = g->src[k];
      if (!r.empty() && std::binary_search(r.begin(), r.end(), s)) continue;
      g->src[w] = s;
      g->orig_eid[w] = g->orig_eid[k];
      ++w;
    }
    g->indptr[d + 1] = w;
    b = e;
  }
  const int64_t removed = static_cast<int64_t>(g->src.size()) - w;
  g->src.resize(w);
  g->orig_eid.resize(w);
  return removed;
}

// The distinct edges of the graph, packed (src << 32 | dst): u < v on a symmetric
// graph, every distinct directed pair otherwise.
std::vector<uint64_t> enumerate_units(const GraphData& g, bool symmetric) {
  auto pack = [](int32_t s, int64_t d) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(s)) << 32) | static_cast<uint32_t>(d);
  };
  std::vector<uint64_t> units;
  units.reserve(symmetric ? g.src.size() / 2 : g.src.size());
  std::vector<int32_t> row;
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    const auto b = g.src.begin() + g.indptr[v], e = g.src.begin() + g.indptr[v + 1];
    if (symmetric) {
      for (auto it = b; it != e; ++it) {
        if (*it < v) units.push_back(pack(*it, v));
      }
      continue;
    }
    row.assign(b, e);
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    for (int32_t s : row) units.push_back(pack(s, v));
  }
  return units;
}

void unpack_into(std::span<const uint64_t> units, HeldOutEdges* e) {
  e->src.reserve(units.size());
  e->dst.reserve(units.size());
  for (uint64_t x : units) {
    e->src.push_back(static_cast<int32_t>(x >> 32));
    e->dst.push_back(static_cast<int32_t>(x & 0xffffffffu));
  }
}

HeldOutEdges from_listed(const ListedEdges& l) {
  HeldOutEdges e;
  e.src = l.src;
  e.dst = l.dst;
  return e;
}

}  // namespace

Result<std::array<double, 3>> parse_link_split_fractions(const std::string& text) {
  std::array<double, 3> f{};
  const char* p = text.data();
  const char* end = p + text.size();
  for (int i = 0; i < 3; ++i) {
    while (p < end && *p == ' ') ++p;
    auto [next, ec] = std::from_chars(p, end, f[i]);
    if (ec != std::errc() || next == p) {
      return invalid_argument("--link-split '" + text + "': expected TRAIN,VALID,TEST (three fractions, e.g. "
                              "0.85,0.05,0.1)");
    }
    p = next;
    while (p < end && *p == ' ') ++p;
    if (i < 2) {
      if (p == end || *p != ',') {
        return invalid_argument("--link-split '" + text + "': expected TRAIN,VALID,TEST (three fractions, e.g. "
                                "0.85,0.05,0.1)");
      }
      ++p;
    }
  }
  if (p != end) {
    return invalid_argument("--link-split '" + text + "': expected exactly three fractions TRAIN,VALID,TEST");
  }
  LinkSplitOptions o;
  o.random = true;
  o.fractions = f;
  DGLD_RETURN_IF_ERROR(check_link_split_options(o));
  return f;
}

Status check_link_split_options(const LinkSplitOptions& o) {
  if (o.num_negatives < -1) {
    return invalid_argument("--link-negatives must be >= 0, got " + S(o.num_negatives));
  }
  if (!o.random) return Status::ok();
  double sum = 0;
  const char* names[] = {"TRAIN", "VALID", "TEST"};
  for (int i = 0; i < 3; ++i) {
    if (!std::isfinite(o.fractions[i]) || o.fractions[i] < 0) {
      return invalid_argument("--link-split: " + std::string(names[i]) + " fraction " +
                              std::to_string(o.fractions[i]) + " must be a number >= 0");
    }
    sum += o.fractions[i];
  }
  if (std::abs(sum - 1.0) > 1e-6) {
    return invalid_argument("--link-split: the fractions TRAIN,VALID,TEST must sum to 1, they sum to " +
                            std::to_string(sum));
  }
  return Status::ok();
}

Status apply_link_split(const LinkSplitOptions& o, const std::string& what, GraphData* g, LinkSplitResult* out) {
  auto log = logger("partition");
  *out = {};
  DGLD_RETURN_IF_ERROR(check_link_split_options(o));
  EdgeSplitInput& es = g->edge_split;
  if (!o.random && !es.present) {
    if (o.num_negatives >= 0) {
      return invalid_argument("--link-negatives needs --link-split, or an OGB edge split in the input, and " + what +
                              " has none");
    }
    return Status::ok();
  }
  if (o.random && es.present) {
    return invalid_argument("--link-split: " + what + " has an OGB edge split (" + es.train.path +
                            "); use either --link-split or the input's edge split, not both");
  }
  const int64_t n = g->num_nodes;
  const bool symmetric = g->symmetric_simple;
  out->present = true;
  out->seed = o.seed;
  out->symmetric = symmetric;
  int64_t k = o.num_negatives >= 0 ? o.num_negatives : kDefaultLinkNegatives;

  if (o.random) {
    out->source = "random";
    out->fractions.assign(o.fractions.begin(), o.fractions.end());
    std::vector<uint64_t> units = enumerate_units(*g, symmetric);
    const int64_t m = static_cast<int64_t>(units.size());
    const int64_t n_train = std::min<int64_t>(m, std::llround(o.fractions[0] * static_cast<double>(m)));
    const int64_t n_valid = std::min<int64_t>(m - n_train, std::llround(o.fractions[1] * static_cast<double>(m)));
    // The tail of a seeded Fisher-Yates shuffle: positions [n_train, m) of a
    // uniformly random permutation, drawn without permuting the training part.
    Stream rng(mix(o.seed, kTagShuffle));
    for (int64_t i = m - 1; i >= std::max<int64_t>(n_train, 1); --i) {
      const int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
      std::swap(units[i], units[j]);
    }
    unpack_into(std::span<const uint64_t>(units).subspan(n_train, n_valid), &out->valid);
    unpack_into(std::span<const uint64_t>(units).subspan(n_train + n_valid), &out->test);
    std::vector<uint64_t>().swap(units);
    log->info("link split: {} {} edges: {} train, {} valid, {} test", m, symmetric ? "undirected" : "directed",
              n_train, out->valid.size(), out->test.size());
  } else {
    out->source = "ogb:" + es.name;
    out->valid = from_listed(es.valid);
    out->test = from_listed(es.test);
    for (const ListedNegatives* l : {&es.valid_neg, &es.test_neg}) {
      if (!l->path.empty() && !l->line.empty()) k = l->k;
    }
  }
  out->num_negatives = k;

  // Negatives against the input graph, before the held-out edges leave it.
  {
    Forbidden F;
    F.build(*g, symmetric, {&out->valid, &out->test});
    const std::pair<ListedNegatives*, HeldOutEdges*> sets[] = {{&es.valid_neg, &out->valid},
                                                               {&es.test_neg, &out->test}};
    for (int s = 0; s < 2; ++s) {
      auto [listed, edges] = sets[s];
      if (!listed->path.empty() && !listed->line.empty()) {
        DGLD_RETURN_IF_ERROR(take_listed_negatives(F, *listed, edges));
      } else {
        DGLD_RETURN_IF_ERROR(draw_negatives(F, n, k, o.seed, static_cast<uint64_t>(s), s == 0 ? "valid" : "test",
                                            edges));
      }
    }
  }

  PairIndex held;
  held.build(n, symmetric, {&out->valid, &out->test});
  out->removed_edges = remove_edges(held, g);

  g->edge_train_mask.assign(g->src.size(), 0);
  if (o.random) {
    for (int64_t v = 0; v < n; ++v) {
      for (int64_t p = g->indptr[v]; p < g->indptr[v + 1]; ++p) {
        if (!symmetric || g->src[p] < v) g->edge_train_mask[p] = 1;
      }
    }
  } else {
    const bool sorted = rows_sorted(*g);
    const ListedEdges& t = es.train;
    for (size_t i = 0; i < t.size(); ++i) {
      const int64_t p = find_edge(*g, sorted, t.src[i], t.dst[i]);
      if (p < 0) {
        const std::string at = t.path + ":" + S(t.line[i]) + ": train edge " + S(t.src[i]) + "," + S(t.dst[i]);
        if (held.contains(t.src[i], t.dst[i])) {
          return invalid_argument(at + " is also a valid or test edge (held out of the graph)");
        }
        return invalid_argument(at + " is not an edge of the graph " + what + " (train edges must be)");
      }
      g->edge_train_mask[p] = 1;
    }
  }
  out->num_train = std::count(g->edge_train_mask.begin(), g->edge_train_mask.end(), uint8_t{1});
  log->info("link split ({}): {} train edges marked, {} valid and {} test edges held out ({} graph edges removed), "
            "{} negatives each",
            out->source, out->num_train, out->valid.size(), out->test.size(), out->removed_edges, k);
  return Status::ok();
}

}  // namespace dgld
