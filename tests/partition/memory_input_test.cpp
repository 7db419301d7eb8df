// The partitioner over an in-memory graph (memory_input.h, what
// dgld.distributed.partition_graph runs): named node and edge tensors reach
// every partition's files by original id, balance types make METIS
// constraints, bad tensors and options are refused with nothing left behind.
#include <catch2/catch.hpp>

#include <functional>
#include <random>

#include "partition/memory_input.h"
#include "partition/partitioner.h"
#include "tests/partition/test_util.h"

namespace dgld {
namespace {
namespace fs = std::filesystem;
using testing::open_all;
using testing::require_verified;
using testing::TempDir;

// A directed random graph of 200 nodes and 1000 edges with a node tensor
// "year" (int32 [n, 2]) and an edge tensor "w" (float64 [m]).
struct Input {
  int64_t n = 200;
  std::vector<int64_t> src, dst;
  std::vector<int32_t> year;
  std::vector<double> w;
  std::vector<int32_t> types;

  Input() {
    std::mt19937_64 rng(5);
    for (int i = 0; i < 1000; ++i) {
      src.push_back(static_cast<int64_t>(rng() % n));
      dst.push_back(static_cast<int64_t>(rng() % n));
      w.push_back(static_cast<double>(i) / 7);
    }
    for (int64_t v = 0; v < n; ++v) {
      year.push_back(static_cast<int32_t>(2000 + v));
      year.push_back(static_cast<int32_t>(-v));
      types.push_back(static_cast<int32_t>(v % 3));
    }
  }

  MemoryGraph graph() const {
    MemoryGraph m;
    m.num_nodes = n;
    m.src = src;
    m.dst = dst;
    m.node_tensors.push_back({"year", DType::int32, {n, 2}, reinterpret_cast<const std::byte*>(year.data())});
    m.edge_tensors.push_back(
        {"w", DType::float64, {static_cast<int64_t>(w.size())}, reinterpret_cast<const std::byte*>(w.data())});
    return m;
  }
};

PartitionOptions options_for(const fs::path& out) {
  PartitionOptions o;
  o.num_parts = 2;
  o.output = out;  // graph_name: the default, "graph"
  return o;
}

TEST_CASE("named node and edge tensors reach each partition by original id") {
  TempDir tmp;
  const Input in;
  auto source = make_memory_source(in.graph());
  PartitionStats stats;
  REQUIRE(partition_graph(*source, options_for(tmp / "out"), &stats).is_ok());
  require_verified(tmp / "out" / "graph.json");
  PartitionConfig c;
  auto parts = open_all(tmp / "out" / "graph.json", &c);
  int64_t edges = 0;
  for (const auto& p : parts) {
    const TensorView* year = p->node_tensor("_N/year");
    REQUIRE(year != nullptr);
    REQUIRE(year->shape == std::vector<int64_t>{p->num_inner_nodes(), 2});
    for (int64_t i = 0; i < p->num_inner_nodes(); ++i) {
      const int64_t o = p->orig_node_ids()[i];
      REQUIRE(year->as<int32_t>()[2 * i] == in.year[2 * o]);
      REQUIRE(year->as<int32_t>()[2 * i + 1] == in.year[2 * o + 1]);
    }
    const TensorView* w = p->edge_tensor("_N:_E:_N/w");
    REQUIRE(w != nullptr);
    REQUIRE(w->num_rows() == p->num_inner_edges());
    for (int64_t j = 0; j < p->num_inner_edges(); ++j) REQUIRE(w->as<double>()[j] == in.w[p->orig_edge_ids()[j]]);
    edges += p->num_inner_edges();
  }
  REQUIRE(edges == 1000);
}

TEST_CASE("balance types are METIS constraints: each type is split evenly") {
  TempDir tmp;
  const Input in;
  MemoryGraph m = in.graph();
  m.balance_type = in.types;
  m.num_balance_types = 3;
  auto source = make_memory_source(std::move(m));
  PartitionStats stats;
  REQUIRE(partition_graph(*source, options_for(tmp / "out"), &stats).is_ok());
  PartitionConfig c;
  auto parts = open_all(tmp / "out" / "graph.json", &c);
  for (int32_t t = 0; t < 3; ++t) {
    std::vector<int64_t> count;
    for (const auto& p : parts) {
      count.push_back(0);
      for (int64_t o : p->orig_node_ids()) count.back() += in.types[o] == t;
    }
    const double mean = static_cast<double>(count[0] + count[1]) / 2;
    REQUIRE(static_cast<double>(std::max(count[0], count[1])) <= 1.1 * mean);
  }
}

TEST_CASE("bad named tensors and balance types are refused; nothing is written") {
  TempDir tmp;
  const Input in;
  const std::vector<uint8_t> mask(static_cast<size_t>(in.n), 1);
  struct Case {
    const char* what;
    std::function<void(MemoryGraph&, PartitionOptions&)> change;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"rows", [&](MemoryGraph& m, PartitionOptions&) { m.node_tensors[0].shape[0] = in.n - 1; },
       "node data 'year' has 199 rows, expected 200 (one per node)"},
      {"reserved", [](MemoryGraph& m, PartitionOptions&) { m.node_tensors[0].name = "trainer_id"; },
       "the name is the partitioner's own (_N/trainer_id)"},
      {"twice", [](MemoryGraph& m, PartitionOptions&) { m.edge_tensors.push_back(m.edge_tensors[0]); },
       "edge data 'w' is given twice"},
      {"dtype", [](MemoryGraph& m, PartitionOptions&) { m.node_tensors[0].dtype = DType::int8; },
       "has dtype int8"},
      {"long name", [](MemoryGraph& m, PartitionOptions&) { m.node_tensors[0].name = std::string(61, 'x'); },
       "the name is too long"},
      {"balance range", [&](MemoryGraph& m, PartitionOptions&) {
         m.balance_type = in.types;
         m.num_balance_types = 2;
       }, "node 2 has balance type 2, outside [0, 2)"},
      {"balance and train", [&](MemoryGraph& m, PartitionOptions& o) {
         m.balance_type = in.types;
         m.num_balance_types = 3;
         m.train_mask = mask;
         o.balance_train = true;
       }, "balance types and --balance-train exclude each other"},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      MemoryGraph m = in.graph();
      PartitionOptions o = options_for(tmp / "out");
      c.change(m, o);
      auto source = make_memory_source(std::move(m));
      PartitionStats stats;
      const Status st = partition_graph(*source, o, &stats);
      REQUIRE(st.code() == StatusCode::invalid_argument);
      REQUIRE_THAT(st.message(), Catch::Contains(c.message));
      REQUIRE(testing::no_entry_named(tmp.path(), "out"));
      REQUIRE(testing::no_entry_named(tmp.path(), ".out"));
    }
  }
}

TEST_CASE("an output path that is a file is refused and kept") {
  TempDir tmp;
  testing::write_text(tmp / "out", "keep");
  const Input in;
  auto source = make_memory_source(in.graph());
  PartitionOptions o = options_for(tmp / "out");
  o.overwrite = true;
  PartitionStats stats;
  const Status st = partition_graph(*source, o, &stats);
  REQUIRE(st.code() == StatusCode::invalid_argument);
  REQUIRE_THAT(st.message(), Catch::Contains("exists and is not a directory"));
  REQUIRE(fs::is_regular_file(tmp / "out"));
}

}  // namespace
}  // namespace dgld
