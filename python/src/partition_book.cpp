// dgld._C's PartitionBook (partition_book.h): the vectorised id mappings and
// their binding.
#include "python/src/partition_book.h"

#include <algorithm>

namespace dgld::python {

namespace {

const char* kind(bool edges) { return edges ? "edge" : "node"; }

std::string out_of_range(bool edges, int64_t id, int64_t total) {
  return std::string(kind(edges)) + " id " + std::to_string(id) + " is out of range [0, " + std::to_string(total) +
         ")";
}

// A loop over ids as int64 writing one int64 per id.
template <typename F>
torch::Tensor map_ids(const torch::Tensor& ids_in, const char* what, F&& f) {
  const auto ids = as_ids(ids_in, what);
  auto out = torch::empty_like(ids);
  const int64_t* in = ids.data_ptr<int64_t>();
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) o[i] = f(in[i]);
  return out;
}

torch::Tensor arange(const IdRange& r) { return torch::arange(r.start, r.end, torch::kInt64); }

}  // namespace

PartitionBook::PartitionBook(const PartitionConfig& config, RangePartitionBook book, int part_id)
    : book_(std::move(book)), types_(config.types), graph_name_(config.graph_name), part_id_(part_id),
      homogeneous_(!config.types.present()) {
  if (homogeneous_) {
    types_.ntypes = {config.ntype};
    types_.etypes = {config.etype};
    types_.ntype_count = {book_.num_nodes()};
    types_.etype_count = {book_.num_edges()};
  }
  check_part(part_id);
}

PartitionBook PartitionBook::load(const std::string& path, int part_id) {
  auto config = unwrap(load_part_config(path));
  auto book = unwrap(RangePartitionBook::from_config(config));
  return PartitionBook(config, std::move(book), part_id);
}

namespace {

// One kind's ranges (DGL's node_map or edge_map as lists by type id) checked,
// with each partition's whole range and each type's count.
std::vector<std::vector<IdRange>> type_ranges(const PartitionBook::TypeRanges& map, int num_parts,
                                              const std::vector<std::string>& names, const char* what,
                                              std::vector<IdRange>* parts, std::vector<int64_t>* counts) {
  if (map.size() != names.size()) {
    throw StatusError(invalid_argument(std::string(what) + ": " + std::to_string(map.size()) + " lists of ranges for " +
                                       std::to_string(names.size()) + " types"));
  }
  std::vector<std::vector<IdRange>> out;
  std::vector<int64_t> ends(num_parts, 0);
  for (size_t t = 0; t < map.size(); ++t) {
    if (static_cast<int>(map[t].size()) != num_parts) {
      throw StatusError(invalid_argument(std::string(what) + "['" + names[t] + "']: " + std::to_string(map[t].size()) +
                                         " ranges, expected one [start, end] per partition (" +
                                         std::to_string(num_parts) + ")"));
    }
    out.emplace_back();
    counts->push_back(0);
    for (int p = 0; p < num_parts; ++p) {
      const auto [start, end] = map[t][p];
      if (start < 0 || end < start) {
        throw StatusError(invalid_argument(std::string(what) + "['" + names[t] + "'][" + std::to_string(p) +
                                           "]: [" + std::to_string(start) + ", " + std::to_string(end) +
                                           ") is not a range of ids"));
      }
      out.back().push_back({start, end});
      counts->back() += end - start;
      ends[p] = std::max(ends[p], end);
    }
  }
  int64_t prev = 0;
  for (int p = 0; p < num_parts; ++p) {
    parts->push_back({prev, std::max(prev, ends[p])});
    prev = parts->back().end;
  }
  return out;
}

}  // namespace

PartitionBook PartitionBook::from_ranges(int part_id, int num_parts, const std::vector<std::string>& ntypes,
                                         const std::vector<std::string>& etypes, const TypeRanges& ntype_map,
                                         const TypeRanges& etype_map) {
  if (num_parts < 1) throw StatusError(invalid_argument("num_parts must be > 0, got " + std::to_string(num_parts)));
  PartitionConfig c;
  c.num_parts = num_parts;
  GraphTypeInfo& t = c.types;
  auto nmap = type_ranges(ntype_map, num_parts, ntypes, "node_map", &c.node_map, &t.ntype_count);
  auto emap = type_ranges(etype_map, num_parts, etypes, "edge_map", &c.edge_map, &t.etype_count);
  if (ntypes == std::vector<std::string>{c.ntype} && etypes == std::vector<std::string>{c.etype}) {
    return PartitionBook(c, RangePartitionBook(c.node_map, c.edge_map), part_id);
  }
  t.ntypes = ntypes;
  t.etypes = etypes;
  for (const std::string& e : etypes) {
    const size_t a = e.find(':'), b = e.rfind(':');
    const int s = a == b ? -1 : t.ntype_id(e.substr(0, a)), d = a == b ? -1 : t.ntype_id(e.substr(b + 1));
    if (s < 0 || d < 0) {
      throw StatusError(invalid_argument("edge type '" + e + "' is not \"src:rel:dst\" over the node types"));
    }
    t.etype_src.push_back(s);
    t.etype_dst.push_back(d);
  }
  t.ntype_map = nmap;
  t.etype_map = emap;
  return PartitionBook(c, RangePartitionBook(c.node_map, c.edge_map, std::move(nmap), std::move(emap)), part_id);
}

int PartitionBook::ntype_id(const std::string& name) const { return unwrap(types_.resolve_ntype(name)); }

int PartitionBook::etype_id(const std::string& name) const { return unwrap(types_.resolve_etype(name)); }

void PartitionBook::check_part(int part) const {
  if (part < 0 || part >= book_.num_partitions()) {
    throw StatusError(invalid_argument("partition " + std::to_string(part) +
                                       " does not exist (num_partitions=" + std::to_string(book_.num_partitions()) +
                                       ")"));
  }
}

void PartitionBook::check_type(int type, bool edges) const {
  const int n = space(edges).num_types();
  if (type < 0 || type >= n) {
    throw StatusError(invalid_argument(std::string(kind(edges)) + " type id " + std::to_string(type) +
                                       " is out of range [0, " + std::to_string(n) + ")"));
  }
}

torch::Tensor PartitionBook::partition_of(const torch::Tensor& ids, bool edges) const {
  const int64_t total = edges ? book_.num_edges() : book_.num_nodes();
  return map_ids(ids, edges ? "eid2partid" : "nid2partid", [&](int64_t id) -> int64_t {
    const int p = edges ? book_.edge_partition(id) : book_.node_partition(id);
    if (p < 0) throw StatusError(invalid_argument(out_of_range(edges, id, total)));
    return p;
  });
}

torch::Tensor PartitionBook::local_ids(const torch::Tensor& ids, int part, int type, bool edges) const {
  check_part(part);
  IdRange r = edges ? book_.edge_range(part) : book_.node_range(part);
  if (type >= 0) {
    check_type(type, edges);
    r = space(edges).type_wise_range(type, part);
  }
  return map_ids(ids, edges ? "eid2localeid" : "nid2localnid", [&](int64_t id) -> int64_t {
    if (id < r.start || id >= r.end) {
      throw StatusError(invalid_argument(std::string(kind(edges)) + " id " + std::to_string(id) +
                                         " is not in partition " + std::to_string(part) + "'s range [" +
                                         std::to_string(r.start) + ", " + std::to_string(r.end) + ")"));
    }
    return id - r.start;
  });
}

torch::Tensor PartitionBook::owned_ids(int part, int type, bool edges) const {
  check_part(part);
  if (type < 0) return arange(edges ? book_.edge_range(part) : book_.node_range(part));
  check_type(type, edges);
  return arange(space(edges).type_wise_range(type, part));
}

torch::Tensor PartitionBook::to_homogeneous(int type, const torch::Tensor& ids, bool edges) const {
  check_type(type, edges);
  const TypedIdSpace& s = space(edges);
  const auto& names = edges ? types_.etypes : types_.ntypes;
  return map_ids(ids, edges ? "map_to_homo_eid" : "map_to_homo_nid", [&](int64_t id) -> int64_t {
    const int64_t h = s.to_homogeneous(type, id);
    if (h < 0) {
      throw StatusError(invalid_argument(std::string(kind(edges)) + " id " + std::to_string(id) + " of type '" +
                                         names[static_cast<size_t>(type)] + "' is out of range [0, " +
                                         std::to_string(s.count(type)) + ")"));
    }
    return h;
  });
}

std::pair<torch::Tensor, torch::Tensor> PartitionBook::to_type_wise(const torch::Tensor& ids_in, bool edges) const {
  const auto ids = as_ids(ids_in, edges ? "map_to_per_etype" : "map_to_per_ntype");
  const int64_t total = edges ? book_.num_edges() : book_.num_nodes();
  auto types = torch::empty_like(ids), out = torch::empty_like(ids);
  const int64_t* in = ids.data_ptr<int64_t>();
  int64_t* t_out = types.data_ptr<int64_t>();
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    int t = -1;
    o[i] = edges ? book_.edge_to_type_wise(in[i], &t) : book_.to_type_wise(in[i], &t);
    if (t < 0) throw StatusError(invalid_argument(out_of_range(edges, in[i], total)));
    t_out[i] = t;
  }
  return {types, out};
}

std::vector<std::pair<int64_t, int64_t>> PartitionBook::ranges(int type, bool edges) const {
  if (type >= 0) check_type(type, edges);
  const auto& list = type >= 0 ? space(edges).ranges(type) : (edges ? book_.edge_ranges() : book_.node_ranges());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& r : list) out.emplace_back(r.start, r.end);
  return out;
}

void bind_partition_book(py::module_& m) {
  // Edge types as DGL names them: a canonical triple, "src:rel:dst" or a unique relation name.
  auto etype_name = [](const py::object& etype) {
    if (py::isinstance<py::tuple>(etype)) {
      auto t = etype.cast<std::vector<std::string>>();
      if (t.size() != 3) {
        throw StatusError(invalid_argument("a canonical edge type is (src type, relation, dst type), got " +
                                           std::string(py::str(etype))));
      }
      return t[0] + ":" + t[1] + ":" + t[2];
    }
    return etype.cast<std::string>();
  };
  py::class_<PartitionBook>(m, "PartitionBook")
      .def(py::init(&PartitionBook::load), py::arg("part_config"), py::arg("part_id"))
      .def_static("from_ranges", &PartitionBook::from_ranges, py::arg("part_id"), py::arg("num_parts"),
                  py::arg("ntypes"), py::arg("etypes"), py::arg("node_map"), py::arg("edge_map"))
      .def_property_readonly("partid", &PartitionBook::part_id)
      .def_property_readonly("graph_name", &PartitionBook::graph_name)
      .def_property_readonly("num_partitions", [](const PartitionBook& b) { return b.book().num_partitions(); })
      .def_property_readonly("num_nodes", [](const PartitionBook& b) { return b.book().num_nodes(); })
      .def_property_readonly("num_edges", [](const PartitionBook& b) { return b.book().num_edges(); })
      .def_property_readonly("is_homogeneous", &PartitionBook::is_homogeneous)
      .def_property_readonly("ntypes", [](const PartitionBook& b) { return b.types().ntypes; })
      .def_property_readonly("canonical_etypes", [](const PartitionBook& b) { return b.types().etypes; })
      .def_property_readonly("ntype_counts", [](const PartitionBook& b) { return b.types().ntype_count; })
      .def_property_readonly("etype_counts", [](const PartitionBook& b) { return b.types().etype_count; })
      .def("ntype_id", &PartitionBook::ntype_id, py::arg("ntype"))
      .def(
          "etype_id", [=](const PartitionBook& b, const py::object& etype) { return b.etype_id(etype_name(etype)); },
          py::arg("etype"))
      .def("nid2partid", [](const PartitionBook& b, const torch::Tensor& ids) { return b.partition_of(ids, false); })
      .def("eid2partid", [](const PartitionBook& b, const torch::Tensor& ids) { return b.partition_of(ids, true); })
      .def(
          "nid2localnid",
          [](const PartitionBook& b, const torch::Tensor& ids, int part, int type) {
            return b.local_ids(ids, part, type, false);
          },
          py::arg("ids"), py::arg("partid"), py::arg("ntype") = -1)
      .def(
          "eid2localeid",
          [](const PartitionBook& b, const torch::Tensor& ids, int part, int type) {
            return b.local_ids(ids, part, type, true);
          },
          py::arg("ids"), py::arg("partid"), py::arg("etype") = -1)
      .def(
          "partid2nids", [](const PartitionBook& b, int part, int type) { return b.owned_ids(part, type, false); },
          py::arg("partid"), py::arg("ntype") = -1)
      .def(
          "partid2eids", [](const PartitionBook& b, int part, int type) { return b.owned_ids(part, type, true); },
          py::arg("partid"), py::arg("etype") = -1)
      .def(
          "map_to_homo_nid",
          [](const PartitionBook& b, const torch::Tensor& ids, int type) { return b.to_homogeneous(type, ids, false); },
          py::arg("ids"), py::arg("ntype"))
      .def(
          "map_to_homo_eid",
          [](const PartitionBook& b, const torch::Tensor& ids, int type) { return b.to_homogeneous(type, ids, true); },
          py::arg("ids"), py::arg("etype"))
      .def("map_to_per_ntype",
           [](const PartitionBook& b, const torch::Tensor& ids) { return b.to_type_wise(ids, false); })
      .def("map_to_per_etype",
           [](const PartitionBook& b, const torch::Tensor& ids) { return b.to_type_wise(ids, true); })
      .def(
          "node_ranges", [](const PartitionBook& b, int type) { return b.ranges(type, false); },
          py::arg("ntype") = -1)
      .def(
          "edge_ranges", [](const PartitionBook& b, int type) { return b.ranges(type, true); },
          py::arg("etype") = -1);
}

}  // namespace dgld::python
