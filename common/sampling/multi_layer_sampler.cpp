#include "common/sampling/multi_layer_sampler.h"

#include <string>
#include <utility>

#include "common/random.h"

namespace dgld {

LocalGraphSource::LocalGraphSource(const AdjacencyView& adj, Options options)
    : adj_(adj), options_(options) {}

LocalGraphSource::LocalGraphSource(const AdjacencyView& adj,
                                   std::span<const int64_t> local_to_global,
                                   GlobalToLocal global_to_local, Options options)
    : adj_(adj),
      local_to_global_(local_to_global),
      global_to_local_(std::move(global_to_local)),
      options_(options) {}

Result<SampledEdges> LocalGraphSource::sample(std::span<const int64_t> seeds_global,
                                              const SampleOptions& opt) {
  SampleExtras extras{.weights = options_.weights, .etypes = options_.etypes, .stream_keys = {}, .pool = options_.pool};
  if (!global_to_local_) return sample_neighbors(adj_, seeds_global, opt, extras);

  std::vector<int64_t> rows(seeds_global.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i] = global_to_local_(seeds_global[i]);
    if (rows[i] < 0 || rows[i] >= adj_.num_rows()) {
      return invalid_argument("seed " + std::to_string(seeds_global[i]) +
                              " is not a node of this partition");
    }
  }
  extras.stream_keys = seeds_global;
  DGLD_ASSIGN_OR_RETURN(SampledEdges edges, sample_neighbors(adj_, rows, opt, extras));
  DGLD_RETURN_IF_ERROR(map_to_global(edges.src, local_to_global_));
  DGLD_RETURN_IF_ERROR(map_to_global(edges.dst, local_to_global_));
  return edges;
}

MultiLayerNeighborSampler::MultiLayerNeighborSampler(SamplingSpec spec) : spec_(std::move(spec)) {}

MultiLayerNeighborSampler::MultiLayerNeighborSampler(std::vector<int64_t> fanouts, bool replace) {
  spec_.fanouts = std::move(fanouts);
  spec_.replace = replace;
}

Result<MiniBatch> MultiLayerNeighborSampler::sample(NeighborSource& source,
                                                    std::span<const int64_t> seeds,
                                                    uint64_t rng_seed, const EdgePairSet* exclude) const {
  DGLD_RETURN_IF_ERROR(spec_.validate());
  const auto num_layers = static_cast<int64_t>(spec_.num_layers());
  MiniBatch batch;
  batch.seeds.assign(seeds.begin(), seeds.end());
  batch.blocks.resize(num_layers);
  std::span<const int64_t> layer_seeds = batch.seeds;
  for (int64_t layer = num_layers - 1; layer >= 0; --layer) {
    const std::string where = "layer " + std::to_string(layer);
    const SampleOptions opt{.fanout = spec_.fanouts[layer],
                            .replace = spec_.replace,
                            .rng_seed = derive_seed(rng_seed, static_cast<uint64_t>(layer)),
                            .etype_fanouts = spec_.etype_fanouts.empty() ? std::vector<int64_t>{}
                                                                         : spec_.etype_fanouts[layer]};
    Result<SampledEdges> edges = source.sample(layer_seeds, opt);
    if (!edges.is_ok()) return edges.status().with_context(where);
    if (exclude && !exclude->empty()) {
      SampledEdges& e = *edges;
      size_t kept = 0;
      for (size_t i = 0; i < e.size(); ++i) {
        if (exclude->contains(e.src[i], e.dst[i])) continue;
        e.src[kept] = e.src[i];
        e.dst[kept] = e.dst[i];
        e.eid[kept] = e.eid[i];
        if (!e.etype.empty()) e.etype[kept] = e.etype[i];
        ++kept;
      }
      if (!e.etype.empty()) e.etype.resize(kept);
      e.src.resize(kept);
      e.dst.resize(kept);
      e.eid.resize(kept);
    }
    Result<Block> block = build_block(layer_seeds, std::move(*edges), source.node_id_range());
    if (!block.is_ok()) return block.status().with_context(where);
    batch.blocks[layer] = std::move(block).value();
    layer_seeds = batch.blocks[layer].src_nodes;
  }
  batch.input_nodes = batch.blocks[0].src_nodes;
  return batch;
}

}  // namespace dgld
