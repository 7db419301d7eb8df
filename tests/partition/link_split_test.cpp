// dgl-partition link-prediction splits: --link-split (symmetric and directed
// graphs), OGB edge splits with and without listed negatives, bad split files,
// --verify on good and tampered splits, the config fields and read_link_split.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "common/file_util.h"
#include "common/part_config.h"
#include "common/partition/link_split.h"
#include "common/partition/partition.h"
#include "partition/file_input.h"
#include "partition/generator.h"
#include "partition/partitioner.h"
#include "partition/tool.h"
#include "partition/verify.h"
#include "tests/partition/test_util.h"

namespace dgld {
namespace {
namespace fs = std::filesystem;
using testing::rewrite_array;
using testing::rewrite_arrays;
using testing::TempDir;
using testing::write_text;
using Pair = std::pair<int64_t, int64_t>;

// A small undirected graph in OGB's raw layout (DIR/ds/raw), each edge listed once
// in a random orientation; dgl-partition adds the reverses.
struct OgbData {
  TempDir dir;
  int64_t n;
  std::vector<Pair> lines;   // edge.csv, in order
  std::set<Pair> directed;   // both directions of every edge

  explicit OgbData(int64_t nodes = 300, int per_node = 3, uint64_t seed = 5) : n(nodes) {
    std::mt19937_64 rng(seed);
    std::set<Pair> undirected;
    for (int64_t v = 0; v < n; ++v) {
      for (int j = 0; j < per_node; ++j) {
        const int64_t u = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
        if (u == v || undirected.count({std::min(u, v), std::max(u, v)})) continue;
        undirected.insert({std::min(u, v), std::max(u, v)});
        lines.push_back(rng() % 2 ? Pair{u, v} : Pair{v, u});
      }
    }
    std::string edges, feats, labels;
    for (auto [u, v] : lines) {
      edges += std::to_string(u) + "," + std::to_string(v) + "\n";
      directed.insert({u, v});
      directed.insert({v, u});
    }
    for (int64_t v = 0; v < n; ++v) {
      feats += std::to_string(v % 7) + ".25,-1\n";
      labels += std::to_string(v % 4) + "\n";
    }
    write_text(root() / "raw" / "num-node-list.csv", std::to_string(n) + "\n");
    write_text(root() / "raw" / "edge.csv", edges);
    write_text(root() / "raw" / "node-feat.csv", feats);
    write_text(root() / "raw" / "node-label.csv", labels);
  }
  fs::path root() const { return dir / "ds"; }
  fs::path split(const std::string& name = "lp") const { return root() / "split" / name; }
  std::string spec() const { return "ogb:" + root().string(); }
  int64_t num_undirected() const { return static_cast<int64_t>(lines.size()); }
};

Status partition(const std::string& spec, const fs::path& out, int parts, const LinkSplitOptions& link,
                 uint64_t seed = 0, PartitionStats* stats_out = nullptr) {
  FileInputOptions in;
  in.spec = spec;
  auto src = make_file_source(in);
  if (!src.is_ok()) return src.status();
  PartitionOptions o;
  o.num_parts = parts;
  o.output = out;
  o.graph_name = "g";
  o.seed = seed;
  o.link = link;
  PartitionStats stats;
  Status st = partition_graph(**src, o, &stats);
  if (stats_out != nullptr) *stats_out = stats;
  return st;
}

LinkSplitOptions random_split(double train, double valid, double test, int64_t negatives = -1) {
  LinkSplitOptions l;
  l.random = true;
  l.fractions = {train, valid, test};
  l.num_negatives = negatives;
  return l;
}

// --verify passes and checked the link split.
void require_verified_split(const fs::path& json) { CHECK(testing::require_verified(json).link_split); }

// A partitioned graph read back in original ids.
struct Loaded {
  PartitionConfig c;
  std::vector<std::unique_ptr<MappedPartition>> parts;
  std::vector<LinkSplitPart> link;
  std::vector<int64_t> new2orig;
  std::map<Pair, int> edges;   // every edge of the graph (original ids) -> times marked in the train mask
  std::map<Pair, int> copies;  // -> parallel copies in the graph
  int64_t marked = 0;

  explicit Loaded(const fs::path& json) {
    auto cfg = load_part_config(json);
    REQUIRE(cfg.is_ok());
    c = *cfg;
    for (int i = 0; i < c.num_parts; ++i) {
      auto p = open_partition(c, i, true);
      REQUIRE(p.is_ok());
      for (int64_t o : (*p)->orig_node_ids()) new2orig.push_back(o);
      parts.push_back(std::move(p).value());
      auto l = read_link_split(c, i);
      INFO(l.status().to_string());
      REQUIRE(l.is_ok());
      link.push_back(std::move(l).value());
    }
    const std::string mask_name = link_train_mask_name(c);
    CHECK(mask_name == "_N:_E:_N/train_mask");
    for (const auto& p : parts) {
      const TensorView* mask = p->edge_tensor(mask_name);
      REQUIRE(mask != nullptr);
      REQUIRE(mask->dtype == DType::uint8);
      REQUIRE(mask->num_rows() == p->num_inner_edges());
      const auto& in = p->in_edges();
      for (int64_t r = 0; r < p->num_inner_nodes(); ++r) {
        for (int64_t k = in.indptr[r]; k < in.indptr[r + 1]; ++k) {
          const Pair e{new2orig[p->node_global_ids()[in.indices[k]]], new2orig[p->node_global_ids()[r]]};
          edges[e] += mask->as<uint8_t>()[k];
          copies[e] += 1;
          marked += mask->as<uint8_t>()[k];
        }
      }
    }
  }

  // Calls f(part, set index, LinkEdges, i) for every held-out edge.
  template <typename F>
  void each_held(F&& f) const {
    for (size_t p = 0; p < link.size(); ++p) {
      const LinkEdges* sets[2] = {&link[p].valid, &link[p].test};
      for (int s = 0; s < 2; ++s) {
        for (size_t i = 0; i < sets[s]->src.size(); ++i) f(static_cast<int>(p), s, *sets[s], i);
      }
    }
  }
  std::set<Pair> held_pairs() const {
    std::set<Pair> h;
    each_held([&](int, int, const LinkEdges& e, size_t i) { h.insert({e.orig_src[i], e.orig_dst[i]}); });
    return h;
  }
};

// The properties every link split has, against the input's edges.
void check_split(const Loaded& L, const std::set<Pair>& input, bool symmetric, bool random) {
  const std::set<Pair> held = L.held_pairs();
  int64_t counts[2] = {0, 0};
  L.each_held([&](int p, int s, const LinkEdges& e, size_t i) {
    counts[s]++;
    const int64_t u = e.orig_src[i], v = e.orig_dst[i];
    // Ids: new ids map back to the original ones; dst is owned by the partition.
    CHECK(L.new2orig[e.src[i]] == u);
    CHECK(L.new2orig[e.dst[i]] == v);
    CHECK(e.dst[i] >= L.c.node_map[p].start);
    CHECK(e.dst[i] < L.c.node_map[p].end);
    if (random) CHECK(input.count({u, v}) == 1);
    // Gone from the graph, both directions when symmetric.
    CHECK(L.edges.count({u, v}) == 0);
    if (symmetric) CHECK(L.edges.count({v, u}) == 0);
    // Negatives: never u, an input edge or a held-out edge.
    REQUIRE(e.neg_dst.size() == e.src.size() * static_cast<size_t>(e.num_negatives));
    for (int64_t j = 0; j < e.num_negatives; ++j) {
      const int64_t x = L.new2orig[e.neg_dst[i * e.num_negatives + j]];
      CHECK(x != u);
      CHECK(input.count({u, x}) == 0);
      CHECK(held.count({u, x}) == 0);
      if (symmetric) {
        CHECK(input.count({x, u}) == 0);
        CHECK(held.count({x, u}) == 0);
      }
    }
  });
  CHECK(counts[0] == L.c.link_split.num_valid);
  CHECK(counts[1] == L.c.link_split.num_test);
  CHECK(L.marked == L.c.link_split.num_train);
  int64_t num_edges = 0;
  for (const auto& [e, c] : L.copies) num_edges += c;
  CHECK(L.c.num_edges == num_edges);
  if (!random) return;
  // A random split keeps every other input edge, marked once per unit.
  for (const Pair& e : input) {
    const bool out = held.count(e) || (symmetric && held.count({e.second, e.first}));
    CHECK(L.edges.count(e) == (out ? 0u : 1u));
  }
  for (const auto& [e, m] : L.edges) {
    CHECK(input.count(e) == 1);
    if (symmetric) {
      // Exactly one direction of each training undirected edge is marked: src < dst.
      CHECK(m == (e.first < e.second ? 1 : 0));
      CHECK(m + L.edges.at({e.second, e.first}) == 1);
    } else {
      CHECK(m == L.copies.at(e));  // every remaining edge, parallel copies too
    }
  }
}

std::string read_bytes(const fs::path& p) {
  auto r = read_file(p);
  REQUIRE(r.is_ok());
  return *r;
}

TEST_CASE("a random link split of a symmetric graph: fractions, removal, train mask, negatives") {
  OgbData d;
  for (int parts : {1, 3}) {
    DYNAMIC_SECTION("parts=" << parts) {
      const fs::path out = d.dir / ("out" + std::to_string(parts));
      PartitionStats stats;
      Status st = partition(d.spec(), out, parts, random_split(0.7, 0.1, 0.2, 5), 11, &stats);
      INFO(st.to_string());
      REQUIRE(st.is_ok());
      require_verified_split(out / "g.json");
      Loaded L(out / "g.json");
      const LinkSplitInfo& ls = L.c.link_split;
      CHECK(ls.present);
      CHECK(ls.source == "random");
      CHECK(ls.fractions == std::vector<double>{0.7, 0.1, 0.2});
      CHECK(ls.seed == 11);
      CHECK(ls.num_negatives == 5);
      CHECK(ls.symmetric);
      // The fractions hold within rounding of the undirected edge count.
      const double m = static_cast<double>(d.num_undirected());
      CHECK(std::abs(static_cast<double>(ls.num_valid) - 0.1 * m) <= 1.0);
      CHECK(std::abs(static_cast<double>(ls.num_test) - 0.2 * m) <= 1.0);
      CHECK(ls.num_train + ls.num_valid + ls.num_test == d.num_undirected());
      CHECK(L.c.num_edges == 2 * ls.num_train);
      check_split(L, d.directed, /*symmetric=*/true, /*random=*/true);
      // The summary line.
      CHECK_THAT(format_stats(stats), Catch::Contains("link split: " + std::to_string(ls.num_train) + " train / " +
                                                      std::to_string(ls.num_valid) + " valid / " +
                                                      std::to_string(ls.num_test) + " test edges, 5 negatives each"));
      // Graph-servers publish every edge tensor: the mask's rows are the inner edges.
      for (int i = 0; i < parts; ++i) CHECK(fs::exists(out / ("part" + std::to_string(i)) / "link_split.dgld"));
    }
  }
}

TEST_CASE("a random link split is reproducible from its seed") {
  OgbData d;
  const auto split = random_split(0.8, 0.1, 0.1);
  REQUIRE(partition(d.spec(), d.dir / "a", 2, split, 3).is_ok());
  REQUIRE(partition(d.spec(), d.dir / "b", 2, split, 3).is_ok());
  REQUIRE(partition(d.spec(), d.dir / "c", 2, split, 4).is_ok());
  for (const char* f : {"g.json", "part0/link_split.dgld", "part1/link_split.dgld", "part0/edge_feat.dgld",
                        "part1/graph.dgld"}) {
    CHECK(read_bytes(d.dir / "a" / f) == read_bytes(d.dir / "b" / f));
  }
  // Another seed holds out other edges.
  Loaded a(d.dir / "a" / "g.json"), c(d.dir / "c" / "g.json");
  CHECK(a.c.link_split.num_negatives == kDefaultLinkNegatives);
  CHECK(a.c.link_split.num_valid == c.c.link_split.num_valid);
  CHECK(a.held_pairs() != c.held_pairs());
}

TEST_CASE("a random link split of a directed graph holds out directed edges") {
  TempDir dir;
  // Directed edges with reciprocal pairs, parallel copies and a self loop.
  std::set<Pair> input;
  std::string text;
  const int64_t n = 80;
  for (int64_t v = 0; v < n; ++v) {
    for (Pair e : {Pair{v, (v + 1) % n}, Pair{(v * 7) % n, v}, Pair{v, (v + 5) % n}}) {
      text += std::to_string(e.first) + "," + std::to_string(e.second) + "\n";
      input.insert(e);
    }
    if (v % 10 == 0) text += std::to_string(v) + "," + std::to_string((v + 1) % n) + "\n";  // a parallel copy
  }
  write_text(dir / "edges.csv", text);
  const std::string spec = "edges:" + (dir / "edges.csv").string();
  REQUIRE(partition(spec, dir / "out", 2, random_split(0.6, 0.2, 0.2, 4), 9).is_ok());
  require_verified_split(dir / "out" / "g.json");
  Loaded L(dir / "out" / "g.json");
  CHECK_FALSE(L.c.link_split.symmetric);
  CHECK(L.c.link_split.num_valid + L.c.link_split.num_test + static_cast<int64_t>(L.edges.size()) ==
        static_cast<int64_t>(input.size()));
  // Every remaining edge (parallel copies included) is marked.
  CHECK(L.c.link_split.num_train == L.c.num_edges);
  check_split(L, input, /*symmetric=*/false, /*random=*/true);
}

TEST_CASE("held-out edges and negatives use the node data's ids (generated graph)") {
  // SBM: the label is the block, and an edge stays inside its block with
  // probability p_in; so held-out edges join nodes of one label far more often
  // than negatives (uniform: about 1 / classes).
  SbmParams params;
  params.nodes = 8000;
  params.avg_degree = 10;
  params.classes = 4;
  params.feat_dim = 4;
  params.p_in = 0.8;
  params.seed = 2;
  TempDir dir;
  auto src = make_sbm_source(params);
  PartitionOptions o;
  o.num_parts = 2;
  o.output = dir / "out";
  o.graph_name = "g";
  o.seed = 3;
  o.link = random_split(0.85, 0.05, 0.1);
  PartitionStats stats;
  REQUIRE(partition_graph(*src, o, &stats).is_ok());
  require_verified_split(dir / "out" / "g.json");
  Loaded L(dir / "out" / "g.json");
  std::vector<int64_t> label;  // by new global id
  for (const auto& p : L.parts) {
    const TensorView* t = p->node_tensor("_N/labels");
    REQUIRE(t != nullptr);
    label.insert(label.end(), t->as<int64_t>().begin(), t->as<int64_t>().end());
  }
  int64_t pos_same = 0, pos = 0, neg_same = 0, neg = 0;
  L.each_held([&](int, int, const LinkEdges& e, size_t i) {
    pos_same += label[e.src[i]] == label[e.dst[i]];
    ++pos;
    for (int64_t j = 0; j < e.num_negatives; ++j) {
      neg_same += label[e.src[i]] == label[e.neg_dst[i * e.num_negatives + j]];
      ++neg;
    }
  });
  REQUIRE(pos > 0);
  const double pos_rate = static_cast<double>(pos_same) / static_cast<double>(pos);
  const double neg_rate = static_cast<double>(neg_same) / static_cast<double>(neg);
  INFO("same label: held-out " << pos_rate << ", negatives " << neg_rate);
  CHECK(pos_rate > 0.7);
  CHECK(neg_rate < 0.35);
  // Training edges (marked) are mostly inside blocks too.
  int64_t train_same = 0, train = 0;
  for (const auto& p : L.parts) {
    const auto mask = p->edge_tensor(link_train_mask_name(L.c))->as<uint8_t>();
    const auto& in = p->in_edges();
    for (int64_t r = 0; r < p->num_inner_nodes(); ++r) {
      for (int64_t k = in.indptr[r]; k < in.indptr[r + 1]; ++k) {
        if (!mask[k]) continue;
        train_same += label[p->node_global_ids()[in.indices[k]]] == label[p->node_global_ids()[r]];
        ++train;
      }
    }
  }
  CHECK(static_cast<double>(train_same) / static_cast<double>(train) > 0.7);
}

TEST_CASE("a link split of Cora (OGB raw layout)") {
  const fs::path cora = fs::path(DGLD_SOURCE_ROOT) / ".." / "shared" / "datasets" / "cora";
  if (!fs::exists(cora / "raw")) {
    WARN("skipping: " << cora.string() << " is absent");
    return;
  }
  TempDir dir;
  PartitionStats stats;
  REQUIRE(partition("ogb:" + cora.string(), dir / "out", 2, random_split(0.85, 0.05, 0.1), 0, &stats).is_ok());
  require_verified_split(dir / "out" / "g.json");
  Loaded L(dir / "out" / "g.json");
  // The node split (one column) is still read alongside.
  int64_t train_nodes = 0;
  for (const auto& s : stats.parts) train_nodes += s.train_nodes;
  CHECK(train_nodes == 140);
  const int64_t m = L.c.num_edges / 2 + L.c.link_split.num_valid + L.c.link_split.num_test;
  CHECK(m == 5278);
  CHECK(L.c.link_split.num_valid == std::llround(0.05 * m));
  CHECK(L.c.link_split.num_train == std::llround(0.85 * m));
}

// ---------------------------------------------------------------- OGB edge splits

// An edge split of OgbData: the first lines train, the next `valid`, then `test`.
struct OgbSplit {
  std::vector<Pair> train, valid, test;
  std::vector<std::vector<int64_t>> valid_neg, test_neg;

  OgbSplit(const OgbData& d, size_t n_valid, size_t n_test, size_t n_train) {
    for (size_t i = 0; i < d.lines.size(); ++i) {
      if (i < n_valid) valid.push_back(d.lines[i]);
      else if (i < n_valid + n_test) test.push_back(d.lines[i]);
      else if (train.size() < n_train) train.push_back(d.lines[i]);
    }
  }
  // k negatives per held-out edge that are neither edges nor the source.
  void make_negatives(const OgbData& d, int k) {
    auto pick = [&](const std::vector<Pair>& edges, std::vector<std::vector<int64_t>>* out) {
      out->clear();
      for (size_t i = 0; i < edges.size(); ++i) {
        std::vector<int64_t> row;
        for (int64_t x = static_cast<int64_t>(i * 13 % d.n); static_cast<int>(row.size()) < k; x = (x + 1) % d.n) {
          const int64_t u = edges[i].first;
          if (x != u && !d.directed.count({u, x})) row.push_back(x);
        }
        out->push_back(row);
      }
    };
    pick(valid, &valid_neg);
    pick(test, &test_neg);
  }
  static std::string csv(const std::vector<Pair>& e) {
    std::string s;
    for (auto [u, v] : e) s += std::to_string(u) + "," + std::to_string(v) + "\n";
    return s;
  }
  static std::string csv(const std::vector<std::vector<int64_t>>& rows) {
    std::string s;
    for (const auto& r : rows) {
      for (size_t j = 0; j < r.size(); ++j) {
        if (j > 0) s += ',';
        s += std::to_string(r[j]);
      }
      s += "\n";
    }
    return s;
  }
  void write(const fs::path& dir) const {
    write_text(dir / "train.csv", csv(train));
    write_text(dir / "valid.csv", csv(valid));
    write_text(dir / "test.csv", csv(test));
    if (!valid_neg.empty()) write_text(dir / "valid_neg.csv", csv(valid_neg));
    if (!test_neg.empty()) write_text(dir / "test_neg.csv", csv(test_neg));
  }
};

TEST_CASE("an OGB edge split with listed negatives") {
  OgbData d;
  OgbSplit s(d, 20, 30, 100);
  s.make_negatives(d, 3);
  s.write(d.split());
  REQUIRE(partition(d.spec(), d.dir / "out", 2, {}, 0).is_ok());
  require_verified_split(d.dir / "out" / "g.json");
  Loaded L(d.dir / "out" / "g.json");
  const LinkSplitInfo& ls = L.c.link_split;
  CHECK(ls.source == "ogb:lp");
  CHECK(ls.fractions.empty());
  CHECK(ls.num_negatives == 3);  // the files' K replaces the default
  CHECK(ls.num_valid == 20);
  CHECK(ls.num_test == 30);
  CHECK(ls.num_train == 100);
  check_split(L, d.directed, /*symmetric=*/true, /*random=*/false);
  // The held-out edges are the listed ones with their listed negatives.
  std::map<Pair, std::vector<int64_t>> listed;
  for (size_t i = 0; i < s.valid.size(); ++i) listed[s.valid[i]] = s.valid_neg[i];
  for (size_t i = 0; i < s.test.size(); ++i) listed[s.test[i]] = s.test_neg[i];
  size_t seen = 0;
  L.each_held([&](int, int set, const LinkEdges& e, size_t i) {
    const Pair uv{e.orig_src[i], e.orig_dst[i]};
    REQUIRE(listed.count(uv) == 1);
    const auto& want = set == 0 ? s.valid : s.test;
    CHECK(std::find(want.begin(), want.end(), uv) != want.end());
    std::vector<int64_t> got;
    for (int64_t j = 0; j < e.num_negatives; ++j) got.push_back(L.new2orig[e.neg_dst[i * 3 + j]]);
    CHECK(got == listed[uv]);
    ++seen;
  });
  CHECK(seen == listed.size());
  // Exactly the listed train edges are marked, in the listed direction; every
  // other input edge stays in the graph unmarked.
  const std::set<Pair> train(s.train.begin(), s.train.end());
  for (const auto& [e, m] : L.edges) CHECK(m == (train.count(e) ? 1 : 0));
  CHECK(L.edges.size() == d.directed.size() - 2 * (s.valid.size() + s.test.size()));
}

TEST_CASE("an OGB edge split without negatives draws them, and --split picks it") {
  OgbData d;
  OgbSplit s(d, 15, 15, 40);
  s.write(d.split("lp"));
  // A node split next to it: --split chooses.
  write_text(d.split("nodes") / "train.csv", "1\n2\n");
  write_text(d.split("nodes") / "valid.csv", "3\n");
  write_text(d.split("nodes") / "test.csv", "4\n");
  FileInputOptions in;
  in.spec = d.spec();
  PartitionOptions o;
  o.num_parts = 2;
  o.graph_name = "g";
  o.output = d.dir / "out";
  o.link.num_negatives = 7;
  PartitionStats stats;
  {
    auto src = make_file_source(in);
    REQUIRE(src.is_ok());
    CHECK_THAT(partition_graph(**src, o, &stats).message(), Catch::Contains("several splits"));
  }
  in.split = "lp";
  auto src = make_file_source(in);
  REQUIRE(src.is_ok());
  Status st = partition_graph(**src, o, &stats);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  require_verified_split(d.dir / "out" / "g.json");
  Loaded L(d.dir / "out" / "g.json");
  CHECK(L.c.link_split.num_negatives == 7);
  check_split(L, d.directed, true, false);
  // The node split is still read as one: no link split.
  in.split = "nodes";
  o.output = d.dir / "out-nodes";
  o.link.num_negatives = -1;
  src = make_file_source(in);
  REQUIRE(src.is_ok());
  REQUIRE(partition_graph(**src, o, &stats).is_ok());
  auto c = load_part_config(d.dir / "out-nodes" / "g.json");
  REQUIRE(c.is_ok());
  CHECK_FALSE(c->link_split.present);
  CHECK(c->parts[0].link_split.empty());
  CHECK_FALSE(fs::exists(d.dir / "out-nodes" / "part0" / "link_split.dgld"));
  CHECK(read_link_split(*c, 0).status().code() == StatusCode::not_found);
}

TEST_CASE("bad edge split files name the file and line and leave no output") {
  OgbData d(60, 3);
  OgbSplit s(d, 2, 2, 6);
  s.make_negatives(d, 3);
  const fs::path sd = d.split();
  const std::string train = (sd / "train.csv").string(), valid = (sd / "valid.csv").string(),
                    test = (sd / "test.csv").string(), vneg = (sd / "valid_neg.csv").string(),
                    tneg = (sd / "test_neg.csv").string();
  s.write(sd);
  REQUIRE(partition(d.spec(), d.dir / "good", 2, {}).is_ok());
  auto expect_error = [&](const std::string& needle, const LinkSplitOptions& link = {}) {
    Status st = partition(d.spec(), d.dir / "out", 2, link);
    INFO(st.to_string());
    CHECK_FALSE(st.is_ok());
    CHECK_THAT(st.message(), Catch::Contains(needle));
    CHECK(testing::no_entry_named(d.dir.path(), "out"));
  };
  // A non-edge of the graph.
  Pair non_edge{0, 0};
  for (int64_t v = 1; v < d.n; ++v) {
    if (!d.directed.count({0, v})) {
      non_edge = {0, v};
      break;
    }
  }
  const std::string ne = std::to_string(non_edge.first) + "," + std::to_string(non_edge.second);
  const std::string v0 = std::to_string(s.valid[0].first) + "," + std::to_string(s.valid[0].second);
  struct Case {
    const char* name;
    std::string file, content, message;
  };
  const Case cases[] = {
      {"three columns", train, "1,2,3\n", train + ":1: expected 1 column (a node split: node ids) or 2"},
      {"wrong column count later", train, OgbSplit::csv(s.train) + "4,5,6\n",
       train + ":7: expected 2 values, got 3"},
      {"one column in an edge file", valid, v0 + "\n7\n", valid + ":2: expected 2 values, got 1"},
      {"id out of range", test, "5,60\n", test + ":1: node id 60 is out of range [0, 60)"},
      {"non-integer", test, "5,6\n1,x\n", test + ":2: column 2: 'x' is not a valid integer"},
      {"train edge not in the graph", train, ne + "\n", train + ":1: train edge " + ne + " is not an edge of the graph"},
      {"train edge held out", train, OgbSplit::csv(s.train) + "\n" + v0 + "\n",
       train + ":8: train edge " + v0 + " is also a valid or test edge"},
      {"negatives line with another count", vneg, "1,2,3\n4,5\n", vneg + ":2: expected 3 values, got 2"},
      {"negatives file with fewer lines", vneg, "1,2,3\n",
       vneg + ": has 1 lines, expected 2, one per edge of " + valid + " (the negatives of " + valid + ":2 are missing)"},
      {"negatives file with more lines", vneg, OgbSplit::csv(s.valid_neg) + "7,8,9\n",
       vneg + ":3: more lines than the 2 edges of " + valid},
      {"negative out of range", tneg, "1,2,3\n4,99,6\n", tneg + ":2: column 2: node id 99 is out of range [0, 60)"},
      {"negatives files with different K", tneg, "1,2,3,4\n4,5,6,7\n", tneg + ":1: 4 negatives per line, but " + vneg},
      {"a negative that is the positive", vneg,
       std::to_string(s.valid[0].second) + ",2,3\n" + OgbSplit::csv(std::vector<std::vector<int64_t>>{s.valid_neg[1]}),
       vneg + ":1: column 1: negative " + std::to_string(s.valid[0].second) + " is a positive"},
      {"a negative that is the source", vneg,
       std::to_string(s.valid_neg[0][0]) + "," + std::to_string(s.valid[0].first) + ",3\n" +
           OgbSplit::csv(std::vector<std::vector<int64_t>>{s.valid_neg[1]}),
       vneg + ":1: column 2: negative " + std::to_string(s.valid[0].first) + " is the edge's own source"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      write_text(c.file, c.content);
      expect_error(c.message);
    }
  }
  SECTION("--link-split together with an edge split") {
    expect_error("use either --link-split or the input's edge split", random_split(0.8, 0.1, 0.1));
  }
  SECTION("the good split still partitions") {
    require_verified_split(d.dir / "good" / "g.json");
  }
}

TEST_CASE("--link-split and --link-negatives are checked") {
  CHECK(parse_link_split_fractions("0.85,0.05,0.1").is_ok());
  CHECK(parse_link_split_fractions(" 1, 0, 0").is_ok());
  for (const char* bad : {"0.5,0.5", "0.8,0.1,0.2", "-0.1,0.6,0.5", "a,b,c", "0.8,0.1,0.1,0", "nan,0.5,0.5"}) {
    INFO(bad);
    const Status st = parse_link_split_fractions(bad).status();
    CHECK_FALSE(st.is_ok());
    CHECK_THAT(st.message(), Catch::Contains("--link-split"));
  }
  OgbData d(50, 2);
  LinkSplitOptions neg_only;
  neg_only.num_negatives = 5;
  CHECK_THAT(partition(d.spec(), d.dir / "out", 1, neg_only).message(),
             Catch::Contains("--link-negatives needs --link-split"));
  CHECK_THAT(partition(d.spec(), d.dir / "out", 1, random_split(0.8, 0.1, 0.1, -3)).message(),
             Catch::Contains("--link-negatives must be >= 0"));
  CHECK(testing::no_entry_named(d.dir.path(), "out"));
  // K = 0: no negatives array; train 1.0: nothing held out.
  REQUIRE(partition(d.spec(), d.dir / "k0", 2, random_split(0.5, 0.25, 0.25, 0)).is_ok());
  require_verified_split(d.dir / "k0" / "g.json");
  Loaded L(d.dir / "k0" / "g.json");
  CHECK(L.link[0].valid.num_negatives == 0);
  CHECK(L.link[0].valid.neg_dst.empty());
  REQUIRE(partition(d.spec(), d.dir / "all", 2, random_split(1, 0, 0)).is_ok());
  require_verified_split(d.dir / "all" / "g.json");
  Loaded all(d.dir / "all" / "g.json");
  CHECK(all.c.link_split.num_valid + all.c.link_split.num_test == 0);
  CHECK(all.c.link_split.num_train == d.num_undirected());
  // Everything held out: a graph without edges, still with a (empty) train mask.
  REQUIRE(partition(d.spec(), d.dir / "none", 2, random_split(0, 0.5, 0.5, 3)).is_ok());
  require_verified_split(d.dir / "none" / "g.json");
  Loaded none(d.dir / "none" / "g.json");
  CHECK(none.c.num_edges == 0);
  CHECK(none.c.link_split.num_valid + none.c.link_split.num_test == d.num_undirected());
  check_split(none, d.directed, true, true);
}

TEST_CASE("command line: --link-split, --link-negatives, --verify") {
  OgbData d(120, 3);
  const std::string out = (d.dir / "out").string(), spec = d.spec(), json = out + "/cli.json";
  std::vector<const char*> argv = {"dgl-partition", "--input", spec.c_str(), "--num-parts", "2", "--graph-name", "cli",
                                   "--output", out.c_str(), "--link-split", "0.8,0.1,0.1", "--link-negatives", "6",
                                   "--seed", "17", "--log-level", "warn"};
  REQUIRE(run_partition_tool(static_cast<int>(argv.size()), argv.data()) == 0);
  auto c = load_part_config(json);
  REQUIRE(c.is_ok());
  CHECK(c->link_split.seed == 17);
  CHECK(c->link_split.num_negatives == 6);
  const char* verify[] = {"dgl-partition", "--verify", json.c_str()};
  CHECK(run_partition_tool(3, verify) == 0);
  argv[10] = "0.8,0.1";
  argv.push_back("--overwrite");
  CHECK(run_partition_tool(static_cast<int>(argv.size()), argv.data()) == 1);
}

// ---------------------------------------------------------------- --verify

TEST_CASE("--verify checks the link split and names what is wrong") {
  OgbData d;
  const fs::path out = d.dir / "out", json = out / "g.json";
  REQUIRE(partition(d.spec(), out, 2, random_split(0.7, 0.15, 0.15, 4), 2).is_ok());
  require_verified_split(json);
  // A partition with held-out validation edges.
  int p = 0;
  {
    Loaded L(json);
    while (L.link[p].valid.src.empty()) ++p;
  }
  const fs::path link = out / ("part" + std::to_string(p)) / "link_split.dgld";
  const fs::path edge_feat = out / ("part" + std::to_string(p)) / "edge_feat.dgld";
  VerifyReport r;
  auto verify_error = [&] {
    Status st = verify_partitions(json, &r);
    CHECK_FALSE(st.is_ok());
    return st.message();
  };
  SECTION("a train mask value flipped") {
    rewrite_array<uint8_t>(edge_feat, ArrayFileKind::edge_features, "_N:_E:_N/train_mask",
                           [](uint8_t* v, size_t) { v[0] ^= 1; });
    CHECK_THAT(verify_error(), Catch::Contains("train_mask"));
  }
  SECTION("the train mask missing") {
    rewrite_arrays(edge_feat, ArrayFileKind::edge_features, [](auto& specs, auto& data) {
      specs.clear();
      data.clear();
    });
    CHECK_THAT(verify_error(), Catch::Contains("edge tensor '_N:_E:_N/train_mask' is missing"));
  }
  SECTION("a negative that is the held-out edge itself") {
    int64_t dst = 0;
    rewrite_array<int64_t>(link, ArrayFileKind::link_split, "valid/dst", [&](int64_t* v, size_t) { dst = v[0]; });
    rewrite_array<int64_t>(link, ArrayFileKind::link_split, "valid/neg_dst", [&](int64_t* v, size_t) { v[1] = dst; });
    CHECK_THAT(verify_error(), Catch::Contains("is a positive"));
  }
  SECTION("a negative that is the source") {
    int64_t src = 0;
    rewrite_array<int64_t>(link, ArrayFileKind::link_split, "valid/src", [&](int64_t* v, size_t) { src = v[0]; });
    rewrite_array<int64_t>(link, ArrayFileKind::link_split, "valid/neg_dst", [&](int64_t* v, size_t) { v[0] = src; });
    CHECK_THAT(verify_error(), Catch::Contains("own source"));
  }
  SECTION("a held-out edge that is still in the graph") {
    // Replace a held-out edge by an edge of the graph (ids and original ids agree).
    Loaded L(json);
    const MappedPartition& mp = *L.parts[p];
    int64_t row = 0;
    while (mp.in_edges().degree(row) == 0) ++row;
    const int64_t dst = mp.node_global_ids()[row];
    const int64_t src = mp.node_global_ids()[mp.in_edges().indices[mp.in_edges().indptr[row]]];
    const std::pair<const char*, int64_t> values[] = {
        {"valid/src", src}, {"valid/dst", dst}, {"valid/orig_src", L.new2orig[src]}, {"valid/orig_dst", L.new2orig[dst]}};
    for (auto [name, value] : values) {
      rewrite_array<int64_t>(link, ArrayFileKind::link_split, name, [&](int64_t* v, size_t) { v[0] = value; });
    }
    CHECK_THAT(verify_error(), Catch::Contains("is held out but still an edge of the graph"));
  }
  SECTION("original ids that do not match") {
    rewrite_array<int64_t>(link, ArrayFileKind::link_split, "valid/orig_src", [](int64_t* v, size_t) { v[0] += 1; });
    CHECK_THAT(verify_error(), Catch::Contains("do not match the nodes' original ids"));
  }
  SECTION("a held-out edge whose destination another partition owns") {
    rewrite_array<int64_t>(link, ArrayFileKind::link_split, "valid/dst", [&](int64_t* v, size_t) {
      v[0] = p == 0 ? d.n - 1 : 0;
    });
    CHECK_THAT(verify_error(), Catch::Contains("is not owned by partition " + std::to_string(p)));
  }
  SECTION("arrays of different lengths") {
    rewrite_arrays(link, ArrayFileKind::link_split, [](auto& specs, auto& data) {
      for (size_t i = 0; i < specs.size(); ++i) {
        if (specs[i].name == "test/orig_dst" && !data[i].empty()) {
          specs[i].shape[0] -= 1;
          data[i].resize(data[i].size() - 8);
        }
      }
    });
    CHECK_THAT(verify_error(), Catch::Contains("test/orig_dst"));
  }
  SECTION("a corrupt byte") {
    {
      std::fstream f(link, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(fs::file_size(link) - 70));
      f.put('\x7f');
    }
    CHECK_THAT(verify_error(), Catch::Contains("link_split.dgld"));
  }
  SECTION("totals that differ from the config") {
    auto c = load_part_config(json);
    REQUIRE(c.is_ok());
    c->link_split.num_valid += 1;
    REQUIRE(write_file_atomic(json, part_config_to_json(*c)).is_ok());
    CHECK_THAT(verify_error(), Catch::Contains("the config says"));
  }
  SECTION("a missing link split file, and the CLI exits non-zero") {
    fs::remove(link);
    CHECK_THAT(verify_error(), Catch::Contains(link.string()));
    const std::string js = json.string();
    const char* argv[] = {"dgl-partition", "--verify", js.c_str()};
    CHECK(run_partition_tool(3, argv) == 1);
  }
}

// ---------------------------------------------------------------- config and reader

PartitionConfig linked_config() {
  PartitionConfig c;
  c.graph_name = "g";
  c.num_nodes = 10;
  c.num_edges = 20;
  c.part_method = "metis";
  c.num_parts = 2;
  c.node_map = {{0, 6}, {6, 10}};
  c.edge_map = {{0, 12}, {12, 20}};
  c.parts = {{"part0/node_feat.dgld", "part0/edge_feat.dgld", "part0/graph.dgld", "part0/link_split.dgld"},
             {"part1/node_feat.dgld", "part1/edge_feat.dgld", "part1/graph.dgld", "part1/link_split.dgld"}};
  c.link_split.present = true;
  c.link_split.source = "random";
  c.link_split.fractions = {0.85, 0.05, 0.1};
  c.link_split.seed = 0xfffffffffffffff0ULL;
  c.link_split.num_negatives = 100;
  c.link_split.num_train = 8;
  c.link_split.num_valid = 1;
  c.link_split.num_test = 2;
  c.link_split.symmetric = false;
  return c;
}

TEST_CASE("partition config: the link split round-trips and every error names its field") {
  const PartitionConfig c = linked_config();
  auto back = parse_part_config(part_config_to_json(c), "g.json", "/d");
  INFO(back.status().to_string());
  REQUIRE(back.is_ok());
  const LinkSplitInfo& l = back->link_split;
  CHECK(l.present);
  CHECK(l.source == "random");
  CHECK(l.fractions == c.link_split.fractions);
  CHECK(l.seed == c.link_split.seed);
  CHECK(l.num_negatives == 100);
  CHECK(l.num_train == 8);
  CHECK(l.num_valid == 1);
  CHECK(l.num_test == 2);
  CHECK_FALSE(l.symmetric);
  CHECK(back->parts[1].link_split == "part1/link_split.dgld");
  CHECK(part_config_to_json(*back) == part_config_to_json(c));

  // Without a link split nothing is written, and nothing is read back.
  PartitionConfig plain = c;
  plain.link_split = {};
  for (auto& p : plain.parts) p.link_split.clear();
  const std::string plain_json = part_config_to_json(plain);
  CHECK(plain_json.find("link_split") == std::string::npos);
  auto plain_back = parse_part_config(plain_json, "g.json", "/d");
  REQUIRE(plain_back.is_ok());
  CHECK_FALSE(plain_back->link_split.present);

  auto error_of = [](const PartitionConfig& bad) {
    // Written unvalidated, then parsed: the parser must name the field.
    const Status st = parse_part_config(part_config_to_json(bad), "g.json", "/d").status();
    CHECK_FALSE(st.is_ok());
    return st.message();
  };
  PartitionConfig bad = c;
  bad.link_split.fractions = {0.8, 0.05, 0.1};
  CHECK_THAT(error_of(bad), Catch::Contains("g.json: field 'dgld'.'link_split'.'fractions': must sum to 1"));
  bad = c;
  bad.link_split.fractions = {0.8, 0.2};
  CHECK_THAT(error_of(bad), Catch::Contains("'fractions': expected 3 values"));
  bad = c;
  bad.link_split.source = "metis";
  CHECK_THAT(error_of(bad), Catch::Contains("'source': expected \"random\" or \"ogb:<split name>\""));
  bad = c;
  bad.link_split.source = "ogb:lp";
  CHECK_THAT(error_of(bad), Catch::Contains("'fractions': only a random split has fractions"));
  bad = c;
  bad.link_split.num_valid = -1;
  CHECK_THAT(error_of(bad), Catch::Contains("'num_valid' must be >= 0"));
  bad = c;
  bad.link_split.num_train = 21;
  CHECK_THAT(error_of(bad), Catch::Contains("'num_train' 21 is more than num_edges 20"));
  bad = c;
  bad.parts[1].link_split.clear();
  CHECK_THAT(error_of(bad), Catch::Contains("field 'part-1'.'link_split': missing"));
  bad = plain;
  bad.parts[0].link_split = "part0/link_split.dgld";
  CHECK_THAT(error_of(bad), Catch::Contains("field 'part-0'.'link_split': given, but 'dgld'.'link_split' is absent"));
  // Types.
  std::string text = part_config_to_json(c);
  const std::string sym = "\"symmetric\": false";
  REQUIRE(text.find(sym) != std::string::npos);
  text.replace(text.find(sym), sym.size(), "\"symmetric\": 0");
  CHECK_THAT(parse_part_config(text, "g.json", "/d").status().message(),
             Catch::Contains("field 'symmetric': expected true or false"));
  text = part_config_to_json(c);
  const std::string negs = "\"num_negatives\": 100";
  text.replace(text.find(negs), negs.size(), "\"num_negatives\": \"many\"");
  CHECK_THAT(parse_part_config(text, "g.json", "/d").status().message(),
             Catch::Contains("field 'num_negatives': expected an integer"));
}

TEST_CASE("read_link_split: absent split or file is not_found, bad meta is corruption") {
  OgbData d(80, 3);
  const fs::path out = d.dir / "out";
  REQUIRE(partition(d.spec(), out, 2, random_split(0.8, 0.1, 0.1, 2)).is_ok());
  auto c = load_part_config(out / "g.json");
  REQUIRE(c.is_ok());
  REQUIRE(read_link_split(*c, 1).is_ok());
  CHECK(read_link_split(*c, 2).status().code() == StatusCode::invalid_argument);
  const fs::path f = out / "part1" / "link_split.dgld";
  SECTION("meta naming another partition") {
    rewrite_array<int64_t>(f, ArrayFileKind::link_split, "meta", [](int64_t* v, size_t) { v[0] = 0; });
    const Status st = read_link_split(*c, 1).status();
    CHECK(st.code() == StatusCode::corruption);
    CHECK_THAT(st.message(), Catch::Contains("file is partition 0 of 2"));
  }
  SECTION("negatives of another width") {
    rewrite_arrays(f, ArrayFileKind::link_split, [](auto& specs, auto& data) {
      for (size_t i = 0; i < specs.size(); ++i) {
        if (specs[i].name == "test/neg_dst") {
          specs[i].shape = {specs[i].shape[0] * 2, 1};
        }
      }
    });
    const Status st = read_link_split(*c, 1).status();
    CHECK(st.code() == StatusCode::corruption);
    CHECK_THAT(st.message(), Catch::Contains("test/neg_dst"));
  }
  SECTION("the file missing") {
    fs::remove(f);
    const Status st = read_link_split(*c, 1).status();
    CHECK(st.code() == StatusCode::not_found);
    CHECK_THAT(st.message(), Catch::Contains(f.string()));
  }
}

}  // namespace
}  // namespace dgld
