#include "common/part_config.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace dgld;
using nlohmann::json;

namespace {
json valid_config() {
  return json::parse(R"({
    "graph_name": "g", "num_nodes": 10, "num_edges": 30, "part_method": "metis",
    "num_parts": 2, "halo_hops": 1,
    "node_map": {"_N": [[0, 6], [6, 10]]},
    "edge_map": {"_N:_E:_N": [[0, 17], [17, 30]]},
    "ntypes": {"_N": 0}, "etypes": {"_N:_E:_N": 0},
    "part-0": {"node_feats": "part0/node_feat.dgld", "edge_feats": "part0/edge_feat.dgld", "part_graph": "part0/graph.dgld"},
    "part-1": {"node_feats": "part1/node_feat.dgld", "edge_feats": "part1/edge_feat.dgld", "part_graph": "part1/graph.dgld"}
  })");
}
Result<PartitionConfig> parse(const json& j) { return parse_part_config(j.dump(), "g.json", "/data"); }
}  // namespace

TEST_CASE("part_config: DGL's layout parses") {
  auto r = parse(valid_config());
  REQUIRE(r.is_ok());
  CHECK(r->graph_name == "g");
  CHECK(r->num_parts == 2);
  CHECK(r->node_map[1] == IdRange{6, 10});
  CHECK(r->edge_map[0] == IdRange{0, 17});
  CHECK(r->etype == "_N:_E:_N");
  CHECK(r->resolve(r->parts[1].part_graph) == std::filesystem::path("/data/part1/graph.dgld"));
  CHECK(r->num_trainers_per_machine == 1);
}

TEST_CASE("part_config: round trip through JSON keeps every field") {
  auto r = parse(valid_config());
  REQUIRE(r.is_ok());
  PartitionConfig c = *r;
  c.num_trainers_per_machine = 2;
  auto back = parse_part_config(part_config_to_json(c), "g.json", "/data");
  REQUIRE(back.is_ok());
  CHECK(back->node_map == c.node_map);
  CHECK(back->edge_map == c.edge_map);
  CHECK(back->num_trainers_per_machine == 2);
  CHECK(back->parts[0].node_feats == c.parts[0].node_feats);
  auto j = json::parse(part_config_to_json(c));
  CHECK(j["node_map"]["_N"][1][0] == 6);
  CHECK(j["part-1"]["part_graph"] == "part1/graph.dgld");
}

TEST_CASE("part_config: every broken field is named") {
  struct Case {
    std::function<void(json&)> mutate;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("graph_name"); }, "missing field 'graph_name'"},
      {[](json& j) { j["num_nodes"] = "ten"; }, "field 'num_nodes': expected an integer"},
      {[](json& j) { j["num_parts"] = 0; }, "field 'num_parts' must be in 1..65536"},
      {[](json& j) { j["part_method"] = "spectral"; }, "field 'part_method' must be"},
      {[](json& j) { j["node_map"] = json::array(); }, "field 'node_map': expected an object"},
      {[](json& j) { j["node_map"]["_N"] = json::array({json::array({0, 10})}); },
       "expected an array of num_parts=2"},
      {[](json& j) { j["node_map"]["_N"][1] = json::array({7, 10}); }, "range starts at 7, expected 6"},
      {[](json& j) { j["node_map"]["_N"][1] = json::array({6, 11}); }, "ranges end at 11 but the total is 10"},
      {[](json& j) { j["node_map"]["_N"][0] = json::array({0, "6"}); }, "expected [start, end] integers"},
      {[](json& j) { j["node_map"]["_N"][0] = json::array({0, -1}); }, "end -1 is before start 0"},
      {[](json& j) { j["edge_map"]["_N:_E:_N"][1] = json::array({17, 29}); }, "field 'edge_map'"},
      // Two node_map entries are DGL's typed layout, which needs one per type of 'ntypes'.
      {[](json& j) { j["node_map"]["other"] = json::array(); }, "list per node type (1), got 2 entries"},
      {[](json& j) { j.erase("part-1"); }, "missing field 'part-1'"},
      {[](json& j) { j["part-0"].erase("part_graph"); }, "field 'part-0': missing field 'part_graph'"},
      {[](json& j) { j["part-0"]["node_feats"] = 3; }, "field 'node_feats': expected a string"},
      {[](json& j) { j["ntypes"] = {{"_N", 1}}; }, "field 'ntypes'"},
      {[](json& j) { j["dgld"] = {{"format_version", 9}}; }, "format_version 9 is not supported"},
      {[](json& j) { j["dgld"] = {{"format_version", 1}, {"num_trainers_per_machine", 0}}; },
       "num_trainers_per_machine"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    json j = valid_config();
    cases[i].mutate(j);
    INFO("case " << i << ": " << j.dump());
    auto r = parse(j);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::invalid_argument);
    CHECK_THAT(r.status().message(), Catch::Contains(cases[i].expect));
    CHECK_THAT(r.status().message(), Catch::StartsWith("g.json"));
  }
}

TEST_CASE("part_config: not JSON at all") {
  auto r = parse_part_config("{ \"graph_name\": ", "bad.json", "/");
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("bad.json: not valid JSON"));
  auto r2 = parse_part_config("[1,2]", "arr.json", "/");
  REQUIRE_FALSE(r2.is_ok());
  CHECK_THAT(r2.status().message(), Catch::Contains("expected a JSON object"));
}

namespace {
// A heterogeneous config in DGL's layout: node_map and edge_map per type.
json hetero_config() {
  return json::parse(R"({
    "graph_name": "g", "num_nodes": 10, "num_edges": 30, "part_method": "metis",
    "num_parts": 2, "halo_hops": 1,
    "node_map": {"a": [[0, 2], [6, 7]], "b": [[2, 6], [7, 10]]},
    "edge_map": {"a:r:b": [[0, 5], [17, 20]], "b:s:a": [[5, 17], [20, 30]]},
    "ntypes": {"a": 0, "b": 1}, "etypes": {"a:r:b": 0, "b:s:a": 1},
    "dgld": {"format_version": 1, "heterogeneous": true, "etype_counts": [8, 22]},
    "part-0": {"node_feats": "part0/node_feat.dgld", "edge_feats": "part0/edge_feat.dgld", "part_graph": "part0/graph.dgld"},
    "part-1": {"node_feats": "part1/node_feat.dgld", "edge_feats": "part1/edge_feat.dgld", "part_graph": "part1/graph.dgld"}
  })");
}
}  // namespace

TEST_CASE("part_config: a heterogeneous config has edge_map per canonical edge type") {
  auto r = parse(hetero_config());
  REQUIRE(r.is_ok());
  CHECK(r->edge_map == std::vector<IdRange>{{0, 17}, {17, 30}});
  CHECK(r->types.etype_map[1] == std::vector<IdRange>{{5, 17}, {20, 30}});
  CHECK(r->types.etype_count == std::vector<int64_t>{8, 22});
  CHECK(edge_tensor_type(*r, "b:s:a/features") == 1);
  CHECK(edge_tensor_type(*r, "_N:_E:_N/w") == -1);
  CHECK(edge_tensor_range(*r, 1, "a:r:b/x") == IdRange{17, 20});
  CHECK(edge_tensor_range(*r, 1, "w") == IdRange{17, 30});
  auto back = parse_part_config(part_config_to_json(*r), "g.json", "/data");
  REQUIRE(back.is_ok());
  CHECK(back->types.etype_map == r->types.etype_map);

  struct Case {
    std::function<void(json&)> mutate;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["edge_map"] = {{"_E", json::array({json::array({0, 17}), json::array({17, 30})})}}; },
       "field 'edge_map': has one '_E' range per partition, the layout of a dgl-partition older than this dgld"},
      {[](json& j) { j["edge_map"].erase("b:s:a"); }, "field 'edge_map': expected one [[start, end], ...] list per edge type (2)"},
      {[](json& j) { j["edge_map"]["b:s:a"][0] = json::array({6, 17}); },
       "field 'edge_map'[\"b:s:a\"][0]: range [6, 17) should start at 5"},
      {[](json& j) { j["edge_map"]["a:r:b"][1] = json::array({17}); }, "field 'edge_map'[\"a:r:b\"][1]: expected [start, end]"},
      {[](json& j) { j["dgld"]["etype_counts"] = json::array({9, 21}); }, "'etype_counts': do not match the sizes"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    json j = hetero_config();
    cases[i].mutate(j);
    INFO("case " << i << ": " << j.dump());
    auto bad = parse(j);
    REQUIRE_FALSE(bad.is_ok());
    CHECK_THAT(bad.status().message(), Catch::Contains(cases[i].expect));
    CHECK_THAT(bad.status().message(), Catch::StartsWith("g.json"));
  }
}

TEST_CASE("part_config: edge types resolve from DGL's three forms, with unknown and ambiguous names refused") {
  json j = hetero_config();
  // A third edge type that shares relation 'r' with a:r:b.
  j["etypes"] = {{"a:r:b", 0}, {"b:s:a", 1}, {"b:r:b", 2}};
  j["edge_map"] = {{"a:r:b", json::array({json::array({0, 5}), json::array({17, 20})})},
                   {"b:s:a", json::array({json::array({5, 12}), json::array({20, 25})})},
                   {"b:r:b", json::array({json::array({12, 17}), json::array({25, 30})})}};
  j["dgld"]["etype_counts"] = json::array({8, 12, 10});
  auto r = parse(j);
  REQUIRE(r.is_ok());
  const GraphTypeInfo& t = r->types;
  CHECK(*t.resolve_etype("b:s:a") == 1);  // canonical
  CHECK(*t.resolve_etype("s") == 1);      // a relation only one edge type has
  CHECK(*t.resolve_etype("b:r:b") == 2);
  auto ambiguous = t.resolve_etype("r");
  REQUIRE_FALSE(ambiguous.is_ok());
  CHECK(ambiguous.status().code() == StatusCode::invalid_argument);
  CHECK(ambiguous.status().message() ==
        "edge type 'r' is ambiguous: a:r:b, b:r:b have that relation; name one by its canonical (src, rel, dst)");
  auto unknown = t.resolve_etype("x");
  REQUIRE_FALSE(unknown.is_ok());
  CHECK(unknown.status().message() == "'x' is not an edge type of the graph (known: a:r:b, b:s:a, b:r:b)");
  auto wrong_canonical = t.resolve_etype("a:s:b");  // both node types exist, that triple does not
  REQUIRE_FALSE(wrong_canonical.is_ok());
  CHECK_THAT(wrong_canonical.status().message(), Catch::StartsWith("'a:s:b' is not an edge type"));

  CHECK(*t.resolve_ntype("b") == 1);
  auto no_type = t.resolve_ntype("journal");
  REQUIRE_FALSE(no_type.is_ok());
  CHECK(no_type.status().message() == "'journal' is not a node type of the graph (known: a, b)");
  // A homogeneous config has no types at all: every name is unknown.
  auto homo = parse(valid_config());
  REQUIRE(homo.is_ok());
  CHECK_THAT(homo->types.resolve_etype("_E").status().message(), Catch::Contains("(known: none)"));
}
