// dgld._C's partition functions, the C++ half of dgld.distributed's
// partition_graph and load_partition (python/dgld/distributed/partition.py;
// load_partition_book is partition_book.cpp's PartitionBook):
//   _partition_graph   runs dgl-partition's partitioner (partitioner.h) over
//                      an in-memory graph (memory_input.h), GIL released
//   _partition_orig_ids  the new -> original node and edge id maps of a
//                      partitioned graph (node/orig_id, edge/orig_id)
//   _read_partition    one partition's local graph and tensors (copies)
#include <algorithm>
#include <cstring>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "common/partition/partition.h"
#include "common/partition/partition_book.h"
#include "partition/memory_input.h"
#include "partition/partitioner.h"
#include "python/src/binding.h"

namespace dgld::python {
namespace {

// (name, tensor, type): type -1 on a homogeneous graph, else the node (edge)
// type whose rows the tensor holds.
using NamedTensors = std::vector<std::tuple<std::string, torch::Tensor, int>>;

// `t` as a contiguous CPU tensor of `type`, or an undefined tensor for None.
torch::Tensor typed(const std::optional<torch::Tensor>& t, at::ScalarType type, const char* what) {
  if (!t || !t->defined()) return {};
  if (!t->device().is_cpu()) {
    throw StatusError(invalid_argument(std::string(what) + ": the tensor must be on the CPU"));
  }
  return t->detach().to(type).contiguous();
}

template <typename T>
std::span<const T> span_as(const torch::Tensor& t) {
  if (!t.defined()) return {};
  return {t.data_ptr<T>(), static_cast<size_t>(t.numel())};
}

// Named tensors as the partitioner takes them; `keep` holds the contiguous
// copies their data points into.
std::vector<NamedTensor> named(const NamedTensors& in, const char* kind, std::vector<torch::Tensor>* keep) {
  std::vector<NamedTensor> out;
  for (const auto& [name, tensor, type] : in) {
    if (!tensor.device().is_cpu()) {
      throw StatusError(invalid_argument(std::string(kind) + " data '" + name + "': the tensor must be on the CPU"));
    }
    const auto dt = dtype_of_scalar(tensor.scalar_type());
    if (!dt) {
      throw StatusError(invalid_argument(std::string(kind) + " data '" + name + "' has dtype " +
                                         c10::toString(tensor.scalar_type()) +
                                         "; partition files hold bool, uint8, int32, int64, float32 and float64"));
    }
    keep->push_back(tensor.detach().contiguous());
    const torch::Tensor& t = keep->back();
    NamedTensor nt;
    nt.name = name;
    nt.type = type;
    nt.dtype = *dt;
    nt.shape.assign(t.sizes().begin(), t.sizes().end());
    nt.data = static_cast<const std::byte*>(t.data_ptr());
    out.push_back(std::move(nt));
  }
  return out;
}

py::dict partition_graph(int64_t num_nodes, const torch::Tensor& src, const torch::Tensor& dst,
                         const std::optional<torch::Tensor>& features, const std::optional<torch::Tensor>& labels,
                         const std::optional<torch::Tensor>& train_mask, const std::optional<torch::Tensor>& val_mask,
                         const std::optional<torch::Tensor>& test_mask,
                         const std::optional<torch::Tensor>& balance_type, int num_balance_types,
                         const NamedTensors& node_tensors, const NamedTensors& edge_tensors,
                         const std::string& graph_name, int num_parts, const std::string& out_path, int num_hops,
                         const std::string& part_method, bool balance_train, bool balance_edges,
                         int num_trainers_per_machine, uint64_t seed, bool overwrite,
                         const std::vector<std::string>& graph_formats, const std::vector<std::string>& ntypes,
                         const std::vector<int64_t>& ntype_offset,
                         const std::vector<std::tuple<std::string, std::string, std::string>>& etypes,
                         const std::optional<torch::Tensor>& edge_type) {
  const auto s = typed(src, at::kLong, "edge sources"), d = typed(dst, at::kLong, "edge destinations");
  const auto f = typed(features, at::kFloat, "features"), l = typed(labels, at::kLong, "labels");
  const auto tr = typed(train_mask, at::kByte, "train_mask"), va = typed(val_mask, at::kByte, "val_mask");
  const auto te = typed(test_mask, at::kByte, "test_mask"), bt = typed(balance_type, at::kInt, "balance_ntypes");
  const auto et = typed(edge_type, at::kInt, "edge types");
  if (f.defined() && f.dim() != 2) {
    throw StatusError(invalid_argument("features must be 2-d [num_nodes, dim], got " + c10::str(f.sizes())));
  }
  std::vector<torch::Tensor> keep;
  MemoryGraph m;
  m.name = "partition_graph's graph";
  m.num_nodes = num_nodes;
  m.src = span_as<int64_t>(s);
  m.dst = span_as<int64_t>(d);
  m.feat_dim = f.defined() ? f.size(1) : 0;
  m.features = span_as<float>(f);
  m.labels = span_as<int64_t>(l);
  m.train_mask = span_as<uint8_t>(tr);
  m.val_mask = span_as<uint8_t>(va);
  m.test_mask = span_as<uint8_t>(te);
  m.balance_type = span_as<int32_t>(bt);
  m.num_balance_types = num_balance_types;
  m.node_tensors = named(node_tensors, "node", &keep);
  m.edge_tensors = named(edge_tensors, "edge", &keep);
  m.ntypes = ntypes;
  m.ntype_offset = ntype_offset;
  for (const auto& [src_type, rel, dst_type] : etypes) {
    CanonicalEtype c{src_type, rel, dst_type};
    const auto find = [&](const std::string& name) {
      const auto it = std::find(ntypes.begin(), ntypes.end(), name);
      if (it == ntypes.end()) throw StatusError(invalid_argument("edge type " + c.name() + ": no node type '" + name + "'"));
      return static_cast<int32_t>(it - ntypes.begin());
    };
    c.src_type = find(src_type);
    c.dst_type = find(dst_type);
    m.etypes.push_back(std::move(c));
  }
  m.edge_type = span_as<int32_t>(et);

  PartitionOptions o;
  o.graph_name = graph_name;
  o.num_parts = num_parts;
  o.output = out_path;
  o.num_hops = num_hops;
  o.part_method = part_method;
  o.balance_train = balance_train;
  o.balance_edges = balance_edges;
  o.num_trainers_per_machine = num_trainers_per_machine;
  o.seed = seed;
  o.overwrite = overwrite;
  o.merge_into_output = true;  // DGL's partition_graph: out_path's other files stay
  o.graph_formats = graph_formats;
  PartitionStats stats;
  Status st;
  {
    py::gil_scoped_release release;
    auto source = make_memory_source(std::move(m));
    st = dgld::partition_graph(*source, o, &stats);
  }
  check(st);
  py::dict out;
  out["json_path"] = stats.json_path;
  out["num_nodes"] = stats.num_nodes;
  out["num_edges"] = stats.num_edges;
  out["edge_cut"] = stats.edge_cut;
  out["summary"] = format_stats(stats);
  return out;
}


template <typename T>
torch::Tensor copy_span(std::span<const T> v, at::ScalarType type) {
  auto t = torch::empty({static_cast<int64_t>(v.size())}, torch::TensorOptions().dtype(type));
  if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size_bytes());
  return t;
}

py::tuple partition_orig_ids(const std::string& part_config) {
  const auto c = unwrap(load_part_config(part_config));
  std::vector<int64_t> nids, eids;
  nids.reserve(c.num_nodes);
  eids.reserve(c.num_edges);
  {
    py::gil_scoped_release release;
    for (int p = 0; p < c.num_parts; ++p) {
      auto part = unwrap(open_partition(c, p, /*verify_checksums=*/false));
      nids.insert(nids.end(), part->orig_node_ids().begin(), part->orig_node_ids().end());
      eids.insert(eids.end(), part->orig_edge_ids().begin(), part->orig_edge_ids().end());
    }
  }
  return py::make_tuple(tensor_of(std::move(nids)), tensor_of(std::move(eids)));
}

py::dict read_partition(const std::string& part_config, int part_id, bool load_graph, bool load_feats) {
  const auto c = unwrap(load_part_config(part_config));
  auto part = [&] {
    py::gil_scoped_release release;
    return unwrap(open_partition(c, part_id, /*verify_checksums=*/true));
  }();
  py::dict out;
  if (load_graph) {
    const auto& in = part->in_edges();
    out["global_id"] = copy_span(part->node_global_ids(), at::kLong);
    out["inner_node"] = copy_span(part->inner_node(), at::kByte);
    out["owner"] = copy_span(part->node_owner(), at::kInt);
    out["indptr"] = copy_span(in.indptr, at::kLong);
    out["indices"] = copy_span(in.indices, at::kLong);
    out["eids"] = copy_span(in.eids, at::kLong);
    out["inner_edge"] = copy_span(part->inner_edge(), at::kByte);
    if (c.types.present()) {
      // Each local node's type and each local edge's (DGL's NTYPE / ETYPE).
      const auto book = unwrap(RangePartitionBook::from_config(c));
      std::vector<int32_t> ntype;
      for (int64_t v : part->node_global_ids()) ntype.push_back(book.node_type(v));
      out["ntype"] = copy_span(std::span<const int32_t>(ntype), at::kInt);
      out["etype"] = copy_span(part->edge_types(), at::kInt);
    }
  }
  out["graph_formats"] = c.graph_formats;
  if (load_feats) {
    py::dict nodes, edges;
    for (const TensorView& t : part->node_tensors()) nodes[py::str(t.name)] = copy_of(t);
    for (const TensorView& t : part->edge_tensors()) edges[py::str(t.name)] = copy_of(t);
    out["node_feats"] = nodes;
    out["edge_feats"] = edges;
  }
  return out;
}

}  // namespace

void bind_partition(py::module_& m) {
  m.def("_partition_graph", &partition_graph, py::arg("num_nodes"), py::arg("src"), py::arg("dst"),
        py::arg("features"), py::arg("labels"), py::arg("train_mask"), py::arg("val_mask"), py::arg("test_mask"),
        py::arg("balance_type"), py::arg("num_balance_types"), py::arg("node_tensors"), py::arg("edge_tensors"),
        py::arg("graph_name"), py::arg("num_parts"), py::arg("out_path"), py::arg("num_hops"),
        py::arg("part_method"), py::arg("balance_train"), py::arg("balance_edges"),
        py::arg("num_trainers_per_machine"), py::arg("seed"), py::arg("overwrite"), py::arg("graph_formats"),
        py::arg("ntypes"), py::arg("ntype_offset"), py::arg("etypes"), py::arg("edge_type"));
  m.def("_partition_orig_ids", &partition_orig_ids, py::arg("part_config"));
  m.def("_read_partition", &read_partition, py::arg("part_config"), py::arg("part_id"), py::arg("load_graph"),
        py::arg("load_feats"));
}

}  // namespace dgld::python
