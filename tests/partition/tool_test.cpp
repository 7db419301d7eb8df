// dgl-partition end to end: generated graphs, Cora, edge lists, bad input, --verify.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "common/part_config.h"
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
using testing::open_all;
using testing::require_verified;
using testing::rewrite_array;
using testing::TempDir;
using testing::write_text;

SbmParams small_sbm() {
  SbmParams p;
  p.nodes = 3000;
  p.avg_degree = 12;
  p.classes = 6;
  p.feat_dim = 8;
  p.seed = 7;
  return p;
}

PartitionOptions options_for(const fs::path& out, int parts) {
  PartitionOptions o;
  o.num_parts = parts;
  o.output = out;
  o.graph_name = "g";
  return o;
}


// Every owned node's node data equals the input row of its original id.
void check_node_data(const std::vector<std::unique_ptr<MappedPartition>>& parts, const GraphData& g) {
  for (const auto& p : parts) {
    auto orig = p->orig_node_ids();
    const TensorView* feats = p->node_tensor("_N/features");
    if (g.feat_dim > 0) {
      REQUIRE(feats != nullptr);
      REQUIRE(feats->shape == std::vector<int64_t>{p->num_inner_nodes(), g.feat_dim});
    }
    const TensorView* labels = p->node_tensor("_N/labels");
    const TensorView* train = p->node_tensor("_N/train_mask");
    REQUIRE(labels != nullptr);
    int64_t bad = 0;
    for (int64_t i = 0; i < p->num_inner_nodes(); ++i) {
      const int64_t o = orig[i];
      if (g.feat_dim > 0 &&
          std::memcmp(feats->as<float>().data() + i * g.feat_dim, g.features.data() + o * g.feat_dim,
                      static_cast<size_t>(g.feat_dim) * sizeof(float)) != 0) {
        ++bad;
      }
      if (labels->as<int64_t>()[i] != g.labels[o]) ++bad;
      if (!g.train_mask.empty() && train->as<uint8_t>()[i] != g.train_mask[o]) ++bad;
    }
    CHECK(bad == 0);
  }
}

GraphData load_all(GraphSource& src) {
  GraphData g;
  REQUIRE(src.load_structure(&g).is_ok());
  REQUIRE(src.load_features(&g).is_ok());
  return g;
}

TEST_CASE("generated graphs round trip with 1, 2 and 4 parts") {
  const SbmParams params = small_sbm();
  auto reference_source = make_sbm_source(params);
  const GraphData g = load_all(*reference_source);
  for (int parts : {1, 2, 4}) {
    DYNAMIC_SECTION("parts=" << parts) {
      TempDir dir;
      auto src = make_sbm_source(params);
      PartitionStats stats;
      Status st = partition_graph(*src, options_for(dir / "out", parts), &stats);
      INFO(st.to_string());
      REQUIRE(st.is_ok());
      const fs::path json = dir / "out" / "g.json";
      require_verified(json);
      PartitionConfig c;
      auto ps = open_all(json, &c);
      CHECK(c.num_nodes == params.nodes);
      CHECK(c.num_edges == g.num_edges());
      check_node_data(ps, g);
      // METIS's default tolerance is 3 % over the mean part size.
      CHECK(stats.node_balance <= 1.03 + 1e-9);
      // Each partition's trainer ids name the partition (one trainer per machine).
      for (const auto& p : ps) {
        for (int64_t t : p->trainer_ids()) CHECK(t == p->part_id());
      }
      // Original edge ids map back to the input edge with the same ends.
      for (const auto& p : ps) {
        const auto& in = p->in_edges();
        for (int64_t r = 0; r < p->num_inner_nodes(); r += 97) {
          const int64_t dst = p->orig_node_ids()[r];
          for (int64_t k = in.indptr[r]; k < in.indptr[r + 1]; ++k) {
            const int64_t oe = p->orig_edge_ids()[k];
            CHECK(oe >= g.indptr[dst]);
            CHECK(oe < g.indptr[dst + 1]);
          }
        }
      }
    }
  }
}

TEST_CASE("METIS cuts fewer edges than random partitioning") {
  TempDir dir;
  PartitionStats metis, random;
  auto src = make_sbm_source(small_sbm());
  REQUIRE(partition_graph(*src, options_for(dir / "metis", 4), &metis).is_ok());
  PartitionOptions o = options_for(dir / "random", 4);
  o.part_method = "random";
  src = make_sbm_source(small_sbm());
  REQUIRE(partition_graph(*src, o, &random).is_ok());
  require_verified(dir / "random" / "g.json");
  CHECK(random.node_balance <= 1.01);
  CHECK(metis.edge_cut * 2 < random.edge_cut);
}

TEST_CASE("trainers per machine, two-hop halos and balance constraints") {
  TempDir dir;
  PartitionOptions o = options_for(dir / "out", 2);
  o.num_trainers_per_machine = 2;
  o.num_hops = 2;
  o.balance_train = true;
  o.balance_edges = true;
  auto src = make_sbm_source(small_sbm());
  PartitionStats stats;
  REQUIRE(partition_graph(*src, o, &stats).is_ok());
  const fs::path json = dir / "out" / "g.json";
  require_verified(json);
  PartitionConfig c;
  auto ps = open_all(json, &c);
  CHECK(c.num_trainers_per_machine == 2);
  CHECK(c.halo_hops == 2);
  for (const auto& p : ps) {
    // Trainer ids are this machine's two pieces, each a contiguous run of nodes.
    auto t = p->trainer_ids();
    REQUIRE(!t.empty());
    CHECK(std::is_sorted(t.begin(), t.end()));
    CHECK(t.front() == 2 * p->part_id());
    CHECK(t.back() == 2 * p->part_id() + 1);
  }
  CHECK(stats.train_balance <= 1.05);
  CHECK(stats.edge_balance <= 1.05);
}

TEST_CASE("Cora (OGB raw layout) round trip") {
  const fs::path cora = fs::path(DGLD_SOURCE_ROOT) / ".." / "shared" / "datasets" / "cora";
  if (!fs::exists(cora / "raw")) {
    WARN("skipping: " << cora.string() << " is absent");
    return;
  }
  FileInputOptions in;
  in.spec = "ogb:" + cora.string();
  auto reference_source = make_file_source(in);
  REQUIRE(reference_source.is_ok());
  const GraphData g = load_all(**reference_source);
  CHECK(g.num_nodes == 2708);
  CHECK(g.num_edges() == 2 * 5278);
  CHECK(g.feat_dim == 1433);
  CHECK(g.symmetric_simple);
  for (int parts : {2, 4}) {
    DYNAMIC_SECTION("parts=" << parts) {
      TempDir dir;
      auto src = make_file_source(in);
      REQUIRE(src.is_ok());
      PartitionStats stats;
      Status st = partition_graph(**src, options_for(dir / "out", parts), &stats);
      INFO(st.to_string());
      REQUIRE(st.is_ok());
      require_verified(dir / "out" / "g.json");
      PartitionConfig c;
      auto ps = open_all(dir / "out" / "g.json", &c);
      check_node_data(ps, g);
      int64_t train = 0;
      for (const auto& s : stats.parts) train += s.train_nodes;
      CHECK(train == 140);
      // OGB edge ids: i is line i of edge.csv, i + 5278 its reverse.
      for (const auto& p : ps) {
        for (int64_t oe : p->orig_edge_ids()) CHECK((oe >= 0 && oe < 2 * 5278));
      }
    }
  }
}

// An edge-list input in a scratch directory.
struct EdgeFiles {
  TempDir dir;
  FileInputOptions in;
  EdgeFiles() {
    std::string edges, feats, labels;
    const int n = 40;
    for (int v = 0; v < n; ++v) {
      edges += std::to_string(v) + "," + std::to_string((v + 1) % n) + "\n";
      edges += std::to_string((v * 7) % n) + "," + std::to_string(v) + "\n";
      feats += std::to_string(v) + ".5," + std::to_string(-v) + ",1e-3\n";
      labels += std::to_string(v % 3) + "\n";
    }
    write_text(dir / "edges.csv", edges);
    write_text(dir / "feats.csv", feats);
    write_text(dir / "labels.csv", labels);
    write_text(dir / "train.csv", "0\n5\n9\n");
    in.spec = "edges:" + (dir / "edges.csv").string();
    in.node_feats = (dir / "feats.csv").string();
    in.labels = (dir / "labels.csv").string();
    in.train_ids = (dir / "train.csv").string();
  }
  // Partitions and returns the status; checks nothing is left behind on failure.
  Status run(int parts = 2) {
    auto src = make_file_source(in);
    if (!src.is_ok()) return src.status();
    PartitionStats stats;
    PartitionOptions o = options_for(dir / "out", parts);
    Status st = partition_graph(**src, o, &stats);
    if (!st.is_ok()) CHECK(testing::no_entry_named(dir.path(), "out"));
    return st;
  }
};

TEST_CASE("edge list input round trip") {
  EdgeFiles f;
  REQUIRE(f.run(3).is_ok());
  require_verified(f.dir / "out" / "g.json");
  auto src = make_file_source(f.in);
  REQUIRE(src.is_ok());
  const GraphData g = load_all(**src);
  CHECK(g.num_nodes == 40);
  CHECK(g.num_edges() == 80);
  CHECK(g.features[3 * 3] == 3.5f);
  PartitionConfig c;
  check_node_data(open_all(f.dir / "out" / "g.json", &c), g);
}

TEST_CASE("bad input is reported with file and line, and leaves no output") {
  EdgeFiles f;
  const std::string edges = (f.dir / "edges.csv").string();
  auto expect_error = [&](const std::string& needle) {
    Status st = f.run();
    INFO(st.to_string());
    CHECK_FALSE(st.is_ok());
    CHECK_THAT(st.message(), Catch::Contains(needle));
  };
  SECTION("unreadable file") {
    f.in.spec = "edges:" + (f.dir / "missing.csv").string();
    expect_error("missing.csv");
  }
  // One bad file each: which file, its content, the expected message.
  struct Case {
    const char* name;
    std::string file, content, message;
  };
  std::string feats;
  for (int v = 0; v < 40; ++v) feats += v == 17 ? "1,2\n" : "1,2,3\n";
  const Case cases[] = {
      {"wrong column count", "edges.csv", "0,1\n1,2,3\n", edges + ":2: expected 2 values, got 3"},
      {"too few columns", "edges.csv", "0,1\n1\n", edges + ":2: expected 2 values, got 1"},
      {"non-numeric value", "edges.csv", "0,1\n1,2\n3,x\n", edges + ":3: column 2: 'x' is not a valid integer"},
      {"negative node id", "edges.csv", "0,1\n-3,2\n", edges + ":2: node id -3 is out of range"},
      {"empty graph", "edges.csv", "", "no edges (empty graph)"},
      {"label missing for some nodes", "labels.csv", "0\n1\n2\n",
       "labels.csv: has 3 labels, but " + edges + " uses node id 39 (label missing for node 3)"},
      {"non-numeric label", "labels.csv", "0\nnan\n", "labels.csv:2: column 1: 'nan' is not a valid integer"},
      {"malformed feature row (found after METIS)", "feats.csv", feats, "feats.csv:18: expected 3 values, got 2"},
      {"feature rows missing", "feats.csv", "1,2,3\n4,5,6\n", "feats.csv: has 2 feature rows, expected 40"},
      {"train id out of range", "train.csv", "0\n99\n", "train.csv:2: node id 99 is out of range [0, 40)"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      write_text(f.dir / c.file, c.content);
      expect_error(c.message);
    }
  }
  SECTION("node id out of range") {
    f.in.num_nodes = 40;
    write_text(edges, "0,1\n1,40\n");
    expect_error(edges + ":2: node id 40 is out of range [0, 40)");
  }
  SECTION("label missing with a known node count") {
    f.in.num_nodes = 40;
    write_text(f.dir / "labels.csv", "0\n1\n");
    expect_error("labels.csv: has 2 labels, expected 40 (label missing for node 2)");
  }
  SECTION("more partitions than nodes") {
    Status st = f.run(41);
    CHECK_THAT(st.message(), Catch::Contains("larger than the node count 40"));
  }
  SECTION("OGB directory without its files") {
    f.in = {};
    f.in.spec = "ogb:" + f.dir.path().string();
    expect_error("num-node-list.csv[.gz]");
  }
}

TEST_CASE("generator specs are checked") {
  CHECK(parse_generator_spec("sbm:nodes=100,avg_degree=5").is_ok());
  CHECK_THAT(parse_generator_spec("sbm:nodes=100,degree=5").status().message(), Catch::Contains("unknown key 'degree'"));
  CHECK_THAT(parse_generator_spec("sbm:nodes=abc").status().message(), Catch::Contains("bad value 'abc' for key 'nodes' (expected an integer)"));
  CHECK_THAT(parse_generator_spec("er:nodes=10").status().message(), Catch::Contains("unknown generator"));
  CHECK_FALSE(parse_generator_spec("sbm:nodes=100,train=0.9,test=0.5").is_ok());
}

TEST_CASE("--verify names the first violation") {
  TempDir dir;
  auto src = make_sbm_source(small_sbm());
  PartitionStats stats;
  REQUIRE(partition_graph(*src, options_for(dir / "out", 2), &stats).is_ok());
  const fs::path json = dir / "out" / "g.json";
  const fs::path graph1 = dir / "out" / "part1" / "graph.dgld";
  VerifyReport r;
  SECTION("wrong owner of a halo node") {
    rewrite_array<int32_t>(graph1, ArrayFileKind::partition_graph, part_arrays::kNodeOwner,
                           [](int32_t* v, size_t n) { v[n - 1] = 1; });
    CHECK_THAT(verify_partitions(json, &r).message(), Catch::Contains("partition 1: local node"));
  }
  SECTION("a halo edge that disagrees with its owner") {
    rewrite_array<int64_t>(graph1, ArrayFileKind::partition_graph, part_arrays::kInEids,
                           [](int64_t* v, size_t n) { std::swap(v[n - 1], v[n - 2]); });
    CHECK_THAT(verify_partitions(json, &r).message(), Catch::Contains("halo edge"));
  }
  SECTION("a missing out-edge") {
    rewrite_array<int64_t>(graph1, ArrayFileKind::partition_graph, part_arrays::kOutEids,
                           [](int64_t* v, size_t) { v[0] = v[1]; });
    CHECK_FALSE(verify_partitions(json, &r).is_ok());
  }
  SECTION("orig node ids that are not a permutation") {
    rewrite_array<int64_t>(graph1, ArrayFileKind::partition_graph, part_arrays::kNodeOrigId,
                           [](int64_t* v, size_t) { v[0] = v[1]; });
    CHECK_THAT(verify_partitions(json, &r).message(), Catch::Contains("not a permutation"));
  }
  SECTION("a corrupt byte fails a checksum, and the CLI exits non-zero") {
    const fs::path feats = dir / "out" / "part0" / "node_feat.dgld";
    {
      std::fstream f(feats, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(fs::file_size(feats) / 2));
      f.put('\x7f');
    }
    CHECK_THAT(verify_partitions(json, &r).message(), Catch::Contains("checksum mismatch"));
    const std::string js = json.string();
    const char* argv[] = {"dgl-partition", "--verify", js.c_str()};
    CHECK(run_partition_tool(3, argv) == 1);
  }
  SECTION("a non-zero padding byte") {
    {
      std::fstream f(graph1, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-1, std::ios::end);  // the meta array is first, so the file ends in padding or data
      f.put('\x7f');
    }
    CHECK_FALSE(verify_partitions(json, &r).is_ok());
  }
  SECTION("a missing file") {
    fs::remove(graph1);
    CHECK_THAT(verify_partitions(json, &r).message(), Catch::Contains("graph.dgld"));
  }
}

TEST_CASE("command line: partition, verify, refuse to clobber, overwrite") {
  TempDir dir;
  const std::string out = (dir / "out").string(), stats = (dir / "stats.json").string();
  const std::string json = out + "/cli.json";
  std::vector<const char*> argv = {"dgl-partition", "--generate", "sbm:nodes=500,avg_degree=6,feat_dim=4",
                                   "--num_parts", "2", "--graph-name", "cli", "--output", out.c_str(),
                                   "--stats-json", stats.c_str(), "--log-level", "warn"};
  REQUIRE(run_partition_tool(static_cast<int>(argv.size()), argv.data()) == 0);
  CHECK(fs::exists(stats));
  const char* verify[] = {"dgl-partition", "--verify", json.c_str()};
  CHECK(run_partition_tool(3, verify) == 0);
  // The output exists now: refused without --overwrite, replaced with it.
  CHECK(run_partition_tool(static_cast<int>(argv.size()), argv.data()) == 1);
  argv.push_back("--overwrite");
  CHECK(run_partition_tool(static_cast<int>(argv.size()), argv.data()) == 0);
  CHECK(run_partition_tool(3, verify) == 0);
  CHECK(testing::no_entry_named(dir.path(), ".out"));
  const char* bad[] = {"dgl-partition", "--generate", "sbm:nodes=10", "--num-parts", "0", "--output", "x"};
  CHECK(run_partition_tool(7, bad) == 1);
  const char* help[] = {"dgl-partition", "--help"};
  CHECK(run_partition_tool(2, help) == 0);
}

}  // namespace
}  // namespace dgld
