// DGL's chunked graph layout: --to-chunks, --input chunks:DIR, the .npy reader and
// every error of metadata.json, edge chunks and node data chunks.
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>
#include <sstream>

#include <zlib.h>

#include "common/file_util.h"
#include "partition/chunked.h"
#include "partition/file_input.h"
#include "partition/generator.h"
#include "partition/partitioner.h"
#include "partition/tool.h"
#include "partition/verify.h"
#include "tests/partition/test_util.h"

namespace dgld {
namespace {
namespace fs = std::filesystem;
using Catch::Contains;
using testing::no_entry_named;
using testing::require_verified;
using testing::TempDir;
using testing::write_text;

SbmParams small_sbm() {
  SbmParams p;
  p.nodes = 1500;
  p.avg_degree = 10;
  p.classes = 5;
  p.feat_dim = 6;
  p.seed = 11;
  return p;
}

GraphData load_all(GraphSource& src) {
  GraphData g;
  Status st = src.load_structure(&g);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  st = src.load_features(&g);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  return g;
}

// Loads a chunked directory completely; the first error.
Status load_chunks(const fs::path& dir) {
  auto s = make_chunked_source(dir);
  if (!s.is_ok()) return s.status();
  GraphData g;
  DGLD_RETURN_IF_ERROR((*s)->load_structure(&g));
  return (*s)->load_features(&g);
}

GraphData load_chunks_ok(const fs::path& dir) {
  auto s = make_chunked_source(dir);
  INFO(s.status().to_string());
  REQUIRE(s.is_ok());
  CHECK((*s)->describe() == "chunks:" + dir.string());
  return load_all(**s);
}

// Same graph, same edge ids, same node data.
void require_same_graph(const GraphData& a, const GraphData& b) {
  REQUIRE(a.num_nodes == b.num_nodes);
  REQUIRE(a.num_edges() == b.num_edges());
  CHECK(a.indptr == b.indptr);
  CHECK(a.src == b.src);
  int64_t bad = 0;
  for (int64_t k = 0; k < a.num_edges(); ++k) bad += a.orig_edge_id(k) != b.orig_edge_id(k);
  CHECK(bad == 0);
  CHECK(a.symmetric_simple == b.symmetric_simple);
  CHECK(a.feat_dim == b.feat_dim);
  CHECK(a.features == b.features);
  CHECK(a.labels == b.labels);
  CHECK(a.train_mask == b.train_mask);
  CHECK(a.val_mask == b.val_mask);
  CHECK(a.test_mask == b.test_mask);
}

PartitionOptions options_for(const fs::path& out, int parts) {
  PartitionOptions o;
  o.num_parts = parts;
  o.output = out;
  o.graph_name = "g";
  return o;
}


// Runs dgl-partition with `args`; the exit status, stdout and stderr.
int run_tool(const std::vector<std::string>& args, std::string* out, std::string* err) {
  std::vector<const char*> argv = {"dgl-partition"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream o, e;
  std::streambuf* old_out = std::cout.rdbuf(o.rdbuf());
  std::streambuf* old_err = std::cerr.rdbuf(e.rdbuf());
  const int rc = run_partition_tool(static_cast<int>(argv.size()), argv.data());
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  *out = o.str();
  *err = e.str();
  return rc;
}

// ---------------------------------------------------------------- round trips

TEST_CASE("a generated graph written as chunks reads back as the same graph") {
  const SbmParams params = small_sbm();
  auto ref_source = make_sbm_source(params);
  const GraphData g = load_all(*ref_source);
  TempDir dir;
  const fs::path out = dir / "chunks";
  auto src = make_sbm_source(params);
  Status st = write_chunked(*src, out, 3, "sbm-small", false);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  CHECK(no_entry_named(dir.path(), ".chunks"));

  auto meta = read_chunked_metadata(out);
  INFO(meta.status().to_string());
  REQUIRE(meta.is_ok());
  CHECK(meta->graph_name == "sbm-small");
  CHECK(meta->num_node_chunks() == 3);
  CHECK(meta->num_edge_chunks() == 3);
  CHECK(meta->num_nodes() == params.nodes);
  CHECK(meta->num_edges() == g.num_edges());
  CHECK(meta->node_chunk_sizes == std::vector<int64_t>{500, 500, 500});
  CHECK(meta->delimiter == ' ');
  std::vector<std::string> names;
  for (const auto& d : meta->node_data) names.push_back(d.name);
  CHECK(names == std::vector<std::string>{"features", "labels", "train_mask", "val_mask", "test_mask"});

  // Edge chunks: edge id e is the generator's CSC position e.
  std::vector<int64_t> dst_of(static_cast<size_t>(g.num_edges()));
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) dst_of[g.orig_edge_id(k)] = v;
  }
  int64_t bad = 0, seen = 0;
  for (int i = 0; i < meta->num_edge_chunks(); ++i) {
    auto c = read_edge_chunk(*meta, i);
    REQUIRE(c.is_ok());
    REQUIRE(static_cast<int64_t>(c->src.size()) == meta->edge_chunk_sizes[i]);
    for (size_t k = 0; k < c->src.size(); ++k) {
      const int64_t e = meta->edge_chunk_start(i) + static_cast<int64_t>(k);
      bad += c->src[k] != g.src[e] || c->dst[k] != dst_of[e];
      ++seen;
    }
  }
  CHECK(seen == g.num_edges());
  CHECK(bad == 0);

  // Node data chunks.
  for (int i = 0; i < 3; ++i) {
    const int64_t start = meta->node_chunk_start(i);
    auto f = read_node_data_chunk(*meta, "features", i);
    REQUIRE(f.is_ok());
    CHECK(f->dtype == DType::float32);
    CHECK(f->rows == 500);
    CHECK(f->cols == params.feat_dim);
    CHECK(std::memcmp(f->data.data(), g.features.data() + start * params.feat_dim, f->data.size()) == 0);
    auto l = read_node_data_chunk(*meta, "labels", i);
    REQUIRE(l.is_ok());
    CHECK(l->dtype == DType::int64);
    CHECK(l->cols == 1);
    CHECK(std::memcmp(l->data.data(), g.labels.data() + start, l->data.size()) == 0);
    auto m = read_node_data_chunk(*meta, "train_mask", i);
    REQUIRE(m.is_ok());
    CHECK(m->dtype == DType::uint8);
    CHECK(std::memcmp(m->data.data(), g.train_mask.data() + start, m->data.size()) == 0);
  }
  CHECK_THAT(read_node_data_chunk(*meta, "year", 0).status().message(), Contains("no node data 'year'"));
  CHECK_FALSE(read_edge_chunk(*meta, 3).is_ok());

  // As a source: the same CSC, edge ids and data.
  const GraphData back = load_chunks_ok(out);
  require_same_graph(g, back);
  CHECK(back.symmetric_simple);

  // Partitioned: the same partitions as the generated graph (same seed).
  PartitionStats a, b;
  auto s1 = make_sbm_source(params);
  REQUIRE(partition_graph(*s1, options_for(dir / "p-gen", 3), &a).is_ok());
  auto s2 = make_chunked_source(out);
  REQUIRE(s2.is_ok());
  st = partition_graph(**s2, options_for(dir / "p-chunks", 3), &b);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  require_verified(dir / "p-chunks" / "g.json");
  CHECK(a.num_nodes == b.num_nodes);
  CHECK(a.num_edges == b.num_edges);
  CHECK(a.edge_cut == b.edge_cut);
  for (int p = 0; p < 3; ++p) {
    CHECK(a.parts[p].owned_nodes == b.parts[p].owned_nodes);
    auto x = read_file(dir / "p-gen" / ("part" + std::to_string(p)) / "graph.dgld");
    auto y = read_file(dir / "p-chunks" / ("part" + std::to_string(p)) / "graph.dgld");
    REQUIRE(x.is_ok());
    REQUIRE(y.is_ok());
    CHECK(*x == *y);
  }

  // Writing the chunked input again gives the same files.
  auto s3 = make_chunked_source(out);
  REQUIRE(s3.is_ok());
  REQUIRE(write_chunked(**s3, dir / "again", 3, "sbm-small", false).is_ok());
  for (const char* f : {"metadata.json", "edges/chunk-1.txt", "node_data/features-2.npy", "node_data/labels-0.npy"}) {
    CHECK(*read_file(out / f) == *read_file(dir / "again" / f));
  }
}

TEST_CASE("command line: --to-chunks, then --input chunks:DIR") {
  TempDir dir;
  const std::string chunks = (dir / "chunks").string();
  const std::string gen = "sbm:nodes=800,avg_degree=6,classes=3,feat_dim=4,seed=3";
  std::string out, err;
  REQUIRE(run_tool({"--generate", gen, "--to-chunks", "4", "--output", chunks, "--graph-name", "tiny", "--log-level",
                    "warn"},
                   &out, &err) == 0);
  auto meta = read_chunked_metadata(chunks);
  REQUIRE(meta.is_ok());
  CHECK(meta->graph_name == "tiny");
  CHECK(out == "wrote 4 chunks: 800 nodes, " + std::to_string(meta->num_edges()) + " edges to " + chunks + "\n");

  // An existing output needs --overwrite.
  CHECK(run_tool({"--generate", gen, "--to-chunks", "2", "--output", chunks, "--log-level", "warn"}, &out, &err) == 1);
  CHECK_THAT(err, Contains("exists and is not empty (pass --overwrite"));
  CHECK(read_chunked_metadata(chunks)->num_node_chunks() == 4);
  CHECK(run_tool({"--generate", gen, "--to-chunks", "2", "--output", chunks, "--overwrite", "--log-level", "warn"},
                 &out, &err) == 0);
  CHECK(read_chunked_metadata(chunks)->num_node_chunks() == 2);
  CHECK(no_entry_named(dir.path(), ".chunks"));

  // Partition the chunks; the same edge cut as the generated input.
  const std::string p1 = (dir / "p1").string(), p2 = (dir / "p2").string();
  REQUIRE(run_tool({"--input", "chunks:" + chunks, "--num-parts", "2", "--output", p1, "--graph-name", "g",
                    "--log-level", "warn"},
                   &out, &err) == 0);
  const std::string chunk_summary = out;
  REQUIRE(run_tool({"--generate", gen, "--num-parts", "2", "--output", p2, "--graph-name", "g", "--log-level", "warn"},
                   &out, &err) == 0);
  auto cut_line = [](const std::string& s) {
    const size_t b = s.find("edge cut");
    return s.substr(b, s.find('\n', b) - b);
  };
  CHECK(cut_line(chunk_summary) == cut_line(out));
  CHECK(run_tool({"--verify", p1 + "/g.json"}, &out, &err) == 0);
  CHECK_THAT(out, Contains(": OK (2 partitions, 800 nodes"));

  // Flag errors.
  CHECK(run_tool({"--generate", gen, "--to-chunks", "0", "--output", (dir / "x").string()}, &out, &err) == 1);
  CHECK_THAT(err, Contains("--to-chunks 0: expected at least 1 chunk"));
  CHECK(run_tool({"--generate", gen, "--to-chunks", "2", "--link-split", "0.8,0.1,0.1", "--output",
                  (dir / "x").string()},
                 &out, &err) == 1);
  CHECK_THAT(err, Contains("do not apply to --to-chunks"));
  CHECK(run_tool({"--input", "chunks:" + chunks, "--labels", "l.txt", "--output", (dir / "x").string()}, &out, &err) ==
        1);
  CHECK_THAT(err, Contains("do not apply to --input chunks:DIR"));
  CHECK(run_tool({"--input", "chunks:" + (dir / "nope").string(), "--output", (dir / "x").string()}, &out, &err) == 1);
  CHECK_THAT(err, Contains("does not exist"));
  CHECK(run_tool({"--generate", "hsbm:papers=200,authors=100,venues=8,topics=10,classes=4", "--to-chunks", "2", "--output",
                  (dir / "x").string(), "--log-level", "warn"},
                 &out, &err) == 1);
  CHECK_THAT(err, Contains("--to-chunks writes homogeneous graphs only"));
  CHECK(no_entry_named(dir.path(), "x"));
}

// A small OGB-layout dataset (raw/ and a node split).
void write_ogb(const fs::path& root, bool edge_split) {
  write_text(root / "raw" / "num-node-list.csv", "7\n");
  write_text(root / "raw" / "edge.csv", "0,1\n1,2\n3,2\n4,3\n5,4\n6,0\n2,5\n");
  std::string feats, labels;
  for (int v = 0; v < 7; ++v) {
    feats += std::to_string(v) + ".5,-1," + std::to_string(v * v) + "\n";
    labels += std::to_string(v % 2) + "\n";
  }
  write_text(root / "raw" / "node-feat.csv", feats);
  write_text(root / "raw" / "node-label.csv", labels);
  if (edge_split) {
    write_text(root / "split" / "lp" / "train.csv", "0,1\n1,2\n");
    write_text(root / "split" / "lp" / "valid.csv", "3,2\n");
    write_text(root / "split" / "lp" / "test.csv", "4,3\n");
  } else {
    write_text(root / "split" / "s" / "train.csv", "0\n1\n2\n");
    write_text(root / "split" / "s" / "valid.csv", "3\n");
    write_text(root / "split" / "s" / "test.csv", "5\n6\n");
  }
}

TEST_CASE("an OGB input to chunks: reverse edges written, the same graph read back") {
  TempDir dir;
  write_ogb(dir / "ogb", false);
  FileInputOptions in;
  in.spec = "ogb:" + (dir / "ogb").string();
  auto ref = make_file_source(in);
  REQUIRE(ref.is_ok());
  const GraphData g = load_all(**ref);
  auto src = make_file_source(in);
  REQUIRE(src.is_ok());
  Status st = write_chunked(**src, dir / "c", 2, "ogb-small", false);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  auto meta = read_chunked_metadata(dir / "c");
  REQUIRE(meta.is_ok());
  CHECK(meta->node_chunk_sizes == std::vector<int64_t>{3, 4});
  CHECK(meta->edge_chunk_sizes == std::vector<int64_t>{7, 7});
  // Edge i is line i of edge.csv, edge 7 + i its reverse.
  auto c0 = read_edge_chunk(*meta, 0), c1 = read_edge_chunk(*meta, 1);
  REQUIRE(c0.is_ok());
  REQUIRE(c1.is_ok());
  CHECK(c0->src == std::vector<int64_t>{0, 1, 3, 4, 5, 6, 2});
  CHECK(c0->dst == std::vector<int64_t>{1, 2, 2, 3, 4, 0, 5});
  CHECK(c1->src == c0->dst);
  CHECK(c1->dst == c0->src);
  CHECK(*read_file(dir / "c" / "edges" / "chunk-0.txt") == "0 1\n1 2\n3 2\n4 3\n5 4\n6 0\n2 5\n");
  auto val = read_node_data_chunk(*meta, "val_mask", 1);
  REQUIRE(val.is_ok());
  CHECK(val->rows == 4);
  CHECK(std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(val->data.data()),
                             reinterpret_cast<const uint8_t*>(val->data.data()) + 4) ==
        std::vector<uint8_t>{1, 0, 0, 0});
  const GraphData back = load_chunks_ok(dir / "c");
  require_same_graph(g, back);
  CHECK(back.symmetric_simple);

  // The .npy files are what numpy writes (format 1.0).
  auto h = read_npy_header(dir / "c" / "node_data" / "features-1.npy");
  REQUIRE(h.is_ok());
  CHECK(h->descr == "<f4");
  CHECK(h->ndim == 2);
  CHECK(h->rows == 4);
  CHECK(h->cols == 3);
  CHECK(h->data_offset % 64 == 0);
}

TEST_CASE("--to-chunks refuses an edge split and leaves nothing behind") {
  TempDir dir;
  write_ogb(dir / "ogb", true);
  FileInputOptions in;
  in.spec = "ogb:" + (dir / "ogb").string();
  auto src = make_file_source(in);
  REQUIRE(src.is_ok());
  Status st = write_chunked(**src, dir / "out", 2, "g", false);
  CHECK_THAT(st.message(), Contains("has an edge split (split/lp)"));
  CHECK(no_entry_named(dir.path(), "out"));
  auto src2 = make_file_source(in);
  CHECK_THAT(write_chunked(**src2, dir / "out", 8, "g", false).message(), Contains("edge split"));
  write_ogb(dir / "ogb2", false);
  in.spec = "ogb:" + (dir / "ogb2").string();
  auto src3 = make_file_source(in);
  CHECK_THAT(write_chunked(**src3, dir / "out", 8, "g", false).message(), Contains("more chunks than the 7 nodes"));
  CHECK(no_entry_named(dir.path(), "out"));
}

// ---------------------------------------------------------------- hand-written chunks

std::string npy(const std::string& descr, std::vector<int64_t> shape, const void* data, size_t bytes) {
  return npy_header(descr, shape) + std::string(static_cast<const char*>(data), bytes);
}

// 6 nodes in chunks [3, 3], 5 edges in chunks [3, 2], features (float32 x 2), labels,
// train_mask (bool).
struct Chunks {
  TempDir dir;
  fs::path root() const { return dir / "g"; }
  std::string meta_file() const { return (root() / "metadata.json").string(); }
  std::string nodes = "[[3, 3]]", edges_sizes = "[[3, 2]]", ntype = "[\"_N\"]", etype = "[\"_N:_E:_N\"]";
  std::string format = "{\"name\": \"csv\", \"delimiter\": \" \"}";
  std::string edge_files = "[\"edges/e0.txt\", \"edges/e1.txt\"]";
  std::string feat_files = "[\"nd/feat0.npy\", \"nd/feat1.npy\"]";
  std::string extra;  // more top-level fields

  Chunks() {
    write_text(root() / "edges" / "e0.txt", "0 1\n1 2\n2 0\n");
    write_text(root() / "edges" / "e1.txt", "3 4\n5 3\n");
    for (int i = 0; i < 2; ++i) {
      float f[6];
      int64_t l[3];
      uint8_t m[3] = {1, 0, static_cast<uint8_t>(i)};
      for (int k = 0; k < 6; ++k) f[k] = static_cast<float>(i * 10 + k);
      for (int k = 0; k < 3; ++k) l[k] = i * 3 + k;
      write_text(root() / "nd" / ("feat" + std::to_string(i) + ".npy"), npy("<f4", {3, 2}, f, sizeof(f)));
      write_text(root() / "nd" / ("label" + std::to_string(i) + ".npy"), npy("<i8", {3}, l, sizeof(l)));
      write_text(root() / "nd" / ("train" + std::to_string(i) + ".npy"), npy("|b1", {3}, m, sizeof(m)));
      write_text(root() / "nd" / ("year" + std::to_string(i) + ".npy"), npy("<i8", {3}, l, sizeof(l)));
    }
    write_meta();
  }
  void write_meta() const {
    write_text(root() / "metadata.json",
               "{\"graph_name\": \"hand\", \"node_type\": " + ntype + ", \"num_nodes_per_chunk\": " + nodes +
                   ", \"edge_type\": " + etype + ", \"num_edges_per_chunk\": " + edges_sizes +
                   ", \"edges\": {\"_N:_E:_N\": {\"format\": " + format + ", \"data\": " + edge_files +
                   "}}, \"node_data\": {\"_N\": {"
                   "\"features\": {\"format\": {\"name\": \"numpy\"}, \"data\": " + feat_files + "}, "
                   "\"labels\": {\"format\": {\"name\": \"numpy\"}, \"data\": [\"nd/label0.npy\", \"nd/label1.npy\"]}, "
                   "\"train_mask\": {\"format\": {\"name\": \"numpy\"}, \"data\": [\"nd/train0.npy\", \"nd/train1.npy\"]}, "
                   "\"year\": {\"format\": {\"name\": \"numpy\"}, \"data\": [\"nd/year0.npy\", \"nd/year1.npy\"]}"
                   "}}, \"edge_data\": {}" + extra + "}");
  }
  std::string error() const {
    Status st = load_chunks(root());
    INFO("expected an error");
    REQUIRE_FALSE(st.is_ok());
    return st.message();
  }
};

TEST_CASE("hand-written chunks load: bool masks, other delimiters, gzip, .npy 2.0") {
  Chunks c;
  SECTION("as written") {
    const GraphData g = load_chunks_ok(c.root());
    CHECK(g.num_nodes == 6);
    CHECK(g.num_edges() == 5);
    // In-edges: 2->0 (edge 2), 0->1 (0), 1->2 (1), 5->3 (4), 3->4 (3).
    CHECK(g.indptr == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 5});
    CHECK(g.src == std::vector<int32_t>{2, 0, 1, 5, 3});
    CHECK(g.orig_eid == std::vector<int64_t>{2, 0, 1, 4, 3});
    CHECK_FALSE(g.symmetric_simple);
    CHECK(g.feat_dim == 2);
    CHECK(g.features == std::vector<float>{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15});
    CHECK(g.labels == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
    CHECK(g.train_mask == std::vector<uint8_t>{1, 0, 0, 1, 0, 1});
    CHECK(g.val_mask.empty());
  }
  SECTION("comma delimiter and spaces around it") {
    c.format = "{\"name\": \"csv\", \"delimiter\": \",\"}";
    c.write_meta();
    write_text(c.root() / "edges" / "e0.txt", "0,1\n1 , 2\n2,0\n");
    write_text(c.root() / "edges" / "e1.txt", "3,4\r\n5,3\r\n");
    CHECK(load_chunks(c.root()).is_ok());
  }
  SECTION("no delimiter given: a space; tabs and runs of spaces separate too") {
    c.format = "{\"name\": \"csv\"}";
    c.write_meta();
    write_text(c.root() / "edges" / "e0.txt", "0\t1\n1   2\n\n2 0\n");
    CHECK(load_chunks(c.root()).is_ok());
  }
  SECTION("a gzip-compressed edge chunk") {
    const std::string p = (c.root() / "edges" / "e1.txt").string();
    gzFile f = gzopen(p.c_str(), "wb");
    REQUIRE(f != nullptr);
    const char text[] = "3 4\n5 3\n";
    gzwrite(f, text, sizeof(text) - 1);
    gzclose(f);
    CHECK(load_chunks(c.root()).is_ok());
  }
  SECTION(".npy format 2.0 and 3.0, 2-d labels of one column") {
    for (int major : {2, 3}) {
      const float f[6] = {0, 1, 2, 3, 4, 5};
      std::string h = npy_header("<f4", std::vector<int64_t>{3, 2});
      // Re-frame the 1.0 header as 2.0/3.0: a 4-byte length.
      const std::string dict = h.substr(10);
      std::string v2("\x93NUMPY", 6);
      v2 += static_cast<char>(major);
      v2 += '\0';
      const uint32_t len = static_cast<uint32_t>(dict.size());
      for (int b = 0; b < 4; ++b) v2 += static_cast<char>((len >> (8 * b)) & 0xff);
      write_text(c.root() / "nd" / "feat1.npy", v2 + dict + std::string(reinterpret_cast<const char*>(f), sizeof(f)));
      const int64_t l[3] = {7, 8, 9};
      write_text(c.root() / "nd" / "label1.npy", npy("<i8", {3, 1}, l, sizeof(l)));
      const GraphData g = load_chunks_ok(c.root());
      CHECK(g.features[6] == 0.0f);
      CHECK(g.labels[5] == 9);
    }
  }
}

TEST_CASE("metadata.json errors name the file and the field") {
  Chunks c;
  const std::string m = c.meta_file();
  auto meta_error = [&] {
    auto r = read_chunked_metadata(c.root());
    INFO("expected an error");
    REQUIRE_FALSE(r.is_ok());
    return r.status().message();
  };
  SECTION("missing num_nodes_per_chunk") {
    c.nodes = "[[3, 3]], \"x\": 0";
    c.write_meta();
    const std::string text = *read_file(m);
    const size_t b = text.find("\"num_nodes_per_chunk\"");
    write_text(m, text.substr(0, b) + text.substr(text.find("\"x\"", b)));
    CHECK(meta_error() == m + ": missing field 'num_nodes_per_chunk'");
  }
  SECTION("a negative chunk size") {
    c.nodes = "[[3, -3]]";
    c.write_meta();
    CHECK(meta_error() == m + ": field 'num_nodes_per_chunk'[0][1]: expected a non-negative integer, got -3");
  }
  SECTION("sizes not a list of lists") {
    c.edges_sizes = "[3, 2]";
    c.write_meta();
    CHECK_THAT(meta_error(), Contains(m + ": field 'num_edges_per_chunk'"));
  }
  SECTION("two node types") {
    c.ntype = "[\"_N\", \"paper\"]";
    c.write_meta();
    CHECK_THAT(meta_error(), Contains(m + ": field 'node_type': 2 types"));
    CHECK_THAT(meta_error(), Contains("heterogeneous chunked graphs are not supported yet"));
  }
  SECTION("two edge types") {
    c.etype = "[\"_N:_E:_N\", \"_N:rev:_N\"]";
    c.write_meta();
    CHECK_THAT(meta_error(), Contains("heterogeneous chunked graphs are not supported yet"));
  }
  SECTION("an edge type between other node types") {
    c.etype = "[\"a:_E:_N\"]";
    c.write_meta();
    CHECK_THAT(meta_error(), Contains(m + ": field 'edge_type'[0]: expected \"_N:<relation>:_N\""));
  }
  SECTION("fewer edge files than edge chunks") {
    c.edge_files = "[\"edges/e0.txt\"]";
    c.write_meta();
    CHECK(meta_error() == m + ": field 'edges'[\"_N:_E:_N\"][\"data\"]: expected 2 files (one per edge chunk, as "
                              "num_edges_per_chunk[0] lists), got 1");
  }
  SECTION("more feature files than node chunks") {
    c.feat_files = "[\"a.npy\", \"b.npy\", \"c.npy\"]";
    c.write_meta();
    CHECK_THAT(meta_error(), Contains(m + ": field 'node_data'[\"_N\"][\"features\"][\"data\"]: expected 2 files (one "
                                          "per node chunk"));
  }
  SECTION("an unknown edge format") {
    c.format = "{\"name\": \"parquet\"}";
    c.write_meta();
    CHECK_THAT(meta_error(), Contains(m + ": field 'edges'[\"_N:_E:_N\"][\"format\"][\"name\"]: unsupported format "
                                          "\"parquet\""));
  }
  SECTION("a bad delimiter") {
    c.format = "{\"name\": \"csv\", \"delimiter\": \";\"}";
    c.write_meta();
    CHECK_THAT(meta_error(), Contains("[\"format\"][\"delimiter\"]: expected"));
  }
  SECTION("missing graph_name, invalid JSON, no metadata.json") {
    write_text(m, "{\"node_type\": [\"_N\"]}");
    CHECK(meta_error() == m + ": missing field 'graph_name'");
    write_text(m, "{\"graph_name\": ");
    CHECK_THAT(meta_error(), Contains(m + ": not valid JSON"));
    fs::remove(m);
    CHECK_THAT(meta_error(), Contains("missing " + m));
  }
}

TEST_CASE("edge chunk errors name the file and the line") {
  Chunks c;
  const std::string e0 = (c.root() / "edges" / "e0.txt").string(), e1 = (c.root() / "edges" / "e1.txt").string();
  SECTION("a line without two ids") {
    write_text(e1, "3 4\n5 x\n");
    CHECK(c.error() == e1 + ":2: expected two node ids separated by ' ', got '5 x'");
    write_text(e1, "3 4\n5\n");
    CHECK(c.error() == e1 + ":2: expected two node ids separated by ' ', got '5'");
    write_text(e1, "3 4\n5 3 1\n");
    CHECK(c.error() == e1 + ":2: expected two node ids separated by ' ', got '5 3 1'");
    write_text(e1, "3,4\n5 3\n");
    CHECK(c.error() == e1 + ":1: expected two node ids separated by ' ', got '3,4'");
  }
  SECTION("an id out of range") {
    write_text(e0, "0 1\n1 2\n2 6\n");
    CHECK(c.error() == e0 + ":3: node id 6 is out of range [0, 6)");
    write_text(e0, "0 1\n-1 2\n2 0\n");
    CHECK(c.error() == e0 + ":2: node id -1 is out of range [0, 6)");
  }
  SECTION("fewer lines than the metadata says") {
    write_text(e1, "3 4\n");
    CHECK(c.error() == e1 + ": has 1 edges, expected 2 (num_edges_per_chunk[0][1] in " + c.meta_file() + ")");
  }
  SECTION("more lines than the metadata says") {
    write_text(e1, "3 4\n5 3\n0 5\n");
    CHECK(c.error() == e1 + ":3: more edges than the 2 that num_edges_per_chunk[0][1] in " + c.meta_file() + " gives");
  }
  SECTION("a missing chunk file") {
    fs::remove(e1);
    CHECK_THAT(c.error(), Contains("missing edge chunk " + e1 + " (edge chunk 1 of " + c.meta_file() + ")"));
  }
  SECTION("no edges at all") {
    c.edges_sizes = "[[0, 0]]";
    c.write_meta();
    write_text(e0, "");
    write_text(e1, "");
    CHECK(c.error() == c.meta_file() + ": no edges (empty graph)");
  }
}

TEST_CASE("node data chunk errors name the file") {
  Chunks c;
  const fs::path nd = c.root() / "nd";
  const std::string f1 = (nd / "feat1.npy").string(), l1 = (nd / "label1.npy").string();
  const float f[8] = {};
  const int64_t l[3] = {};
  SECTION("wrong row count") {
    write_text(f1, npy("<f4", {4, 2}, f, sizeof(f)));
    CHECK(c.error() == f1 + ": has 4 rows, expected 3 (one per node of node chunk 1, num_nodes_per_chunk[0][1] in " +
                           c.meta_file() + ")");
  }
  SECTION("another dtype than chunk 0") {
    write_text(f1, npy_header("<i8", std::vector<int64_t>{3, 2}) + std::string(48, '\0'));
    CHECK_THAT(c.error(), Contains(f1 + ": int64 ('<i8'), 2 columns, but " + (nd / "feat0.npy").string() +
                                   " (chunk 0 of node data 'features') has float32 ('<f4'), 2 columns"));
  }
  SECTION("other columns than chunk 0") {
    write_text(f1, npy("<f4", {3, 1}, f, 12));
    CHECK_THAT(c.error(), Contains("every chunk of an array must have the same dtype and columns"));
  }
  SECTION("features of the wrong dtype in every chunk") {
    for (int i = 0; i < 2; ++i) write_text(nd / ("feat" + std::to_string(i) + ".npy"), npy("<i8", {3}, l, sizeof(l)));
    CHECK_THAT(c.error(), Contains("feat0.npy: node data 'features' must be float32 ('<f4'), got '<i8'"));
  }
  SECTION("labels of the wrong dtype") {
    for (int i = 0; i < 2; ++i) write_text(nd / ("label" + std::to_string(i) + ".npy"), npy("<f4", {3}, f, 12));
    CHECK_THAT(c.error(), Contains("label0.npy: node data 'labels' must be int64 ('<i8') with one value per node, got "
                                   "float32 with 1 columns"));
  }
  SECTION("an unsupported dtype") {
    write_text(l1, npy("<f8", {3}, l, sizeof(l)));
    CHECK(c.error() == l1 + ": dtype '<f8' is not supported (expected '<f4' float32, '<i8' int64, '|u1' uint8 or "
                            "'|b1' bool)");
  }
  SECTION("not a .npy file") {
    write_text(l1, "0\n1\n2\n");
    CHECK(c.error() == l1 + ": not a .npy file (no \\x93NUMPY magic)");
  }
  SECTION("truncated data") {
    write_text(l1, npy("<i8", {3}, l, 16));
    CHECK(c.error() == l1 + ": has 16 bytes of data, the header's shape (3,) of '<i8' needs 24");
  }
  SECTION("fortran order, three dimensions") {
    std::string h = npy_header("<i8", std::vector<int64_t>{3});
    h.replace(h.find("False"), 5, "True ");
    write_text(l1, h + std::string(24, '\0'));
    CHECK_THAT(c.error(), Contains(l1 + ": fortran_order True is not supported"));
    write_text(l1, npy("<i8", {3, 1, 1}, l, sizeof(l)));
    CHECK(c.error() == l1 + ": shape (3, 1, 1): expected 1 or 2 dimensions");
  }
  SECTION("a missing chunk file") {
    fs::remove(l1);
    CHECK(c.error() == "missing " + l1);
  }
  SECTION("a bad features chunk is found before anything is written") {
    // load_structure checks every features header; write_chunked fails and leaves nothing.
    write_text(f1, npy("<f4", {2, 2}, f, 16));
    auto src = make_chunked_source(c.root());
    REQUIRE(src.is_ok());
    Status st = write_chunked(**src, c.dir / "out", 2, "g", false);
    CHECK_THAT(st.message(), Contains(f1 + ": has 2 rows, expected 3"));
    CHECK(no_entry_named(c.dir.path(), "out"));
  }
  SECTION("a features chunk broken between the two phases") {
    auto src = make_chunked_source(c.root());
    REQUIRE(src.is_ok());
    GraphData g;
    REQUIRE((*src)->load_structure(&g).is_ok());
    fs::remove(f1);
    CHECK((*src)->load_features(&g).message() == "missing " + f1);
  }
}

}  // namespace
}  // namespace dgld
