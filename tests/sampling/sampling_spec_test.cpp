// SamplingSpec: its rules, its wire table, and the fanout text the CLI reads.
#include "common/sampling/sampling_spec.h"

#include <catch2/catch.hpp>

#include <flatbuffers/flatbuffers.h>

#include "schemas/sampling_generated.h"

using namespace dgld;
using Catch::Matchers::Contains;

namespace {

// Encodes `spec` and decodes it again, as a server or worker reads it.
Result<SamplingSpec> round_trip(const SamplingSpec& spec) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(write_sampling_spec(fbb, spec));
  return read_sampling_spec(flatbuffers::GetRoot<fbs::SamplingSpec>(fbb.GetBufferPointer()), "SampleBatch from test");
}

}  // namespace

TEST_CASE("sampling spec: every field survives the wire table") {
  SamplingSpec plain{.fanouts = {5, -1, 0}};
  auto p = round_trip(plain);
  REQUIRE(p.is_ok());
  CHECK(*p == plain);

  SamplingSpec typed{.fanouts = {2, 3},
                     .etype_fanouts = {{1, 0, -1}, {4, 5, 6}},
                     .replace = true,
                     .prob = "w",
                     .exclude = SamplingSpec::Exclude::seed_edges};
  auto t = round_trip(typed);
  REQUIRE(t.is_ok());
  CHECK(*t == typed);
  CHECK(t->to_string() == "fanouts=2,3 etype_fanouts=1,0,-1/4,5,6 edge_dir=in replace=1 prob=w exclude=seed_edges");

  SamplingSpec out{.fanouts = {7}, .out_edges = true};
  auto o = round_trip(out);
  REQUIRE(o.is_ok());
  CHECK(o->out_edges);
  CHECK(o->to_string() != plain.to_string());  // the worker keys its builders by it
}

TEST_CASE("sampling spec: bad specs are refused, on the wire too, naming the field") {
  auto message = [](const SamplingSpec& s) { return s.validate().message(); };
  CHECK_THAT(message(SamplingSpec{.fanouts = {}}), Contains("no fanouts"));
  CHECK_THAT(message(SamplingSpec{.fanouts = {3, -2}}), Contains("fanouts: fanout -2 of layer 1"));
  CHECK_THAT(message(SamplingSpec{.fanouts = {3, 3}, .etype_fanouts = {{1, 2}}}),
             Contains("per-edge-type fanouts for 1 layers, but 2 layers"));
  CHECK_THAT(message(SamplingSpec{.fanouts = {3, 3}, .etype_fanouts = {{1, 2}, {1}}}),
             Contains("layer 1 has 1 per-edge-type fanouts, layer 0 has 2"));
  CHECK_THAT(message(SamplingSpec{.fanouts = {3}, .etype_fanouts = {{1, -5}}}),
             Contains("per-edge-type fanout -5 of layer 0"));
  CHECK_THAT(message(SamplingSpec{.fanouts = {3}, .out_edges = true, .prob = "w"}), Contains("prob ('w') with out-edges"));
  CHECK(SamplingSpec{.fanouts = {3}, .prob = "w"}.validate().is_ok());

  auto wire = round_trip(SamplingSpec{.fanouts = {3, -7}});
  REQUIRE_FALSE(wire.is_ok());
  CHECK(wire.status().code() == StatusCode::invalid_argument);
  CHECK_THAT(wire.status().message(), Contains("SampleBatch from test"));
  // An exclude value this build does not know (a newer peer) is refused.
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateSamplingSpec(fbb, fbb.CreateVector(std::vector<int64_t>{3}), 0, false, false, 0, 7));
  auto unknown = read_sampling_spec(flatbuffers::GetRoot<fbs::SamplingSpec>(fbb.GetBufferPointer()), "SampleBatch");
  REQUIRE_FALSE(unknown.is_ok());
  CHECK_THAT(unknown.status().message(), Contains("exclude 7 is not a known value"));
  auto missing = read_sampling_spec(nullptr, "SampleNeighbors from client 3");
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(), Contains("SampleNeighbors from client 3: the request has no sampling spec"));
}

TEST_CASE("sampling spec: layer(i) is one layer's request") {
  SamplingSpec s{.fanouts = {2, 3}, .etype_fanouts = {{1, 0}, {4, 5}}, .replace = true, .prob = "w"};
  const SamplingSpec l1 = s.layer(1);
  CHECK(l1.fanouts == std::vector<int64_t>{3});
  CHECK(l1.etype_fanouts == std::vector<std::vector<int64_t>>{{4, 5}});
  CHECK(l1.replace);
  CHECK(l1.prob == "w");
  CHECK(s.layer(0).exclude == s.exclude);
  CHECK(l1.validate().is_ok());
}

TEST_CASE("sampling spec: DGL's exclude= values") {
  CHECK(*parse_exclude("none") == SamplingSpec::Exclude::none);
  CHECK(*parse_exclude("") == SamplingSpec::Exclude::none);
  CHECK(*parse_exclude("self") == SamplingSpec::Exclude::seed_edges);
  CHECK(*parse_exclude("reverse_id") == SamplingSpec::Exclude::seed_edges);
  auto bad = parse_exclude("reverse_types");
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Contains("--exclude 'reverse_types': expected none, self or reverse_id"));
}

TEST_CASE("sampling spec: fanout text as trainer-host and DGL's scripts write it") {
  CHECK(*parse_fanouts("10,25") == std::vector<int64_t>{10, 25});
  CHECK(*parse_fanouts("[10, 25]") == std::vector<int64_t>{10, 25});
  CHECK(*parse_fanouts(" -1 ") == std::vector<int64_t>{-1});
  for (const char* bad : {"", "10,", "10,x", "10,-2", "1e3", "99999999999999999999"}) {
    INFO(bad);
    auto r = parse_fanouts(bad, "--fan-out");
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Contains("--fan-out '"));
    CHECK_THAT(r.status().message(), Contains("is not a fanout"));
  }
}
