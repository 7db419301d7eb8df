#include "common/sampling/neighbor_sampling.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "common/sampling/id_map.h"
#include "common/random.h"
#include "common/sampling/thread_pool.h"

namespace dgld {

void SampledEdges::reserve(size_t n) {
  src.reserve(n);
  dst.reserve(n);
  eid.reserve(n);
}

void SampledEdges::append(const SampledEdges& other) {
  src.insert(src.end(), other.src.begin(), other.src.end());
  dst.insert(dst.end(), other.dst.begin(), other.dst.end());
  eid.insert(eid.end(), other.eid.begin(), other.eid.end());
  etype.insert(etype.end(), other.etype.begin(), other.etype.end());
}

Status map_to_global(std::span<int64_t> ids, std::span<const int64_t> local_to_global) {
  const auto n = static_cast<int64_t>(local_to_global.size());
  for (int64_t& id : ids) {
    if (id < 0 || id >= n) {
      return invalid_argument("local id " + std::to_string(id) + " outside the mapping [0, " +
                              std::to_string(n) + ")");
    }
    id = local_to_global[id];
  }
  return Status::ok();
}

namespace {

constexpr int64_t kGrain = 256;       // seeds per parallel chunk
constexpr int64_t kFloydLinear = 32;  // up to this fanout, Floyd checks picks by scanning
constexpr int64_t kDenseRatio = 4;    // degree <= ratio * fanout: partial Fisher-Yates
constexpr int64_t kMaxEdges = 0x7fffffff;  // a block indexes its nodes with int32

bool bad_weight(float w) { return !(w >= 0.0f) || !std::isfinite(w); }

// Picks positions for one seed. Positions are absolute offsets into
// adj.indices, written to out[0, count); count was computed by pick_count.
class SeedPicker {
 public:
  SeedPicker(const SampleOptions& opt, std::span<const float> weights)
      : opt_(opt), weights_(weights) {}

  // Number of edges the seed contributes, or -1 if a weight on its edges is bad.
  int64_t pick_count(int64_t begin, int64_t end) const {
    const int64_t degree = end - begin;
    if (degree == 0) return 0;
    int64_t avail = degree;
    if (!weights_.empty()) {
      avail = 0;
      for (int64_t p = begin; p < end; ++p) {
        const float w = weights_[p];
        if (bad_weight(w)) return -1;
        avail += w > 0.0f;
      }
      if (avail == 0) return 0;
    }
    if (opt_.fanout < 0) return avail;
    return opt_.replace ? opt_.fanout : std::min(opt_.fanout, avail);
  }

  void pick(int64_t begin, int64_t end, int64_t count, uint64_t key, int64_t* out) {
    if (count == 0) return;
    const int64_t degree = end - begin;
    // count < fanout means fewer candidates than the fanout: take them all.
    // (Weighted, count == fanout == candidates still takes all, via the keys.)
    const bool take_all = opt_.fanout < 0 ||
                          (!opt_.replace && (count < opt_.fanout || count == degree));
    StreamRng rng(opt_.rng_seed, key);
    if (weights_.empty()) {
      if (take_all) {
        for (int64_t i = 0; i < count; ++i) out[i] = begin + i;
      } else if (opt_.replace) {
        for (int64_t i = 0; i < count; ++i) out[i] = begin + static_cast<int64_t>(rng.below(degree));
      } else {
        pick_distinct(rng, degree, count, out);
        std::sort(out, out + count);
        for (int64_t i = 0; i < count; ++i) out[i] += begin;
      }
      return;
    }
    if (take_all) {
      int64_t n = 0;
      for (int64_t p = begin; p < end; ++p)
        if (weights_[p] > 0.0f) out[n++] = p;
    } else if (opt_.replace) {
      pick_weighted_replace(rng, begin, end, count, out);
    } else {
      pick_weighted_distinct(rng, begin, end, count, out);
    }
  }

 private:
  // `count` distinct offsets in [0, degree), count < degree.
  void pick_distinct(StreamRng& rng, int64_t degree, int64_t count, int64_t* out) {
    if (count <= kFloydLinear) {
      // Floyd: for j in [degree - count, degree), pick t in [0, j]; take j if t is taken.
      int64_t n = 0;
      for (int64_t j = degree - count; j < degree; ++j) {
        const auto t = static_cast<int64_t>(rng.below(j + 1));
        const bool taken = std::find(out, out + n, t) != out + n;
        out[n++] = taken ? j : t;
      }
    } else if (degree <= kDenseRatio * count) {
      perm_.resize(degree);
      for (int64_t i = 0; i < degree; ++i) perm_[i] = i;
      for (int64_t i = 0; i < count; ++i) {
        std::swap(perm_[i], perm_[i + static_cast<int64_t>(rng.below(degree - i))]);
        out[i] = perm_[i];
      }
    } else {
      taken_.clear();
      taken_.reserve(count);
      for (int64_t j = degree - count; j < degree; ++j) {
        const auto t = static_cast<int64_t>(rng.below(j + 1));
        if (!taken_.insert_or_find(t).second) taken_.insert_or_find(j);
      }
      std::copy(taken_.ids().begin(), taken_.ids().end(), out);
    }
  }

  // Draws proportional to weight by inverse transform over prefix sums.
  void pick_weighted_replace(StreamRng& rng, int64_t begin, int64_t end, int64_t count,
                             int64_t* out) {
    const int64_t degree = end - begin;
    prefix_.resize(degree);
    double total = 0;
    int64_t last_positive = 0;
    for (int64_t i = 0; i < degree; ++i) {
      const float w = weights_[begin + i];
      total += w;
      prefix_[i] = total;
      if (w > 0.0f) last_positive = i;
    }
    for (int64_t k = 0; k < count; ++k) {
      const double u = rng.uniform() * total;
      // First prefix strictly above u: its edge has positive weight.
      auto i = static_cast<int64_t>(std::upper_bound(prefix_.begin(), prefix_.end(), u) -
                                    prefix_.begin());
      out[k] = begin + std::min(i, last_positive);
    }
  }

  // Efraimidis-Spirakis: key = Exp(1) / w, keep the `count` smallest keys.
  void pick_weighted_distinct(StreamRng& rng, int64_t begin, int64_t end, int64_t count,
                              int64_t* out) {
    keys_.clear();
    for (int64_t p = begin; p < end; ++p) {
      const float w = weights_[p];
      if (w > 0.0f) keys_.emplace_back(-std::log1p(-rng.uniform()) / w, p);
    }
    std::nth_element(keys_.begin(), keys_.begin() + (count - 1), keys_.end());
    for (int64_t i = 0; i < count; ++i) out[i] = keys_[i].second;
    std::sort(out, out + count);
  }

  const SampleOptions& opt_;
  std::span<const float> weights_;
  std::vector<int64_t> perm_;
  std::vector<double> prefix_;
  std::vector<std::pair<double, int64_t>> keys_;
  IdMap taken_;
};

// The pickers of one call: one for an untyped call, one per edge type (each
// with its type's fanout and random stream) for a typed one. For each seed,
// for_each_segment calls f(picker, etype, begin, end) per run of one edge type.
class Pickers {
 public:
  Pickers(const std::vector<SampleOptions>& opts, const SampleExtras& extras) : etypes_(extras.etypes) {
    for (const auto& o : opts) pickers_.emplace_back(o, extras.weights);
  }
  template <typename F>
  void for_each_segment(int64_t begin, int64_t end, F&& f) {
    if (etypes_.empty()) {
      f(pickers_[0], 0, begin, end);
      return;
    }
    for (int64_t a = begin; a < end;) {
      const int32_t t = etypes_[a];
      int64_t b = a + 1;
      while (b < end && etypes_[b] == t) ++b;
      f(pickers_[t], t, a, b);
      a = b;
    }
  }

 private:
  std::span<const int32_t> etypes_;
  std::vector<SeedPicker> pickers_;
};

// One SampleOptions per picker: the call's own, or one per edge type.
std::vector<SampleOptions> picker_options(const SampleOptions& opt) {
  if (opt.etype_fanouts.empty()) return {opt};
  std::vector<SampleOptions> out;
  for (size_t t = 0; t < opt.etype_fanouts.size(); ++t) {
    SampleOptions o;
    o.fanout = opt.etype_fanouts[t];
    o.replace = opt.replace;
    o.rng_seed = derive_seed(opt.rng_seed, 0x7e7e0000ull + t);
    out.push_back(o);
  }
  return out;
}

Status check_inputs(const AdjacencyView& adj, std::span<const int64_t> seeds,
                    const SampleOptions& opt, const SampleExtras& extras) {
  if (!opt.etype_fanouts.empty()) {
    for (size_t t = 0; t < opt.etype_fanouts.size(); ++t) {
      if (opt.etype_fanouts[t] < -1) {
        return invalid_argument("fanout " + std::to_string(opt.etype_fanouts[t]) + " of edge type " +
                                std::to_string(t) + " is invalid: use -1 (all neighbours) or a count >= 0");
      }
    }
    if (extras.etypes.size() != adj.indices.size()) {
      return invalid_argument("per-edge-type fanouts need the edge type of each of the " +
                              std::to_string(adj.indices.size()) + " edges, got " +
                              std::to_string(extras.etypes.size()));
    }
    const auto ntypes = static_cast<int32_t>(opt.etype_fanouts.size());
    for (const int64_t s : seeds) {
      if (s < 0 || s >= adj.num_rows()) break;  // reported below
      for (int64_t p = adj.indptr[s]; p < adj.indptr[s + 1]; ++p) {
        if (extras.etypes[p] < 0 || extras.etypes[p] >= ntypes) {
          return invalid_argument("edge " + std::to_string(adj.eids[p]) + " has type " +
                                  std::to_string(extras.etypes[p]) + ", but fanouts are given for " +
                                  std::to_string(ntypes) + " edge types");
        }
      }
    }
  } else if (!extras.etypes.empty() && extras.etypes.size() != adj.indices.size()) {
    return invalid_argument("edge types have " + std::to_string(extras.etypes.size()) + " entries for " +
                            std::to_string(adj.indices.size()) + " edges");
  }
  if (opt.fanout < -1) {
    return invalid_argument("fanout " + std::to_string(opt.fanout) +
                            " is invalid: use -1 (all neighbours) or a count >= 0");
  }
  if (!extras.weights.empty() && extras.weights.size() != adj.indices.size()) {
    return invalid_argument("edge weights have " + std::to_string(extras.weights.size()) +
                            " entries for " + std::to_string(adj.indices.size()) + " edges");
  }
  if (!extras.stream_keys.empty() && extras.stream_keys.size() != seeds.size()) {
    return invalid_argument("stream_keys have " + std::to_string(extras.stream_keys.size()) +
                            " entries for " + std::to_string(seeds.size()) + " seeds");
  }
  const int64_t rows = adj.num_rows();
  for (const int64_t s : seeds) {
    if (s < 0 || s >= rows) {
      return invalid_argument("seed " + std::to_string(s) + " outside the node range [0, " +
                              std::to_string(rows) + ")");
    }
  }
  return Status::ok();
}

Status bad_weight_error(const AdjacencyView& adj, std::span<const float> weights, int64_t seed) {
  for (int64_t p = adj.indptr[seed]; p < adj.indptr[seed + 1]; ++p) {
    if (bad_weight(weights[p])) {
      return invalid_argument("edge weight " + std::to_string(weights[p]) + " of edge " +
                              std::to_string(adj.eids[p]) + " (seed " + std::to_string(seed) +
                              ") must be finite and >= 0");
    }
  }
  return internal_error("bad weight vanished");
}

}  // namespace

Result<SampledEdges> sample_neighbors(const AdjacencyView& adj, std::span<const int64_t> seed_rows,
                                      const SampleOptions& opt, const SampleExtras& extras) {
  DGLD_RETURN_IF_ERROR(check_inputs(adj, seed_rows, opt, extras));
  const auto n = static_cast<int64_t>(seed_rows.size());
  const int64_t* indptr = adj.indptr.data();

  // Pass 1: how many edges each seed gives, so pass 2 can write in place.
  // Scratch reused across calls. A named reference, since the workers must
  // see the caller's thread_local, not their own.
  thread_local std::vector<int64_t> offsets_scratch;
  std::vector<int64_t>& offsets = offsets_scratch;
  offsets.assign(n + 1, 0);
  const bool typed = !opt.etype_fanouts.empty();
  const std::vector<SampleOptions> opts = picker_options(opt);
  SampleExtras ex = extras;
  if (!typed) ex.etypes = {};  // types given without per-type fanouts: one fanout over all edges
  parallel_for(extras.pool, n, kGrain, [&](int64_t b, int64_t e) {
    Pickers pickers(opts, ex);
    for (int64_t i = b; i < e; ++i) {
      const int64_t s = seed_rows[i];
      int64_t count = 0;
      pickers.for_each_segment(indptr[s], indptr[s + 1], [&](SeedPicker& p, int32_t, int64_t lo, int64_t hi) {
        const int64_t c = p.pick_count(lo, hi);
        count = c < 0 || count < 0 ? -1 : count + c;
      });
      offsets[i + 1] = count;
    }
  });
  for (int64_t i = 0; i < n; ++i) {
    if (offsets[i + 1] < 0) return bad_weight_error(adj, extras.weights, seed_rows[i]);
    if (offsets[i + 1] > kMaxEdges - offsets[i]) {
      return resource_exhausted("sampling more than 2^31 - 1 edges in one call (fanout " +
                                std::to_string(opt.fanout) + ", " + std::to_string(n) + " seeds)");
    }
    offsets[i + 1] += offsets[i];
  }
  if (extras.seed_counts) {
    extras.seed_counts->resize(n);
    for (int64_t i = 0; i < n; ++i) (*extras.seed_counts)[i] = offsets[i + 1] - offsets[i];
  }

  // Pass 2: positions go into src first, then become (src, eid) in place.
  SampledEdges out;
  const bool fill_dst = extras.seed_counts == nullptr;
  out.src.resize(offsets[n]);
  if (fill_dst) out.dst.resize(offsets[n]);
  out.eid.resize(offsets[n]);
  if (typed) out.etype.resize(offsets[n]);
  const int64_t* indices = adj.indices.data();
  const int64_t* eids = adj.eids.data();
  parallel_for(extras.pool, n, kGrain, [&](int64_t b, int64_t e) {
    Pickers pickers(opts, ex);
    for (int64_t i = b; i < e; ++i) {
      const int64_t s = seed_rows[i];
      const uint64_t key = extras.stream_keys.empty() ? s : extras.stream_keys[i];
      const int64_t o = offsets[i], c = offsets[i + 1] - o;
      int64_t* src = out.src.data() + o;
      int64_t at = 0;
      pickers.for_each_segment(indptr[s], indptr[s + 1], [&](SeedPicker& p, int32_t t, int64_t lo, int64_t hi) {
        const int64_t k = p.pick_count(lo, hi);
        p.pick(lo, hi, k, key, src + at);
        if (typed) std::fill_n(out.etype.data() + o + at, k, t);
        at += k;
      });
      int64_t* eid = out.eid.data() + o;
      for (int64_t j = 0; j < c; ++j) {
        const int64_t p = src[j];
        eid[j] = eids[p];
        src[j] = indices[p];
      }
      if (fill_dst) std::fill_n(out.dst.data() + o, c, s);
    }
  });
  return out;
}

}  // namespace dgld
