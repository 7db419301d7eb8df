#pragma once
// SamplingSpec: what to sample around a batch of seeds, DGL's
// NeighborSampler(fanouts, edge_dir, prob, replace) with DGL's fanout dicts
// for heterogeneous graphs, and the edges a link-prediction batch's blocks
// leave out (DGL's exclude=). One value travels unchanged from where a user
// states it (trainer-host's flags, the Python NeighborSampler) through the
// sampler protocol (SampleBatch) to a graph-server (SampleNeighbors, one
// layer), as the FlatBuffers table of schemas/sampling.fbs. validate() is
// the only place its rules live; every reader of the wire table calls it.
//
// Adding a sampling option: a field here, its rule in validate(), the
// schema field and the two codec lines in sampling_spec.cpp, then its use
// where neighbours are drawn (dist_graph.cpp for the distributed source).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace flatbuffers {
class FlatBufferBuilder;
template <typename T>
struct Offset;
}  // namespace flatbuffers

namespace dgld {
namespace fbs {
struct SamplingSpec;
}

struct SamplingSpec {
  std::vector<int64_t> fanouts{10, 25};  // per layer, input layer first; -1 all, 0 none
  // Heterogeneous graphs: etype_fanouts[layer][etype] (DGL's fanout dicts,
  // in the graph's edge type order); `fanouts` then only counts the layers.
  // Empty: `fanouts` over all edges.
  std::vector<std::vector<int64_t>> etype_fanouts;
  bool out_edges = false;  // DGL's edge_dir='out' (the seeds' out-neighbours)
  bool replace = false;
  std::string prob;  // float32 edge tensor of weights (DGL's prob=); empty: uniform
  // Edge prediction (DGL's exclude=): none keeps the blocks as sampled;
  // seed_edges removes a batch's own edges from its blocks, by endpoints and
  // in both directions (DGL's 'self' and, on a graph stored with its reverse
  // edges, 'reverse_id').
  enum class Exclude : uint8_t { none = 0, seed_edges = 1 };
  Exclude exclude = Exclude::none;

  size_t num_layers() const { return fanouts.size(); }
  // The spec of layer i alone (what one SampleNeighbors asks a server for).
  SamplingSpec layer(size_t i) const;
  // invalid_argument naming the field: no layers, a fanout < -1, per-type
  // fanouts for another number of layers or of unequal widths, per-type
  // fanouts or prob with out-edges (not supported).
  Status validate() const;
  // "fanouts=10,25 replace=0 ..." for logs and as a map key.
  std::string to_string() const;
  bool operator==(const SamplingSpec&) const = default;
};

// "10,25" (or DGL's "[10, 25]") -> {10, 25}; invalid_argument naming `flag`
// and the item that is not an integer >= -1.
Result<std::vector<int64_t>> parse_fanouts(std::string_view text, std::string_view flag = "--fan-out");

// DGL's exclude= values: "none" (and "") -> none; "self", "reverse_id" ->
// seed_edges; invalid_argument naming `flag` otherwise.
Result<SamplingSpec::Exclude> parse_exclude(std::string_view text, std::string_view flag = "--exclude");

// The wire table (schemas/sampling.fbs). read_sampling_spec validates and
// names `where` (the message and its sender) in its errors; a missing table
// is an error too.
flatbuffers::Offset<fbs::SamplingSpec> write_sampling_spec(flatbuffers::FlatBufferBuilder& fbb,
                                                           const SamplingSpec& spec);
Result<SamplingSpec> read_sampling_spec(const fbs::SamplingSpec* table, std::string_view where);

}  // namespace dgld
