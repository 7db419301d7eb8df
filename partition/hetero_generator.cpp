#include "partition/hetero_generator.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <functional>
#include <map>

#include "common/logging.h"
#include "partition/hetero_input.h"
#include "common/random.h"
#include "partition/generate_keys.h"

namespace dgld {
namespace {

using Rng = GeneratorStream;

// Streams distinct from sbm's (a different salt keeps them unrelated to an sbm graph
// of the same seed).
enum Stream : uint64_t {
  kPaperClass = 101,
  kAuthorClass,
  kWrites,
  kCites,
  kVenue,
  kTopic,
  kPaperFeature,
  kTopicFeature,
  kCentroid,
  kSplit,
};

enum Ntype : int32_t { kPaper = 0, kAuthor, kVenueT, kTopicT };

// n unit gaussians (Box-Muller, two per pair of uniforms).
void gaussians(Rng& r, float* out, int n) {
  for (int j = 0; j < n; j += 2) {
    const double u1 = 1.0 - r.uniform(), u2 = r.uniform();
    const double rad = std::sqrt(-2.0 * std::log(u1));
    out[j] = static_cast<float>(rad * std::cos(2 * M_PI * u2));
    if (j + 1 < n) out[j + 1] = static_cast<float>(rad * std::sin(2 * M_PI * u2));
  }
}

// A count around `mean`: uniform in [mean/2, 3*mean/2), rounded at random, at most `cap`.
int64_t draw_count(Rng& r, double mean, int64_t cap) {
  if (!(mean > 0)) return 0;
  const double x = mean * (0.5 + r.uniform());
  const double fl = std::floor(x);
  int64_t k = static_cast<int64_t>(fl) + (r.uniform() < x - fl ? 1 : 0);
  return std::min(k, cap);
}

// Members of each class: ids grouped by class, class c at [start[c], start[c+1]).
struct ClassIndex {
  std::vector<int64_t> start;
  std::vector<int32_t> ids;
  void build(const std::vector<int32_t>& cls, int classes) {
    start.assign(static_cast<size_t>(classes) + 1, 0);
    for (int32_t c : cls) ++start[c + 1];
    for (int c = 0; c < classes; ++c) start[c + 1] += start[c];
    ids.resize(cls.size());
    std::vector<int64_t> pos(start.begin(), start.end() - 1);
    for (size_t i = 0; i < cls.size(); ++i) ids[pos[cls[i]]++] = static_cast<int32_t>(i);
  }
  // With probability p_in a uniform member of class c (when it has one), else a
  // uniform id in [0, n).
  int64_t pick(Rng& r, int c, double p_in, int64_t n) const {
    const int64_t size = start[c + 1] - start[c];
    if (r.uniform() < p_in && size > 0) return ids[start[c] + static_cast<int64_t>(r.below(size))];
    return static_cast<int64_t>(r.below(static_cast<uint64_t>(n)));
  }
};

// Draws up to k distinct ids with `draw` (rejecting `exclude` and repeats), giving
// up after a bounded number of tries so a pathological setting still terminates.
template <typename F>
void draw_distinct(int64_t k, int64_t exclude, F&& draw, std::vector<int64_t>* out) {
  out->clear();
  for (int64_t tries = 0; static_cast<int64_t>(out->size()) < k && tries < 32 * k + 32; ++tries) {
    const int64_t v = draw();
    if (v == exclude || std::find(out->begin(), out->end(), v) != out->end()) continue;
    out->push_back(v);
  }
}

class HsbmSource final : public GraphSource {
 public:
  HsbmSource(HsbmParams p, bool add_reverse) : p_(p), add_reverse_(add_reverse) {}
  std::string describe() const override {
    return std::string("generate:hsbm(") + describe_hsbm(p_) +
           (add_reverse_ ? ", add_reverse)" : ")");
  }

  Status load_structure(GraphData* g) override {
    auto log = logger("partition");
    GraphTypes t;
    const int64_t counts[] = {p_.papers, p_.authors, p_.venues, p_.topics};
    t.ntype_offset.assign(1, 0);
    for (int i = 0; i < 4; ++i) {
      t.ntypes.push_back(kHsbmNtypes[i]);
      t.ntype_offset.push_back(t.ntype_offset.back() + counts[i]);
    }
    auto etype = [&](int32_t s, const char* rel, int32_t d) {
      CanonicalEtype e;
      e.src = t.ntypes[s];
      e.rel = rel;
      e.dst = t.ntypes[d];
      e.src_type = s;
      e.dst_type = d;
      t.etypes.push_back(e);
    };
    etype(kAuthor, "writes", kPaper);
    etype(kPaper, "cites", kPaper);
    etype(kPaper, "published_in", kVenueT);
    etype(kPaper, "has_topic", kTopicT);
    t.target = kPaper;
    t.feat_dim = {p_.feat_dim, 0, 0, p_.feat_dim};

    const int64_t P = p_.papers, A = p_.authors, V = p_.venues, T = p_.topics;
    std::vector<int32_t> paper_cls(P), author_cls(A), venue_cls(V);
    for (int64_t v = 0; v < P; ++v)
      paper_cls[v] = static_cast<int32_t>(Rng(p_.seed, kPaperClass, v).below(p_.classes));
    for (int64_t a = 0; a < A; ++a)
      author_cls[a] = static_cast<int32_t>(Rng(p_.seed, kAuthorClass, a).below(p_.classes));
    for (int64_t v = 0; v < V; ++v) venue_cls[v] = static_cast<int32_t>(v % p_.classes);
    ClassIndex papers, authors, venues;
    papers.build(paper_cls, p_.classes);
    authors.build(author_cls, p_.classes);
    venues.build(venue_cls, p_.classes);

    TypedEdgeList edges;
    std::vector<int64_t> picked;
    auto add = [&](int32_t et, int64_t s, int64_t d) {
      edges.src.push_back(static_cast<int32_t>(t.ntype_offset[t.etypes[et].src_type] + s));
      edges.dst.push_back(static_cast<int32_t>(t.ntype_offset[t.etypes[et].dst_type] + d));
      edges.etype.push_back(et);
    };
    // author:writes:paper
    for (int64_t v = 0; v < P; ++v) {
      Rng r(p_.seed, kWrites, v);
      const int64_t k = draw_count(r, p_.writes_per_paper, A);
      draw_distinct(
          k, -1, [&] { return authors.pick(r, paper_cls[v], p_.p_in, A); }, &picked);
      for (int64_t a : picked) add(0, a, v);
    }
    // paper:cites:paper (no self citations)
    for (int64_t v = 0; v < P; ++v) {
      Rng r(p_.seed, kCites, v);
      const int64_t k = draw_count(r, p_.cites_per_paper, P - 1);
      draw_distinct(
          k, v, [&] { return papers.pick(r, paper_cls[v], p_.p_in, P); }, &picked);
      for (int64_t u : picked) add(1, v, u);
    }
    // paper:published_in:venue (exactly one)
    for (int64_t v = 0; v < P; ++v) {
      Rng r(p_.seed, kVenue, v);
      add(2, v, venues.pick(r, paper_cls[v], p_.p_in, V));
    }
    // paper:has_topic:topic (uniform: no signal)
    for (int64_t v = 0; v < P; ++v) {
      Rng r(p_.seed, kTopic, v);
      const int64_t k = draw_count(r, p_.topics_per_paper, T);
      draw_distinct(
          k, -1, [&] { return static_cast<int64_t>(r.below(static_cast<uint64_t>(T))); }, &picked);
      for (int64_t u : picked) add(3, v, u);
    }
    log->info("hsbm: {} nodes, {} edges", t.ntype_offset.back(), edges.size());
    if (add_reverse_) DGLD_RETURN_IF_ERROR(add_reverse_relations(&t, &edges));
    const int64_t n = t.ntype_offset.back();
    build_typed_graph(n, &edges, g);
    g->feat_dim = 0;
    g->features.clear();

    g->labels.assign(static_cast<size_t>(n), -1);
    for (int64_t v = 0; v < P; ++v) g->labels[v] = paper_cls[v];
    if (p_.train + p_.val + p_.test > 0) {
      g->train_mask.assign(n, 0);
      g->val_mask.assign(n, 0);
      g->test_mask.assign(n, 0);
      for (int64_t v = 0; v < P; ++v) {
        const double u = Rng(p_.seed, kSplit, v).uniform();
        if (u < p_.train)
          g->train_mask[v] = 1;
        else if (u < p_.train + p_.val)
          g->val_mask[v] = 1;
        else if (u < p_.train + p_.val + p_.test)
          g->test_mask[v] = 1;
      }
    }
    g->types = std::move(t);
    return Status::ok();
  }

  Status load_features(GraphData* g) override {
    GraphTypes& t = g->types;
    const int d = p_.feat_dim;
    t.type_features.assign(t.ntypes.size(), {});
    std::vector<float> centroids(static_cast<size_t>(p_.classes) * d);
    for (int c = 0; c < p_.classes; ++c) {
      Rng r(p_.seed, kCentroid, static_cast<uint64_t>(c));
      gaussians(r, centroids.data() + static_cast<size_t>(c) * d, d);
    }
    const float scale = static_cast<float>(p_.centroid_scale);
    std::vector<float>& pf = t.type_features[kPaper];
    pf.resize(static_cast<size_t>(p_.papers) * d);
    for (int64_t v = 0; v < p_.papers; ++v) {
      Rng r(p_.seed, kPaperFeature, static_cast<uint64_t>(v));
      float* row = pf.data() + v * d;
      gaussians(r, row, d);
      const float* c = centroids.data() + g->labels[v] * d;
      for (int j = 0; j < d; ++j) row[j] += c[j] * scale;
    }
    std::vector<float>& tf = t.type_features[kTopicT];
    tf.resize(static_cast<size_t>(p_.topics) * d);
    for (int64_t v = 0; v < p_.topics; ++v) {
      Rng r(p_.seed, kTopicFeature, static_cast<uint64_t>(v));
      gaussians(r, tf.data() + v * d, d);
    }
    return Status::ok();
  }

 private:
  HsbmParams p_;
  bool add_reverse_;
};

}  // namespace

std::string describe_hsbm(const HsbmParams& p) {
  auto num = [](double x) {
    std::string s = std::to_string(x);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  return "papers=" + std::to_string(p.papers) + " authors=" + std::to_string(p.authors) +
         " venues=" + std::to_string(p.venues) + " topics=" + std::to_string(p.topics) +
         " classes=" + std::to_string(p.classes) + " feat_dim=" + std::to_string(p.feat_dim) +
         " writes_per_paper=" + num(p.writes_per_paper) +
         " cites_per_paper=" + num(p.cites_per_paper) +
         " topics_per_paper=" + num(p.topics_per_paper) + " p_in=" + num(p.p_in) +
         " centroid_scale=" + num(p.centroid_scale) + " seed=" + std::to_string(p.seed);
}

Result<HsbmParams> parse_hsbm_spec(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  if (name != "hsbm")
    return invalid_argument("--generate '" + spec + "': expected hsbm:key=value,...");
  HsbmParams p;
  GenerateKeys keys(spec);
  keys.add("papers", &p.papers);
  keys.add("authors", &p.authors);
  keys.add("venues", &p.venues);
  keys.add("topics", &p.topics);
  keys.add("classes", &p.classes);
  keys.add("feat_dim", &p.feat_dim);
  keys.add("writes_per_paper", &p.writes_per_paper);
  keys.add("cites_per_paper", &p.cites_per_paper);
  keys.add("topics_per_paper", &p.topics_per_paper);
  keys.add("p_in", &p.p_in);
  keys.add("centroid_scale", &p.centroid_scale);
  keys.add("train", &p.train);
  keys.add("val", &p.val);
  keys.add("test", &p.test);
  keys.add("seed", &p.seed);
  DGLD_RETURN_IF_ERROR(keys.parse());
  auto bad = [&](const std::string& what) { return keys.error(what); };
  if (p.papers < 2) return bad("papers must be >= 2");
  if (p.authors < 1) return bad("authors must be >= 1");
  if (p.topics < 1) return bad("topics must be >= 1");
  if (p.classes < 1 || p.classes > p.papers) return bad("classes must be in 1..papers");
  if (p.venues < p.classes) return bad("venues must be >= classes (every class has a venue)");
  if (p.papers > INT32_MAX || p.authors > INT32_MAX || p.venues > INT32_MAX ||
      p.topics > INT32_MAX || p.papers + p.authors + p.venues + p.topics > INT32_MAX) {
    return bad("papers + authors + venues + topics must be at most 2^31-1");
  }
  if (p.feat_dim < 1) return bad("feat_dim must be >= 1");
  if (!(p.writes_per_paper >= 0 && p.writes_per_paper <= static_cast<double>(p.authors))) {
    return bad("writes_per_paper must be in [0, authors]");
  }
  if (!(p.cites_per_paper >= 0 && p.cites_per_paper <= static_cast<double>(p.papers - 1))) {
    return bad("cites_per_paper must be in [0, papers - 1]");
  }
  if (!(p.topics_per_paper >= 0 && p.topics_per_paper <= static_cast<double>(p.topics))) {
    return bad("topics_per_paper must be in [0, topics]");
  }
  if (!(p.p_in >= 0 && p.p_in <= 1)) return bad("p_in must be in [0, 1]");
  if (!(p.centroid_scale >= 0) || !std::isfinite(p.centroid_scale))
    return bad("centroid_scale must be >= 0");
  if (!(p.train >= 0 && p.val >= 0 && p.test >= 0) || p.train + p.val + p.test > 1 + 1e-9) {
    return bad("train, val and test must be >= 0 and sum to at most 1");
  }
  return p;
}

std::unique_ptr<GraphSource> make_hsbm_source(const HsbmParams& params, bool add_reverse) {
  return std::make_unique<HsbmSource>(params, add_reverse);
}

}  // namespace dgld
