// dgld._C's test hooks: what the tests compare the library's answers
// against (a partition's own tensor rows, held-out edges, blocks sampled
// without the loader).
#include <functional>
#include <map>
#include <numeric>

#include "common/partition/partition.h"
#include "common/sampling/multi_layer_sampler.h"
#include "python/src/client.h"

namespace dgld::python {
namespace {

// The rows of node tensor `name` (e.g. "_N/features") in partition
// `part_id`'s files, with the global ids of its owned nodes: what the tests
// check pulls against.
py::tuple partition_node_tensor(const std::string& part_config, int part_id, const std::string& name) {
  auto pc = unwrap(load_part_config(part_config));
  auto part = unwrap(open_partition(pc, part_id, /*verify_checksums=*/true));
  const TensorView* t = part->node_tensor(name);
  if (!t) throw StatusError(not_found("partition " + std::to_string(part_id) + " has no node tensor '" + name + "'"));
  auto rows = copy_of(*t);
  // The homogeneous ids of the rows: every inner node, or on a heterogeneous
  // graph the partition's nodes of the tensor's type.
  const IdRange r = node_tensor_range(pc, part_id, name);
  std::vector<int64_t> ids(static_cast<size_t>(r.size()));
  std::iota(ids.begin(), ids.end(), r.start);
  return py::make_tuple(tensor_of(std::move(ids)), rows);
}

// Every partition's held-out (validation and test) edges of a link split,
// as (src, dst) pairs in partitioned ids: what the tests check negatives
// against.
std::vector<std::pair<int64_t, int64_t>> link_split_pairs(const std::string& part_config) {
  return unwrap(held_out_pairs(unwrap(load_part_config(part_config))));
}

// The blocks C++'s multi-layer sampler makes for `seeds` with `rng_seed`
// over the job's servers, without the data loader.
py::list sample_blocks(std::shared_ptr<Client> c, const torch::Tensor& seeds_in, std::vector<int64_t> fanouts,
                       uint64_t rng_seed) {
  const auto seeds = as_ids(seeds_in, "sample_blocks");
  client::DistNeighborSource source(c->cluster());
  MultiLayerNeighborSampler sampler(std::move(fanouts));
  MiniBatch mb;
  {
    py::gil_scoped_release release;
    mb = unwrap(sampler.sample(source, span_of(seeds), rng_seed));
  }
  py::list out;
  for (const Block& b : mb.blocks) out.append(to_python(unwrap(ops::block_graph_from(b, true))));
  return out;
}

}  // namespace

void bind_test_hooks(py::module_& m) {
  m.def("_partition_node_tensor", &partition_node_tensor);
  m.def("_sample_blocks", &sample_blocks);
  m.def("_link_split_pairs", &link_split_pairs);
}

}  // namespace dgld::python
