// dgl-partition heterogeneous inputs: the OGB heterogeneous raw layout (ogbn-mag),
// --add-reverse, the hsbm generator, build_typed_csc / GraphTypes::type_of and the
// command line wiring. The sources are tested directly (the loaded GraphData).
#include <zlib.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "common/file_util.h"
#include "common/partition/partition_book.h"
#include "partition/hetero_generator.h"
#include "partition/hetero_input.h"
#include "partition/tool.h"
#include "tests/partition/test_util.h"

namespace dgld {
namespace {
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using testing::TempDir;
using testing::write_text;

void write_gz(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) ==
          static_cast<int>(text.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

// A small ogbn-mag-like dataset. Node types author (3), paper (4), venue (2): homogeneous
// ids author 0..2, paper 3..6, venue 7..8. Relations (sorted by directory name):
//   0 author:writes:paper  (0,0) (1,0) (2,1) (0,3)        -> edges 0..3
//   1 paper:cites:paper    (1,0) (2,0) (3,2)              -> edges 4..6
//   2 paper:in:venue       (0,0) (1,1) (2,0) (3,1)  [gz]  -> edges 7..10
void write_mag(const fs::path& d) {
  write_text(d / "raw/num-node-dict.csv", "author,paper,venue\n3,4,2\n");
  write_text(d / "raw/relations/author___writes___paper/edge.csv", "0,0\n1,0\n2,1\n0,3\n");
  write_text(d / "raw/relations/paper___cites___paper/edge.csv", "1,0\n2,0\n3,2\n");
  write_text(d / "raw/relations/paper___cites___paper/num-edge-list.csv", "3\n");
  write_gz(d / "raw/relations/paper___in___venue/edge.csv.gz", "0,0\n1,1\n2,0\n3,1\n");
  write_text(d / "raw/node-feat/paper/node-feat.csv", "0.5,1\n1.5,2\n2.5,3\n3.5,4\n");
  write_gz(d / "raw/node-feat/author/node-feat.csv.gz", "1,2,3\n4,5,6\n7,8,9\n");
  write_text(d / "raw/node-label/paper/node-label.csv", "2\n0\n1\n2\n");
  write_text(d / "split/time/paper/train.csv", "0\n1\n");
  write_text(d / "split/time/paper/valid.csv", "2\n");
  write_gz(d / "split/time/paper/test.csv.gz", "3\n");
}

Status load(const HeteroOgbOptions& o, GraphData* g) {
  auto s = make_ogb_hetero_source(o);
  if (!s.is_ok()) return s.status();
  DGLD_RETURN_IF_ERROR((*s)->load_structure(g));
  return (*s)->load_features(g);
}

HeteroOgbOptions opts(const fs::path& dir) {
  HeteroOgbOptions o;
  o.dir = dir;
  return o;
}

// The error of loading `o` (REQUIREs that it fails).
std::string load_error(const HeteroOgbOptions& o) {
  GraphData g;
  Status st = load(o, &g);
  REQUIRE_FALSE(st.is_ok());
  return st.message();
}

using InEdge = std::tuple<int32_t, int32_t, int64_t>;  // src, edge type, original id

std::vector<InEdge> in_edges(const GraphData& g, int64_t v) {
  std::vector<InEdge> r;
  for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k)
    r.emplace_back(g.src[k], g.edge_type[k], g.orig_edge_id(k));
  return r;
}

// Every CSC entry: its type's endpoint types match, rows are sorted by (type, orig id).
void check_typed_csc(const GraphData& g) {
  const GraphTypes& t = g.types;
  REQUIRE(g.edge_type.size() == g.src.size());
  REQUIRE(g.orig_eid.size() == g.src.size());
  REQUIRE(g.indptr.size() == static_cast<size_t>(g.num_nodes) + 1);
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
      const CanonicalEtype& et = t.etypes.at(g.edge_type[k]);
      REQUIRE(t.type_of(g.src[k]) == et.src_type);
      REQUIRE(t.type_of(v) == et.dst_type);
      if (k > g.indptr[v]) {
        REQUIRE(std::make_pair(g.edge_type[k - 1], g.orig_eid[k - 1]) <
                std::make_pair(g.edge_type[k], g.orig_eid[k]));
      }
    }
  }
  std::vector<int64_t> ids(g.orig_eid);
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size(); ++i) REQUIRE(ids[i] == static_cast<int64_t>(i));
}

TEST_CASE("GraphTypes::type_of and build_typed_csc") {
  GraphTypes t;
  t.ntypes = {"a", "empty", "b", "c"};
  t.ntype_offset = {0, 3, 3, 5, 6};
  CHECK(t.type_of(0) == 0);
  CHECK(t.type_of(2) == 0);
  CHECK(t.type_of(3) == 2);
  CHECK(t.type_of(4) == 2);
  CHECK(t.type_of(5) == 3);
  CHECK(t.count(1) == 0);

  // Unsorted types: each row ends up by type, then input order.
  GraphData g;
  const std::vector<int32_t> src = {1, 2, 0, 3, 4, 2}, dst = {0, 0, 1, 0, 1, 0},
                             et = {1, 0, 0, 1, 2, 0};
  build_typed_csc(5, src, dst, et, &g);
  CHECK(g.num_nodes == 5);
  CHECK(g.indptr == std::vector<int64_t>{0, 4, 6, 6, 6, 6});
  CHECK(in_edges(g, 0) == std::vector<InEdge>{{2, 0, 1}, {2, 0, 5}, {1, 1, 0}, {3, 1, 3}});
  CHECK(in_edges(g, 1) == std::vector<InEdge>{{0, 0, 2}, {4, 2, 4}});
  CHECK_FALSE(g.symmetric_simple);
  // Sorted types take the fast path with the same result.
  GraphData h;
  build_typed_csc(3, {0, 1, 2, 0}, {1, 1, 0, 1}, {0, 0, 1, 1}, &h);
  CHECK(in_edges(h, 1) == std::vector<InEdge>{{0, 0, 0}, {1, 0, 1}, {0, 1, 3}});
  CHECK(in_edges(h, 0) == std::vector<InEdge>{{2, 1, 2}});
}

TEST_CASE("add_reverse_relations appends reversed relations and edges in order") {
  GraphTypes t;
  t.ntypes = {"a", "b"};
  t.ntype_offset = {0, 2, 4};
  t.etypes = {{"a", "r", "b", 0, 1}, {"b", "s", "b", 1, 1}};
  TypedEdgeList e;
  e.src = {0, 1, 2};
  e.dst = {2, 3, 3};
  e.etype = {0, 0, 1};
  REQUIRE(add_reverse_relations(&t, &e).is_ok());
  REQUIRE(t.num_etypes() == 4);
  CHECK(t.etypes[2].name() == "b:rev-r:a");
  CHECK(t.etypes[2].src_type == 1);
  CHECK(t.etypes[2].dst_type == 0);
  CHECK(t.etypes[3].name() == "b:rev-s:b");
  CHECK(e.src == std::vector<int32_t>{0, 1, 2, 2, 3, 3});
  CHECK(e.dst == std::vector<int32_t>{2, 3, 3, 0, 1, 2});
  CHECK(e.etype == std::vector<int32_t>{0, 0, 1, 2, 2, 3});
  CHECK(reverse_relation_name("cites") == "rev-cites");

  GraphTypes clash;
  clash.ntypes = {"p"};
  clash.ntype_offset = {0, 2};
  clash.etypes = {{"p", "cites", "p", 0, 0}, {"p", "rev-cites", "p", 0, 0}};
  TypedEdgeList none;
  Status st = add_reverse_relations(&clash, &none);
  REQUIRE_FALSE(st.is_ok());
  CHECK_THAT(st.message(), Contains("p:rev-cites:p") && Contains("already has"));
}

TEST_CASE("OGB heterogeneous layout: types, CSC, labels, masks, features") {
  TempDir dir;
  write_mag(dir.path());
  CHECK(is_ogb_hetero_dir(dir.path()));
  auto src = make_ogb_hetero_source(opts(dir.path()));
  REQUIRE(src.is_ok());
  CHECK((*src)->describe() == "ogb-hetero:" + dir.path().string());
  GraphData g;
  Status st = (*src)->load_structure(&g);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  const GraphTypes& t = g.types;
  REQUIRE(t.present());
  CHECK(t.ntypes == std::vector<std::string>{"author", "paper", "venue"});
  CHECK(t.ntype_offset == std::vector<int64_t>{0, 3, 7, 9});
  REQUIRE(t.num_etypes() == 3);
  CHECK(t.etypes[0].name() == "author:writes:paper");
  CHECK(t.etypes[1].name() == "paper:cites:paper");
  CHECK(t.etypes[2].name() == "paper:in:venue");
  CHECK(t.etypes[2].src_type == 1);
  CHECK(t.etypes[2].dst_type == 2);
  CHECK(t.target == 1);
  CHECK(t.feat_dim == std::vector<int64_t>{3, 2, 0});
  CHECK(g.num_nodes == 9);
  CHECK(g.num_edges() == 11);
  CHECK(g.feat_dim == 0);
  CHECK(g.features.empty());
  CHECK_FALSE(g.symmetric_simple);
  check_typed_csc(g);
  CHECK(in_edges(g, 3) == std::vector<InEdge>{{0, 0, 0}, {1, 0, 1}, {4, 1, 4}, {5, 1, 5}});
  CHECK(in_edges(g, 4) == std::vector<InEdge>{{2, 0, 2}});
  CHECK(in_edges(g, 5) == std::vector<InEdge>{{6, 1, 6}});
  CHECK(in_edges(g, 6) == std::vector<InEdge>{{0, 0, 3}});
  CHECK(in_edges(g, 7) == std::vector<InEdge>{{3, 2, 7}, {5, 2, 9}});
  CHECK(in_edges(g, 8) == std::vector<InEdge>{{4, 2, 8}, {6, 2, 10}});
  for (int v = 0; v < 3; ++v) CHECK(in_edges(g, v).empty());
  CHECK(g.labels == std::vector<int64_t>{-1, -1, -1, 2, 0, 1, 2, -1, -1});
  CHECK(g.train_mask == std::vector<uint8_t>{0, 0, 0, 1, 1, 0, 0, 0, 0});
  CHECK(g.val_mask == std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 0, 0, 0});
  CHECK(g.test_mask == std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 0, 0});

  REQUIRE((*src)->load_features(&g).is_ok());
  REQUIRE(g.types.type_features.size() == 3);
  CHECK(g.types.type_features[0] == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(g.types.type_features[1] == std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f, 4});
  CHECK(g.types.type_features[2].empty());
  CHECK(g.features.empty());
}

TEST_CASE("OGB heterogeneous layout with --add-reverse") {
  TempDir dir;
  write_mag(dir.path());
  HeteroOgbOptions o = opts(dir.path());
  o.add_reverse = true;
  GraphData g;
  Status st = load(o, &g);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  const GraphTypes& t = g.types;
  REQUIRE(t.num_etypes() == 6);
  CHECK(t.etypes[3].name() == "paper:rev-writes:author");
  CHECK(t.etypes[4].name() == "paper:rev-cites:paper");
  CHECK(t.etypes[5].name() == "venue:rev-in:paper");
  CHECK(g.num_edges() == 22);
  check_typed_csc(g);
  // The reverse of input edge i has the original id 11 + i.
  CHECK(in_edges(g, 0) == std::vector<InEdge>{{3, 3, 11}, {6, 3, 14}});
  CHECK(in_edges(g, 3) ==
        std::vector<InEdge>{{0, 0, 0}, {1, 0, 1}, {4, 1, 4}, {5, 1, 5}, {7, 5, 18}});
  CHECK(in_edges(g, 4) == std::vector<InEdge>{{2, 0, 2}, {3, 4, 15}, {8, 5, 19}});
  CHECK(in_edges(g, 6) == std::vector<InEdge>{{0, 0, 3}, {5, 4, 17}, {8, 5, 21}});
  CHECK(in_edges(g, 7) == std::vector<InEdge>{{3, 2, 7}, {5, 2, 9}});
  // Every reverse edge mirrors its input edge.
  std::map<int64_t, std::pair<int32_t, int32_t>> ends;
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k)
      ends[g.orig_eid[k]] = {g.src[k], static_cast<int32_t>(v)};
  }
  for (int64_t i = 0; i < 11; ++i) {
    CHECK(ends[i + 11] == std::make_pair(ends[i].second, ends[i].first));
  }
}

TEST_CASE("OGB heterogeneous layout: choosing the target type") {
  TempDir dir;
  write_mag(dir.path());
  write_text(dir / "raw/node-label/author/node-label.csv", "5\n6\n7\n");
  write_text(dir / "split/time/author/train.csv", "0\n");
  write_text(dir / "split/time/author/valid.csv", "1\n");
  write_text(dir / "split/time/author/test.csv", "2\n");
  CHECK_THAT(
      load_error(opts(dir.path())),
      Contains("several node types have labels (author, paper)") && Contains("--target-ntype"));

  HeteroOgbOptions o = opts(dir.path());
  o.target_ntype = "author";
  GraphData g;
  REQUIRE(load(o, &g).is_ok());
  CHECK(g.types.target == 0);
  CHECK(g.labels == std::vector<int64_t>{5, 6, 7, -1, -1, -1, -1, -1, -1});
  CHECK(g.train_mask == std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(g.test_mask == std::vector<uint8_t>{0, 0, 1, 0, 0, 0, 0, 0, 0});

  o.target_ntype = "paper";
  GraphData h;
  REQUIRE(load(o, &h).is_ok());
  CHECK(h.types.target == 1);
  CHECK(h.labels[3] == 2);

  o.target_ntype = "venue";
  CHECK_THAT(load_error(o),
             Contains("missing labels for the target type 'venue': expected " +
                      (dir / "raw/node-label/venue/node-label.csv").string() + "[.gz]"));
  o.target_ntype = "institution";
  CHECK_THAT(load_error(o), Contains("--target-ntype 'institution' is not a node type") &&
                                Contains("(known: author, paper, venue)"));
}

TEST_CASE("OGB heterogeneous layout: no labels, or a target that matches the only labels") {
  TempDir dir;
  write_mag(dir.path());
  fs::remove_all(dir / "raw/node-label");
  GraphData g;
  REQUIRE(load(opts(dir.path()), &g).is_ok());
  CHECK(g.types.target == -1);
  CHECK(g.labels.empty());
  CHECK(g.train_mask.empty());
  HeteroOgbOptions o = opts(dir.path());
  o.target_ntype = "paper";
  CHECK_THAT(load_error(o), Contains("missing labels for the target type 'paper'") &&
                                Contains("(no node type has labels)"));

  write_mag(dir.path());
  o.target_ntype = "author";
  CHECK_THAT(load_error(o), Contains("missing labels for the target type 'author'") &&
                                Contains("(node types with labels: paper)"));
}

TEST_CASE("OGB heterogeneous layout: bad input names the file, the line and what was expected") {
  TempDir dir;
  const fs::path d = dir.path();
  write_mag(d);
  const std::string writes = (d / "raw/relations/author___writes___paper/edge.csv").string();

  SECTION("unknown node type in a relation directory") {
    fs::create_directories(d / "raw/relations/author___writes___conference");
    CHECK(load_error(opts(d)) == (d / "raw/relations/author___writes___conference").string() +
                                     ": node type 'conference' is not in " +
                                     (d / "raw/num-node-dict.csv").string() +
                                     " (known: author, paper, venue)");
  }
  SECTION("malformed relation directory names") {
    for (const char* name : {"paper__cites__paper", "paper___cites", "___cites___paper",
                             "paper______paper", "paper___cites___", "a___b___c___d"}) {
      TempDir dir2;
      write_mag(dir2.path());
      fs::create_directories(dir2 / "raw/relations" / name);
      CHECK_THAT(load_error(opts(dir2.path())),
                 Contains((dir2 / "raw/relations" / name).string() +
                          ": malformed relation directory name '" + name +
                          "', expected <src>___<rel>___<dst>"));
    }
  }
  SECTION("node id out of its type's range") {
    write_text(d / "raw/relations/author___writes___paper/edge.csv", "0,0\n3,1\n");
    CHECK(load_error(opts(d)) ==
          writes +
              ":2: column 1 (source, type 'author'): node id 3 is out of range [0, 3) "
              "(node type 'author' has 3 nodes)");
    write_gz(d / "raw/relations/paper___in___venue/edge.csv.gz", "0,0\n\n1,-1\n");
    write_text(d / "raw/relations/author___writes___paper/edge.csv", "0,0\n");
    CHECK_THAT(load_error(opts(d)),
               Contains((d / "raw/relations/paper___in___venue/edge.csv.gz").string() +
                        ":3: column 2 (destination, type 'venue'): node id -1 is out of range"));
  }
  SECTION("non-integer node ids and missing columns") {
    write_text(d / "raw/relations/author___writes___paper/edge.csv", "0,0\n1,x\n");
    CHECK_THAT(load_error(opts(d)), Contains(writes + ":2: column 2: 'x' is not a valid integer"));
    write_text(d / "raw/relations/author___writes___paper/edge.csv", "0,0\n1,2\n1\n");
    CHECK_THAT(load_error(opts(d)), Contains(writes + ":3: expected 2 values, got 1"));
  }
  SECTION("a relation without an edge file") {
    fs::remove(d / "raw/relations/paper___cites___paper/edge.csv");
    CHECK_THAT(load_error(opts(d)),
               Contains("missing " + (d / "raw/relations/paper___cites___paper/edge.csv").string() +
                        "[.gz]"));
  }
  SECTION("num-edge-list.csv disagrees with the edge file") {
    write_text(d / "raw/relations/paper___cites___paper/num-edge-list.csv", "4\n");
    CHECK_THAT(load_error(opts(d)),
               Contains((d / "raw/relations/paper___cites___paper/num-edge-list.csv").string() +
                        ":1: 4 edges, but") &&
                   Contains("paper___cites___paper/edge.csv has 3 edges"));
  }
  SECTION("num-node-dict.csv problems") {
    const std::string dict = (d / "raw/num-node-dict.csv").string();
    write_text(d / "raw/num-node-dict.csv", "author,paper,venue\n3,4\n");
    CHECK(load_error(opts(d)) == dict + ":2: expected 3 values, got 2");
    write_text(d / "raw/num-node-dict.csv", "author,paper,venue\n");
    CHECK_THAT(load_error(opts(d)), Contains(dict + ": has no line 2"));
    write_text(d / "raw/num-node-dict.csv", "author,paper,author\n3,4,2\n");
    CHECK(load_error(opts(d)) == dict + ":1: column 3: node type 'author' is listed twice");
    write_text(d / "raw/num-node-dict.csv", "author,paper,venue\n3,four,2\n");
    CHECK(load_error(opts(d)) == dict + ":2: column 2: 'four' is not a valid integer");
    write_text(d / "raw/num-node-dict.csv", "author,paper,venue\n3,-4,2\n");
    CHECK(load_error(opts(d)) == dict + ":2: column 2: negative count -4 for node type 'paper'");
  }
  SECTION("labels: wrong row count, non-integers") {
    const std::string labels = (d / "raw/node-label/paper/node-label.csv").string();
    write_text(d / "raw/node-label/paper/node-label.csv", "1\n2\n3\n");
    CHECK(load_error(opts(d)) ==
          labels +
              ": has 3 labels, expected 4, one per node of type 'paper' (label missing for "
              "node 3)");
    write_text(d / "raw/node-label/paper/node-label.csv", "1\n2\n3\n0\n1\n");
    CHECK(load_error(opts(d)) == labels + ":5: more labels than the 4 nodes of type 'paper'");
    write_text(d / "raw/node-label/paper/node-label.csv", "1\n2\nthree\n0\n");
    CHECK(load_error(opts(d)) == labels + ":3: column 1: 'three' is not a valid integer");
  }
  SECTION("features: ragged rows, wrong row count, unknown type") {
    const std::string feat = (d / "raw/node-feat/paper/node-feat.csv").string();
    write_text(d / "raw/node-feat/paper/node-feat.csv", "1,2\n3,4\n5,6,7\n8,9\n");
    CHECK(load_error(opts(d)) == feat + ":3: expected 2 values, got 3");
    write_text(d / "raw/node-feat/paper/node-feat.csv", "1,2\n3,4\n5\n8,9\n");
    CHECK(load_error(opts(d)) == feat + ":3: expected 2 values, got 1");
    write_text(d / "raw/node-feat/paper/node-feat.csv", "1,2\n3,4\n5,6\n");
    CHECK(load_error(opts(d)) ==
          feat +
              ": has 3 feature rows, expected 4, one per node of type 'paper' (features "
              "missing for node 3)");
    write_text(d / "raw/node-feat/paper/node-feat.csv", "1,2\n3,4\n5,6\n7,8\n9,10\n");
    CHECK(load_error(opts(d)) == feat + ":5: more feature rows than the 4 nodes of type 'paper'");
    write_text(d / "raw/node-feat/paper/node-feat.csv", "1,2\n3,a\n5,6\n7,8\n");
    CHECK(load_error(opts(d)) == feat + ":2: column 2: 'a' is not a valid number");
    write_text(d / "raw/node-feat/paper/node-feat.csv", "1,2\n3,4\n5,6\n7,8\n");
    write_text(d / "raw/node-feat/field/node-feat.csv", "1\n");
    CHECK_THAT(load_error(opts(d)),
               Contains((d / "raw/node-feat/field").string() + ": node type 'field' is not in"));
    fs::remove_all(d / "raw/node-feat/field");
    fs::create_directories(d / "raw/node-feat/venue");
    CHECK(load_error(opts(d)) ==
          "missing " + (d / "raw/node-feat/venue/node-feat.csv").string() + "[.gz]");
  }
  SECTION("edge features: wrong row count, ragged rows") {
    const std::string feat = (d / "raw/relations/paper___cites___paper/edge-feat.csv").string();
    write_text(feat, "1,2\n3,4\n");
    CHECK(load_error(opts(d)) == feat +
                                     ": has 2 feature rows, expected 3, one per edge of relation "
                                     "paper:cites:paper (features missing for edge 2)");
    write_text(feat, "1,2\n3,4\n5,6\n7,8\n");
    CHECK(load_error(opts(d)) == feat + ":4: more feature rows than the 3 edges of relation paper:cites:paper");
    write_text(feat, "1,2\n3\n5,6\n");
    CHECK(load_error(opts(d)) == feat + ":2: expected 2 values, got 1");
  }

  SECTION("splits: ids out of range, non-integers, missing target directory, several splits") {
    write_gz(d / "split/time/paper/test.csv.gz", "3\n4\n");
    CHECK(load_error(opts(d)) ==
          (d / "split/time/paper/test.csv.gz").string() +
              ":2: node id 4 is out of range [0, 4) (node type 'paper' has 4 nodes)");
    write_text(d / "split/time/paper/valid.csv", "2.5\n");
    CHECK_THAT(load_error(opts(d)),
               Contains((d / "split/time/paper/valid.csv").string() + ":1: column 1"));
    fs::remove_all(d / "split/time/paper");
    write_text(d / "split/time/author/train.csv", "0\n");
    CHECK(load_error(opts(d)) == "split " + (d / "split/time").string() +
                                     " has no directory for the target type 'paper': expected " +
                                     (d / "split/time/paper/{train,valid,test}.csv").string() +
                                     "[.gz] (found: author)");
    write_mag(d);
    write_text(d / "split/random/paper/train.csv", "0\n");
    CHECK_THAT(load_error(opts(d)),
               Contains("several splits (random, time); choose one with --split"));
    HeteroOgbOptions o = opts(d);
    o.split = "time";
    GraphData g;
    REQUIRE(load(o, &g).is_ok());
    CHECK(g.train_mask[3] == 1);
    o.split = "random";
    CHECK_THAT(load_error(o), Contains("missing " + (d / "split/random/paper/valid.csv").string()));
    o.split = "none";
    CHECK_THAT(load_error(o),
               Contains("split directory " + (d / "split/none").string() + " does not exist"));
  }
  SECTION("--add-reverse onto an existing relation") {
    write_text(d / "raw/relations/paper___rev-cites___paper/edge.csv", "0,1\n");
    HeteroOgbOptions o = opts(d);
    o.add_reverse = true;
    CHECK(load_error(o) ==
          "--add-reverse: the reverse of relation paper:cites:paper would be "
          "paper:rev-cites:paper, which the input "
          "already has");
  }
  SECTION("not a heterogeneous directory") {
    fs::remove(d / "raw/num-node-dict.csv");
    CHECK_FALSE(is_ogb_hetero_dir(d));
    CHECK_THAT(load_error(opts(d)),
               Contains("num-node-dict.csv[.gz] (not a heterogeneous OGB dataset)"));
    CHECK_THAT(load_error(opts(d / "nowhere")), Contains("does not exist"));
  }
  SECTION("no relations") {
    fs::remove_all(d / "raw/relations");
    CHECK_THAT(load_error(opts(d)), Contains("no relations: expected directories"));
  }
}

// ---- hsbm ----

HsbmParams small_hsbm() {
  HsbmParams p;
  p.papers = 2000;
  p.authors = 800;
  p.venues = 12;
  p.topics = 40;
  p.classes = 4;
  p.feat_dim = 6;
  p.seed = 3;
  return p;
}

GraphData load_hsbm(const HsbmParams& p, bool add_reverse = false) {
  auto s = make_hsbm_source(p, add_reverse);
  GraphData g;
  Status st = s->load_structure(&g);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  REQUIRE(s->load_features(&g).is_ok());
  return g;
}

TEST_CASE("hsbm: types, relations, no duplicates, masks on papers, features") {
  const HsbmParams p = small_hsbm();
  const GraphData g = load_hsbm(p);
  const GraphTypes& t = g.types;
  CHECK(t.ntypes == std::vector<std::string>{"paper", "author", "venue", "topic"});
  CHECK(t.ntype_offset == std::vector<int64_t>{0, 2000, 2800, 2812, 2852});
  REQUIRE(t.num_etypes() == 4);
  CHECK(t.etypes[0].name() == "author:writes:paper");
  CHECK(t.etypes[1].name() == "paper:cites:paper");
  CHECK(t.etypes[2].name() == "paper:published_in:venue");
  CHECK(t.etypes[3].name() == "paper:has_topic:topic");
  CHECK(t.target == 0);
  CHECK(t.feat_dim == std::vector<int64_t>{6, 0, 0, 6});
  CHECK(g.num_nodes == 2852);
  check_typed_csc(g);

  std::vector<int64_t> per_type(4, 0);
  std::set<std::tuple<int32_t, int32_t, int32_t>> seen;
  std::vector<int> venues_of(2000, 0);
  int64_t cites_same = 0;
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
      const int32_t et = g.edge_type[k], s = g.src[k];
      ++per_type[et];
      CHECK(
          seen.emplace(s, static_cast<int32_t>(v), et).second);  // no duplicates within a relation
      if (et == 1) {
        CHECK(s != v);  // no self citations
        cites_same += g.labels[s] == g.labels[v];
      }
      if (et == 2) ++venues_of[s];
    }
  }
  for (int c : venues_of) REQUIRE(c == 1);  // exactly one venue per paper
  // Counts around the means (3, 5, 1, 2 per paper).
  CHECK(per_type[0] > 2000 * 2.7);
  CHECK(per_type[0] < 2000 * 3.3);
  CHECK(per_type[1] > 2000 * 4.5);
  CHECK(per_type[1] < 2000 * 5.5);
  CHECK(per_type[2] == 2000);
  CHECK(per_type[3] > 2000 * 1.7);
  CHECK(per_type[3] < 2000 * 2.3);
  // Citations stay in the class with probability ~ p_in + (1 - p_in) / classes = 0.85.
  const double same = static_cast<double>(cites_same) / static_cast<double>(per_type[1]);
  CHECK(same > 0.8);
  CHECK(same < 0.9);
  // Original edge ids: relations concatenated in order.
  for (int64_t k = 0; k < g.num_edges(); ++k) {
    const int64_t id = g.orig_eid[k];
    int32_t expect = 0;
    int64_t below = per_type[0];
    while (id >= below) below += per_type[++expect];
    REQUIRE(g.edge_type[k] == expect);
  }

  int64_t train = 0;
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    const bool paper = v < 2000;
    if (paper) {
      CHECK(g.labels[v] >= 0);
      CHECK(g.labels[v] < 4);
      CHECK(g.train_mask[v] + g.val_mask[v] + g.test_mask[v] <= 1);
      train += g.train_mask[v];
    } else {
      CHECK(g.labels[v] == -1);
      CHECK(g.train_mask[v] + g.val_mask[v] + g.test_mask[v] == 0);
    }
  }
  CHECK(train > 300);
  CHECK(train < 500);
  REQUIRE(t.type_features.size() == 4);
  CHECK(t.type_features[0].size() == 2000 * 6);
  CHECK(t.type_features[1].empty());
  CHECK(t.type_features[2].empty());
  CHECK(t.type_features[3].size() == 40 * 6);
  CHECK(g.features.empty());
  CHECK(g.feat_dim == 0);
}

TEST_CASE("hsbm is a function of its seed; --add-reverse doubles the relations") {
  const HsbmParams p = small_hsbm();
  const GraphData a = load_hsbm(p), b = load_hsbm(p);
  CHECK(a.indptr == b.indptr);
  CHECK(a.src == b.src);
  CHECK(a.orig_eid == b.orig_eid);
  CHECK(a.edge_type == b.edge_type);
  CHECK(a.labels == b.labels);
  CHECK(a.train_mask == b.train_mask);
  CHECK(a.types.type_features == b.types.type_features);
  HsbmParams q = p;
  q.seed = 4;
  const GraphData c = load_hsbm(q);
  CHECK(c.src != a.src);
  CHECK(c.labels != a.labels);

  const GraphData r = load_hsbm(p, true);
  REQUIRE(r.types.num_etypes() == 8);
  CHECK(r.types.etypes[4].name() == "paper:rev-writes:author");
  CHECK(r.types.etypes[5].name() == "paper:rev-cites:paper");
  CHECK(r.types.etypes[6].name() == "venue:rev-published_in:paper");
  CHECK(r.types.etypes[7].name() == "topic:rev-has_topic:paper");
  CHECK(r.num_edges() == 2 * a.num_edges());
  check_typed_csc(r);
  CHECK(r.labels == a.labels);
  auto src = make_hsbm_source(p, true);
  CHECK_THAT(src->describe(),
             Contains("generate:hsbm(papers=2000 authors=800") && Contains("add_reverse"));
}

TEST_CASE("hsbm defaults: paper features alone are weak, the relations carry the class") {
  const GraphData g = load_hsbm(HsbmParams());
  const GraphTypes& t = g.types;
  const int64_t P = t.count(0), d = t.feat_dim[0];
  const int classes = 8;
  REQUIRE(P == 20000);
  // Feature-only: nearest class mean (estimated on the training papers) ~ a linear
  // model's accuracy.
  std::vector<double> mean(classes * d, 0.0);
  std::vector<int64_t> n(classes, 0);
  const float* f = t.type_features[0].data();
  for (int64_t v = 0; v < P; ++v) {
    if (!g.train_mask[v]) continue;
    ++n[g.labels[v]];
    for (int64_t j = 0; j < d; ++j) mean[g.labels[v] * d + j] += f[v * d + j];
  }
  for (int c = 0; c < classes; ++c) {
    for (int64_t j = 0; j < d; ++j) mean[c * d + j] /= static_cast<double>(n[c]);
  }
  // Relational: the majority training label among the papers of a paper's venue.
  std::vector<int64_t> venue_of(P, -1);
  std::map<int64_t, std::vector<int64_t>> votes;
  for (int64_t v = t.ntype_offset[2]; v < t.ntype_offset[3]; ++v) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
      venue_of[g.src[k]] = v;
      auto& vv = votes[v];
      vv.resize(classes);
      if (g.train_mask[g.src[k]]) ++vv[g.labels[g.src[k]]];
    }
  }
  int64_t tests = 0, feat_ok = 0, rel_ok = 0;
  for (int64_t v = 0; v < P; ++v) {
    if (!g.test_mask[v]) continue;
    ++tests;
    int best = 0;
    double best_d = 1e300;
    for (int c = 0; c < classes; ++c) {
      double dist = 0;
      for (int64_t j = 0; j < d; ++j)
        dist += (f[v * d + j] - mean[c * d + j]) * (f[v * d + j] - mean[c * d + j]);
      if (dist < best_d) best_d = dist, best = c;
    }
    feat_ok += best == g.labels[v];
    const auto& vv = votes[venue_of[v]];
    rel_ok += std::max_element(vv.begin(), vv.end()) - vv.begin() == g.labels[v];
  }
  const double feat_acc = static_cast<double>(feat_ok) / tests,
               rel_acc = static_cast<double>(rel_ok) / tests;
  INFO("feature-only accuracy " << feat_acc << ", venue-majority accuracy " << rel_acc);
  CHECK(feat_acc > 0.25);
  CHECK(feat_acc < 0.45);
  CHECK(rel_acc > feat_acc + 0.3);
}

TEST_CASE("hsbm specs are checked, errors name the key") {
  CHECK(parse_hsbm_spec("hsbm").is_ok());
  auto p = parse_hsbm_spec(
      "hsbm:papers=100,authors=50,venues=8,topics=9,classes=3,feat_dim=4,writes_per_paper=2.5,"
      "cites_per_paper=1,topics_per_paper=0,p_in=0.5,centroid_scale=0.3,train=0.5,val=0.1,"
      "test=0.1,seed=42");
  REQUIRE(p.is_ok());
  CHECK(p->papers == 100);
  CHECK(p->authors == 50);
  CHECK(p->venues == 8);
  CHECK(p->topics == 9);
  CHECK(p->classes == 3);
  CHECK(p->feat_dim == 4);
  CHECK(p->writes_per_paper == 2.5);
  CHECK(p->topics_per_paper == 0);
  CHECK(p->seed == 42);
  const GraphData g = load_hsbm(*p);
  CHECK(g.types.count(0) == 100);

  auto err = [](const std::string& spec) {
    auto r = parse_hsbm_spec(spec);
    REQUIRE_FALSE(r.is_ok());
    return r.status().message();
  };
  CHECK_THAT(err("hsbm:nodes=5"), Contains("unknown key 'nodes'") && Contains("papers"));
  CHECK_THAT(err("hsbm:papers=ten"), Contains("bad value 'ten' for key 'papers'"));
  CHECK_THAT(err("hsbm:p_in="), Contains("bad value '' for key 'p_in'"));
  CHECK_THAT(err("hsbm:papers"), Contains("expected key=value"));
  CHECK_THAT(err("hsbm:venues=4,classes=8"), Contains("venues must be >= classes"));
  CHECK_THAT(err("hsbm:papers=1"), Contains("papers must be >= 2"));
  CHECK_THAT(err("hsbm:authors=0"), Contains("authors must be >= 1"));
  CHECK_THAT(err("hsbm:topics=0"), Contains("topics must be >= 1"));
  CHECK_THAT(err("hsbm:classes=0"), Contains("classes must be"));
  CHECK_THAT(err("hsbm:feat_dim=0"), Contains("feat_dim must be >= 1"));
  CHECK_THAT(err("hsbm:p_in=1.5"), Contains("p_in must be in [0, 1]"));
  CHECK_THAT(err("hsbm:writes_per_paper=-1"), Contains("writes_per_paper"));
  CHECK_THAT(err("hsbm:cites_per_paper=20000"), Contains("cites_per_paper"));
  CHECK_THAT(err("hsbm:topics_per_paper=201"), Contains("topics_per_paper"));
  CHECK_THAT(err("hsbm:train=0.9,test=0.2"), Contains("sum to at most 1"));
  CHECK_THAT(err("hsbm:papers=2000000000,authors=2000000000"), Contains("at most 2^31-1"));
}

// ---- command line ----

// Runs dgl-partition with `args`; returns the exit status and what it wrote to stderr.
int run_tool(const std::vector<std::string>& args, std::string* err) {
  std::vector<const char*> argv = {"dgl-partition"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  const int rc = run_partition_tool(static_cast<int>(argv.size()), argv.data());
  std::cerr.rdbuf(old);
  *err = captured.str();
  return rc;
}

// The per-type input index of each edge's features in write_mag's cites relation
// (with --add-reverse, rev-cites reads the same rows).
TEST_CASE("typed partitions: edge_map per canonical edge type, per-type edge tensors, --verify") {
  TempDir dir;
  write_mag(dir / "mag");
  // cites edge i (input order) has features (10 i, src, dst) of its per-type input ids.
  write_text(dir / "mag/raw/relations/paper___cites___paper/edge-feat.csv", "0,1,0\n10,2,0\n20,3,2\n");
  const std::string out = (dir / "out").string();
  std::string err;
  REQUIRE(run_tool({"--input", "ogb:" + (dir / "mag").string(), "--add-reverse", "--num-parts", "2",
                    "--part-method", "random", "--graph-name", "mag", "--output", out, "--log-level", "error"},
                   &err) == 0);
  auto c = load_part_config(dir / "out/mag.json");
  REQUIRE(c.is_ok());
  const GraphTypeInfo& ty = c->types;
  REQUIRE(ty.num_etypes() == 6);
  REQUIRE(ty.etype_map.size() == 6);
  // The JSON has DGL's layout: one edge_map key per canonical edge type.
  const std::string json = *read_file(dir / "out/mag.json");
  for (const std::string& et : ty.etypes) CHECK_THAT(json, Contains("\"" + et + "\": ["));
  CHECK_THAT(json, !Contains("\"_E\""));
  const int cites = ty.etype_id("paper:cites:paper"), rev = ty.etype_id("paper:rev-cites:paper");
  REQUIRE(cites >= 0);
  REQUIRE(rev >= 0);
  int64_t cites_rows = 0;
  for (int p = 0; p < 2; ++p) {
    auto part = open_partition(*c, p, true);
    REQUIRE(part.is_ok());
    const MappedPartition& P = **part;
    const auto& in = P.in_edges();
    const IdRange er = c->edge_map[p];
    for (int64_t k = 0; k < P.num_inner_edges(); ++k) {
      // Each inner edge's id lies in its type's range, and maps back to its slot.
      const IdRange tr = ty.etype_map[P.edge_types()[k]][p];
      CHECK(in.eids[k] >= tr.start);
      CHECK(in.eids[k] < tr.end);
      CHECK(P.inner_edge_slot(in.eids[k] - er.start) == k);
      const auto [src, dst] = P.inner_edge_ends(in.eids[k] - er.start);
      CHECK(dst == P.node_global_ids()[std::upper_bound(in.indptr.begin(), in.indptr.end(), k) -
                                       in.indptr.begin() - 1]);
      CHECK(src == P.node_global_ids()[in.indices[k]]);
    }
    // Per-type edge tensors: rows in edge id order, the edge's own input features.
    for (int t : {cites, rev}) {
      const TensorView* f = P.edge_tensor(ty.etypes[t] + "/features");
      REQUIRE(f != nullptr);
      const IdRange tr = ty.etype_map[t][p];
      REQUIRE(f->shape == std::vector<int64_t>{tr.size(), 3});
      const auto rows = f->as<float>();
      for (int64_t e = tr.start; e < tr.end; ++e) {
        const int64_t k = P.inner_edge_slot(e - er.start);
        const int64_t src = P.node_global_ids()[in.indices[k]];
        const int64_t dst = P.node_global_ids()[std::upper_bound(in.indptr.begin(), in.indptr.end(), k) -
                                                in.indptr.begin() - 1];
        // The input edge's per-type paper ids, from the nodes' original ids.
        const RangePartitionBook book = *RangePartitionBook::from_config(*c);
        auto orig = [&](int64_t gid) {
          const int q = book.node_partition(gid);
          auto owner = open_partition(*c, q, false);
          return (*owner)->orig_node_ids()[gid - c->node_map[q].start];
        };
        const float* row = rows.data() + (e - tr.start) * 3;
        // A reverse edge's features are its forward edge's (source and destination swapped).
        const int64_t in_src = t == cites ? orig(src) : orig(dst), in_dst = t == cites ? orig(dst) : orig(src);
        CHECK(row[1] == static_cast<float>(in_src));
        CHECK(row[2] == static_cast<float>(in_dst));
      }
      if (t == cites) cites_rows += tr.size();
    }
    CHECK(P.edge_tensor("author:writes:paper/features") == nullptr);
  }
  CHECK(cites_rows == 3);
  CHECK(run_tool({"--verify", out + "/mag.json"}, &err) == 0);

  // A config in the layout of older dgld releases (one "_E" edge_map key) is refused.
  std::string old = json;
  const size_t a = old.find("\"edge_map\"");
  REQUIRE(a != std::string::npos);
  const size_t b = old.find("},", a);
  old.replace(a, b + 1 - a, "\"edge_map\": {\"_E\": " + [&] {
    std::string r = "[";
    for (int p = 0; p < 2; ++p) {
      r += (p ? ", [" : "[") + std::to_string(c->edge_map[p].start) + ", " + std::to_string(c->edge_map[p].end) + "]";
    }
    return r + "]}";
  }());
  auto refused = parse_part_config(old, "old.json", dir.path());
  REQUIRE_FALSE(refused.is_ok());
  CHECK_THAT(refused.status().message(), Contains("old.json: field 'edge_map': has one '_E' range per partition"));
  CHECK_THAT(refused.status().message(), Contains("re-partition the graph"));
}

TEST_CASE("command line: heterogeneous inputs, --add-reverse, --target-ntype, generators") {
  TempDir dir;
  write_mag(dir / "mag");
  const std::string out = (dir / "out").string();
  std::string err;

  // Source errors leave no output.
  write_text(dir / "mag/raw/relations/author___writes___paper/edge.csv", "0,0\n7,1\n");
  CHECK(run_tool(
            {"--input", "ogb:" + (dir / "mag").string(), "--output", out, "--log-level", "error"},
            &err) == 1);
  CHECK_THAT(err,
             Contains("edge.csv:2: column 1 (source, type 'author'): node id 7 is out of range"));
  CHECK(testing::no_entry_named(dir.path(), "out"));
  write_mag(dir / "mag");
  CHECK(run_tool({"--input", "ogb:" + (dir / "mag").string(), "--target-ntype", "venue", "--output",
                  out, "--log-level", "error"},
                 &err) == 1);
  CHECK_THAT(err, Contains("missing labels for the target type 'venue'"));
  CHECK(testing::no_entry_named(dir.path(), "out"));
  CHECK(run_tool({"--input", "ogb:" + (dir / "mag").string(), "--labels", "x", "--output", out},
                 &err) == 1);
  CHECK_THAT(err, Contains("apply to --input edges:FILE only"));

  // --add-reverse and --target-ntype are for heterogeneous inputs only.
  fs::create_directories(dir / "homo");
  CHECK(run_tool({"--input", "ogb:" + (dir / "homo").string(), "--add-reverse", "--output", out},
                 &err) == 1);
  CHECK_THAT(err, Contains("--add-reverse applies to heterogeneous inputs only"));
  CHECK(run_tool({"--input", "edges:" + (dir / "e.csv").string(), "--target-ntype", "paper",
                  "--output", out},
                 &err) == 1);
  CHECK_THAT(err, Contains("--target-ntype applies to heterogeneous inputs only"));
  CHECK(run_tool({"--generate", "sbm:nodes=100", "--add-reverse", "--output", out}, &err) == 1);
  CHECK_THAT(err, Contains("--add-reverse applies to heterogeneous inputs only"));

  // Generators dispatch on the name.
  CHECK(run_tool({"--generate", "foo:nodes=1", "--output", out}, &err) == 1);
  CHECK_THAT(err, Contains("unknown generator 'foo' (known: sbm, hsbm)"));
  CHECK(run_tool({"--generate", "hsbm:nodes=1", "--output", out}, &err) == 1);
  CHECK_THAT(err, Contains("unknown key 'nodes'"));
  CHECK(run_tool({"--generate", "hsbm", "--target-ntype", "author", "--output", out}, &err) == 1);
  CHECK_THAT(err, Contains("the target type of hsbm is 'paper'"));
  CHECK(run_tool({"--generate", "sbm:bogus=1", "--output", out}, &err) == 1);
  CHECK_THAT(err, Contains("unknown key 'bogus'"));
  CHECK(testing::no_entry_named(dir.path(), "out"));
}

}  // namespace
}  // namespace dgld
