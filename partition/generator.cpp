#include "partition/generator.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <atomic>
#include <functional>
#include <map>
#include <numeric>
#include <thread>

#include "common/logging.h"
#include "common/random.h"
#include "partition/generate_keys.h"

namespace dgld {
namespace {

using Rng = GeneratorStream;

enum Stream : uint64_t { kBlock = 1, kTheta, kEdges, kFeature, kCentroid, kSplit };

// Vose alias table over weights w[0..n).
struct Alias {
  std::vector<float> prob;
  std::vector<int32_t> alias;
  void build(const double* w, size_t n) {
    prob.assign(n, 1.0f);
    alias.resize(n);
    std::iota(alias.begin(), alias.end(), 0);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += w[i];
    if (n == 0 || sum <= 0) return;
    std::vector<double> q(n);
    std::vector<int32_t> small, large;
    for (size_t i = 0; i < n; ++i) {
      q[i] = w[i] * static_cast<double>(n) / sum;
      (q[i] < 1.0 ? small : large).push_back(static_cast<int32_t>(i));
    }
    while (!small.empty() && !large.empty()) {
      int32_t s = small.back(), l = large.back();
      small.pop_back();
      prob[s] = static_cast<float>(q[s]);
      alias[s] = l;
      q[l] -= 1.0 - q[s];
      if (q[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
  }
  // Index in [0, n) of the table (offset `base` into a shared table).
  int64_t sample(Rng& r, int64_t base, int64_t n) const {
    const int64_t i = base + static_cast<int64_t>(r.below(static_cast<uint64_t>(n)));
    return r.uniform() < prob[i] ? i : base + alias[i];
  }
};

int num_threads() { return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)); }

// Runs fn(begin, end) over [0, n) split in fixed chunks across threads.
void parallel_chunks(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t num_chunks = (n + chunk - 1) / chunk;
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c; (c = next.fetch_add(1)) < num_chunks;) fn(c * chunk, std::min(n, (c + 1) * chunk));
  };
  std::vector<std::thread> ts;
  for (int t = 1; t < num_threads(); ++t) ts.emplace_back(work);
  work();
  for (auto& t : ts) t.join();
}

// LSD radix sort of keys < 2^bits.
void radix_sort(std::vector<uint64_t>* keys, int bits) {
  constexpr int kDigit = 16;
  std::vector<uint64_t> tmp(keys->size());
  std::vector<size_t> count(1 << kDigit);
  for (int shift = 0; shift < bits; shift += kDigit) {
    std::fill(count.begin(), count.end(), 0);
    for (uint64_t k : *keys) ++count[(k >> shift) & 0xffff];
    size_t sum = 0;
    for (auto& c : count) {
      size_t t = c;
      c = sum;
      sum += t;
    }
    for (uint64_t k : *keys) tmp[count[(k >> shift) & 0xffff]++] = k;
    keys->swap(tmp);
  }
}

// n unit gaussians (Box-Muller, two per pair of uniforms).
void gaussians(Rng& r, float* out, int n) {
  for (int j = 0; j < n; j += 2) {
    const double u1 = 1.0 - r.uniform(), u2 = r.uniform();
    const double rad = std::sqrt(-2.0 * std::log(u1));
    out[j] = static_cast<float>(rad * std::cos(2 * M_PI * u2));
    if (j + 1 < n) out[j + 1] = static_cast<float>(rad * std::sin(2 * M_PI * u2));
  }
}

class SbmSource final : public GraphSource {
 public:
  explicit SbmSource(SbmParams p) : p_(p) {}
  std::string describe() const override { return "generate:sbm(" + describe_sbm(p_) + ")"; }

  Status load_structure(GraphData* g) override {
    auto log = logger("partition");
    const int64_t n = p_.nodes;
    g->num_nodes = n;
    g->labels.resize(n);
    std::vector<double> theta(n);
    for (int64_t v = 0; v < n; ++v) {
      g->labels[v] = static_cast<int64_t>(Rng(p_.seed, kBlock, v).below(p_.classes));
      const double u = Rng(p_.seed, kTheta, v).uniform();
      theta[v] = std::min(200.0, std::pow(1.0 - u, -1.0 / (p_.gamma - 1.0)));
    }
    const double mean_theta = std::accumulate(theta.begin(), theta.end(), 0.0) / static_cast<double>(n);

    // Stubs per node and their offsets into the key array.
    std::vector<int64_t> offset(n + 1, 0);
    for (int64_t v = 0; v < n; ++v) {
      const double want = p_.avg_degree * theta[v] / (2.0 * mean_theta);
      const double frac = want - std::floor(want);
      Rng r(p_.seed, kTheta, v);
      r.next();  // the first draw made theta
      offset[v + 1] = static_cast<int64_t>(want) + (r.uniform() < frac ? 1 : 0);
    }
    std::partial_sum(offset.begin(), offset.end(), offset.begin());

    // Alias tables: global by theta, and per block over the block's members.
    Alias global, per_block;
    global.build(theta.data(), n);
    std::vector<int64_t> block_start(p_.classes + 1, 0);
    for (int64_t v = 0; v < n; ++v) ++block_start[g->labels[v] + 1];
    std::partial_sum(block_start.begin(), block_start.end(), block_start.begin());
    std::vector<int32_t> members(n);
    {
      std::vector<int64_t> pos(block_start.begin(), block_start.end() - 1);
      for (int64_t v = 0; v < n; ++v) members[pos[g->labels[v]]++] = static_cast<int32_t>(v);
      std::vector<double> w(n);
      for (int64_t i = 0; i < n; ++i) w[i] = theta[members[i]];
      per_block.prob.resize(n);
      per_block.alias.resize(n);
      for (int b = 0; b < p_.classes; ++b) {
        Alias a;
        const int64_t s = block_start[b], e = block_start[b + 1];
        a.build(w.data() + s, static_cast<size_t>(e - s));
        std::copy(a.prob.begin(), a.prob.end(), per_block.prob.begin() + s);
        std::copy(a.alias.begin(), a.alias.end(), per_block.alias.begin() + s);
      }
    }
    std::vector<double>().swap(theta);

    int bits = 1;
    while ((int64_t{1} << bits) < n) ++bits;
    std::vector<uint64_t> keys(offset[n]);
    parallel_chunks(n, 1 << 16, [&](int64_t begin, int64_t end) {
      Rng r(p_.seed, kEdges, static_cast<uint64_t>(begin));
      for (int64_t v = begin; v < end; ++v) {
        const int64_t b = g->labels[v];
        for (int64_t k = offset[v]; k < offset[v + 1]; ++k) {
          int64_t u;
          if (r.uniform() < p_.p_in) {
            u = members[per_block.sample(r, block_start[b], block_start[b + 1] - block_start[b])];
          } else {
            u = global.sample(r, 0, n);
          }
          // Key 0 is the pair (0, 0), a self loop, so it marks every dropped edge.
          const uint64_t lo = static_cast<uint64_t>(std::min(u, v)), hi = static_cast<uint64_t>(std::max(u, v));
          keys[k] = u == v ? 0 : (lo << bits) | hi;
        }
      }
    });
    std::vector<int64_t>().swap(offset);
    log->info("sbm: drew {} edges, sorting", keys.size());
    radix_sort(&keys, 2 * bits);
    auto first = std::upper_bound(keys.begin(), keys.end(), uint64_t{0});
    auto last = std::unique(first, keys.end());
    const uint64_t mask = (uint64_t{1} << bits) - 1;

    // Symmetric CSC; rows come out sorted because the keys are sorted by (lo, hi).
    g->indptr.assign(n + 1, 0);
    for (auto it = first; it != last; ++it) {
      ++g->indptr[(*it >> bits) + 1];
      ++g->indptr[(*it & mask) + 1];
    }
    std::partial_sum(g->indptr.begin(), g->indptr.end(), g->indptr.begin());
    g->src.resize(g->indptr[n]);
    std::vector<int64_t> pos(g->indptr.begin(), g->indptr.end() - 1);
    for (auto it = first; it != last; ++it) {
      const int32_t lo = static_cast<int32_t>(*it >> bits), hi = static_cast<int32_t>(*it & mask);
      g->src[pos[hi]++] = lo;
      g->src[pos[lo]++] = hi;
    }
    g->orig_eid.clear();
    g->symmetric_simple = true;

    const bool split = p_.train + p_.val + p_.test > 0;
    if (split) {
      g->train_mask.assign(n, 0);
      g->val_mask.assign(n, 0);
      g->test_mask.assign(n, 0);
      for (int64_t v = 0; v < n; ++v) {
        const double u = Rng(p_.seed, kSplit, v).uniform();
        if (u < p_.train) g->train_mask[v] = 1;
        else if (u < p_.train + p_.val) g->val_mask[v] = 1;
        else if (u < p_.train + p_.val + p_.test) g->test_mask[v] = 1;
      }
    }
    g->feat_dim = p_.feat_dim;
    return Status::ok();
  }

  Status load_features(GraphData* g) override {
    if (p_.feat_dim == 0) return Status::ok();
    g->features.resize(static_cast<size_t>(g->num_nodes * p_.feat_dim));
    const std::vector<float> centroids = sbm_centroids(p_);
    parallel_chunks(g->num_nodes, 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t v = begin; v < end; ++v) {
        sbm_feature_row(p_, centroids.data() + g->labels[v] * p_.feat_dim, v, g->features.data() + v * p_.feat_dim);
      }
    });
    return Status::ok();
  }

 private:
  SbmParams p_;
};

}  // namespace

std::vector<float> sbm_centroids(const SbmParams& p) {
  std::vector<float> c(static_cast<size_t>(p.classes) * p.feat_dim);
  for (int b = 0; b < p.classes; ++b) {
    Rng r(p.seed, kCentroid, static_cast<uint64_t>(b));
    gaussians(r, c.data() + static_cast<size_t>(b) * p.feat_dim, p.feat_dim);
  }
  return c;
}

void sbm_feature_row(const SbmParams& p, const float* centroid, int64_t v, float* out) {
  Rng noise(p.seed, kFeature, static_cast<uint64_t>(v));
  gaussians(noise, out, p.feat_dim);
  const float scale = static_cast<float>(p.centroid_scale);
  for (int j = 0; j < p.feat_dim; ++j) out[j] += centroid[j] * scale;
}

std::string describe_sbm(const SbmParams& p) {
  return "nodes=" + std::to_string(p.nodes) + " avg_degree=" + std::to_string(p.avg_degree) +
         " classes=" + std::to_string(p.classes) + " feat_dim=" + std::to_string(p.feat_dim) +
         " p_in=" + std::to_string(p.p_in) + " seed=" + std::to_string(p.seed);
}

Result<SbmParams> parse_generator_spec(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  if (name != "sbm") return invalid_argument("--generate '" + spec + "': unknown generator '" + name + "' (known: sbm)");
  SbmParams p;
  GenerateKeys keys(spec);
  keys.add("nodes", &p.nodes);
  keys.add("avg_degree", &p.avg_degree);
  keys.add("classes", &p.classes);
  keys.add("feat_dim", &p.feat_dim);
  keys.add("p_in", &p.p_in);
  keys.add("gamma", &p.gamma);
  keys.add("centroid_scale", &p.centroid_scale);
  keys.add("train", &p.train);
  keys.add("val", &p.val);
  keys.add("test", &p.test);
  keys.add("seed", &p.seed);
  DGLD_RETURN_IF_ERROR(keys.parse());
  auto bad = [&](const std::string& what) { return keys.error(what); };
  if (p.nodes < 2 || p.nodes > INT32_MAX) return bad("nodes must be in 2..2^31-1");
  if (p.classes < 1 || p.classes > p.nodes) return bad("classes must be in 1..nodes");
  if (!(p.avg_degree > 0) || p.avg_degree >= static_cast<double>(p.nodes)) return bad("avg_degree must be in (0, nodes)");
  if (p.feat_dim < 0) return bad("feat_dim must be >= 0");
  if (!(p.p_in >= 0 && p.p_in <= 1)) return bad("p_in must be in [0, 1]");
  if (!(p.gamma > 2)) return bad("gamma must be > 2");
  if (p.train < 0 || p.val < 0 || p.test < 0 || p.train + p.val + p.test > 1 + 1e-9) {
    return bad("train, val and test must be >= 0 and sum to at most 1");
  }
  return p;
}

std::unique_ptr<GraphSource> make_sbm_source(const SbmParams& params) {
  return std::make_unique<SbmSource>(params);
}

}  // namespace dgld
