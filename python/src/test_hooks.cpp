// dgld._test_hooks: what the Python tests compare the library's answers
// against (a partition's own tensor rows, the held-out edges of a link
// split). Built into the build tree's package beside _C, never installed.
//
// A module of its own, so _C carries no test code. It links common/ and
// common/partition only: a second copy of common/ops would register the
// "dgld" TORCH_LIBRARY (common/ops/torch_library.cpp) again in a process that
// imports both, and LibTorch aborts the process on that ("Only a single
// TORCH_LIBRARY can be used to register the namespace dgld", thrown from a
// static initializer). _sample_blocks stays in _C for that reason
// (loaders.cpp).
#include <numeric>

#include "common/partition/partition.h"
#include "python/src/binding.h"

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

}  // namespace
}  // namespace dgld::python

PYBIND11_MODULE(_test_hooks, m) {
  using namespace dgld::python;
  m.doc() = "what dgld's Python tests compare against (not installed)";
  register_status_translator();
  m.def("partition_node_tensor", &partition_node_tensor, py::arg("part_config"), py::arg("part_id"), py::arg("name"));
  m.def("link_split_pairs", &link_split_pairs, py::arg("part_config"));
}
