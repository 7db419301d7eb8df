#include "common/part_config.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/file_util.h"

namespace dgld {
using nlohmann::json;

namespace {

// Reads field `key` of object `obj` (named `where` in messages) as T.
template <typename T>
Status get_field(const json& obj, const std::string& where, const std::string& key, T* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return invalid_argument(where + ": missing field '" + key + "'");
  try {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!it->is_string()) throw std::runtime_error("expected a string");
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) throw std::runtime_error("expected true or false");
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer()) throw std::runtime_error("expected an integer");
      // get<T> would silently wrap a value outside T (num_parts 4294967297 read as 1).
      const bool fits = it->is_number_unsigned()
                            ? it->template get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                            : it->template get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                  it->template get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max());
      if (!fits) throw std::runtime_error("integer out of range");
    }
    *out = it->get<T>();
  } catch (const std::exception& e) {
    return invalid_argument(where + ": field '" + key + "': " + e.what() + ", got " + it->dump());
  }
  return Status::ok();
}

// node_map / edge_map: {"<type>": [[s,e], ...]} with exactly one type.
Status parse_id_map(const json& root, const std::string& src, const std::string& key, int num_parts,
                    int64_t total, std::string* type_name, std::vector<IdRange>* out) {
  const std::string where = src + ": field '" + key + "'";
  auto it = root.find(key);
  if (it == root.end()) return invalid_argument(src + ": missing field '" + key + "'");
  if (!it->is_object()) {
    return invalid_argument(where + ": expected an object {\"<type>\": [[start, end], ...]}, got " +
                            std::string(it->type_name()));
  }
  if (it->size() != 1) {
    return invalid_argument(where + ": expected exactly one type (only homogeneous graphs are "
                            "supported), got " + std::to_string(it->size()));
  }
  *type_name = it->begin().key();
  const json& ranges = it->begin().value();
  const std::string twhere = where + "[\"" + *type_name + "\"]";
  if (!ranges.is_array() || static_cast<int>(ranges.size()) != num_parts) {
    return invalid_argument(twhere + ": expected an array of num_parts=" + std::to_string(num_parts) +
                            " [start, end] pairs");
  }
  out->clear();
  int64_t expect_start = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const json& r = ranges[i];
    const std::string rw = twhere + "[" + std::to_string(i) + "]";
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer()) {
      return invalid_argument(rw + ": expected [start, end] integers, got " + r.dump());
    }
    IdRange range{r[0].get<int64_t>(), r[1].get<int64_t>()};
    if (range.start != expect_start) {
      return invalid_argument(rw + ": range starts at " + std::to_string(range.start) + ", expected " +
                              std::to_string(expect_start) + " (ranges must be contiguous from 0)");
    }
    if (range.end < range.start) {
      return invalid_argument(rw + ": end " + std::to_string(range.end) + " is before start " +
                              std::to_string(range.start));
    }
    expect_start = range.end;
    out->push_back(range);
  }
  if (expect_start != total) {
    return invalid_argument(twhere + ": ranges end at " + std::to_string(expect_start) +
                            " but the total is " + std::to_string(total));
  }
  return Status::ok();
}

Status parse_type_ids(const json& root, const std::string& src, const std::string& key,
                      const std::string& expected_type) {
  auto it = root.find(key);
  if (it == root.end()) return Status::ok();  // optional in older DGL configs
  if (!it->is_object() || it->size() != 1 || !it->contains(expected_type) ||
      !(*it)[expected_type].is_number_integer() || (*it)[expected_type].get<int64_t>() != 0) {
    return invalid_argument(src + ": field '" + key + "': expected {\"" + expected_type + "\": 0}, got " +
                            it->dump());
  }
  return Status::ok();
}

Status validate_link_split(const PartitionConfig& c, const std::string& src) {
  const LinkSplitInfo& l = c.link_split;
  for (int i = 0; i < c.num_parts; ++i) {
    if (l.present == c.parts[i].link_split.empty()) {
      return invalid_argument(src + ": field 'part-" + std::to_string(i) + "'.'link_split': " +
                              (l.present ? "missing, but 'dgld'.'link_split' is present"
                                         : "given, but 'dgld'.'link_split' is absent"));
    }
  }
  if (!l.present) return Status::ok();
  const std::string w = src + ": field 'dgld'.'link_split'.";
  const bool ogb = l.source.rfind("ogb:", 0) == 0 && l.source.size() > 4;
  if (l.source != "random" && !ogb) {
    return invalid_argument(w + "'source': expected \"random\" or \"ogb:<split name>\", got \"" + l.source + "\"");
  }
  if (l.source == "random") {
    if (l.fractions.size() != 3) {
      return invalid_argument(w + "'fractions': expected 3 values (train, valid, test), got " +
                              std::to_string(l.fractions.size()));
    }
    double sum = 0;
    for (double f : l.fractions) {
      if (!std::isfinite(f) || f < 0) {
        return invalid_argument(w + "'fractions': every fraction must be >= 0, got " + std::to_string(f));
      }
      sum += f;
    }
    if (std::abs(sum - 1.0) > 1e-6) {
      return invalid_argument(w + "'fractions': must sum to 1, sum to " + std::to_string(sum));
    }
  } else if (!l.fractions.empty()) {
    return invalid_argument(w + "'fractions': only a random split has fractions");
  }
  const std::pair<const char*, int64_t> counts[] = {{"num_negatives", l.num_negatives},
                                                    {"num_train", l.num_train},
                                                    {"num_valid", l.num_valid},
                                                    {"num_test", l.num_test}};
  for (const auto& [name, v] : counts) {
    if (v < 0) return invalid_argument(w + "'" + name + "' must be >= 0, got " + std::to_string(v));
  }
  if (l.num_train > c.num_edges) {
    return invalid_argument(w + "'num_train' " + std::to_string(l.num_train) + " is more than num_edges " +
                            std::to_string(c.num_edges));
  }
  return Status::ok();
}

Status parse_link_split(const json& obj, const std::string& where, LinkSplitInfo* l) {
  if (!obj.is_object()) return invalid_argument(where + ": expected an object");
  l->present = true;
  DGLD_RETURN_IF_ERROR(get_field(obj, where, "source", &l->source));
  if (auto it = obj.find("fractions"); it != obj.end()) {
    if (!it->is_array()) return invalid_argument(where + ": field 'fractions': expected an array, got " + it->dump());
    for (const json& f : *it) {
      if (!f.is_number()) return invalid_argument(where + ": field 'fractions': expected numbers, got " + f.dump());
      l->fractions.push_back(f.get<double>());
    }
  }
  DGLD_RETURN_IF_ERROR(get_field(obj, where, "seed", &l->seed));
  DGLD_RETURN_IF_ERROR(get_field(obj, where, "num_negatives", &l->num_negatives));
  DGLD_RETURN_IF_ERROR(get_field(obj, where, "num_train", &l->num_train));
  DGLD_RETURN_IF_ERROR(get_field(obj, where, "num_valid", &l->num_valid));
  DGLD_RETURN_IF_ERROR(get_field(obj, where, "num_test", &l->num_test));
  DGLD_RETURN_IF_ERROR(get_field(obj, where, "symmetric", &l->symmetric));
  return Status::ok();
}

// A type-id object {"name": id, ...} with ids 0 .. n-1, each once; names by id.
Status parse_type_table(const json& root, const std::string& src, const std::string& key,
                        std::vector<std::string>* names) {
  const std::string where = src + ": field '" + key + "'";
  auto it = root.find(key);
  if (it == root.end()) return invalid_argument(src + ": missing field '" + key + "' (a heterogeneous graph needs it)");
  if (!it->is_object() || it->empty()) {
    return invalid_argument(where + ": expected a non-empty object {\"<type>\": <id>, ...}, got " + it->dump());
  }
  names->assign(it->size(), "");
  for (const auto& [name, id] : it->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= static_cast<int64_t>(it->size())) {
      return invalid_argument(where + "[\"" + name + "\"]: expected a type id in [0, " + std::to_string(it->size()) +
                              "), got " + id.dump());
    }
    std::string& slot = (*names)[static_cast<size_t>(id.get<int64_t>())];
    if (!slot.empty()) {
      return invalid_argument(where + ": types '" + slot + "' and '" + name + "' have the same id " + id.dump());
    }
    if (name.empty()) return invalid_argument(where + ": a type name is empty");
    slot = name;
  }
  return Status::ok();
}

// Checks that per-type ranges type_map[type][part] (num_parts each) tile
// [0, total) partition-major, then by type id, and fills the count per type and
// each partition's whole range. `where` names the field in messages.
Status tile_type_ranges(const std::string& where, const std::vector<std::string>& types,
                        const std::vector<std::vector<IdRange>>& type_map, int num_parts, int64_t total,
                        std::vector<int64_t>* count, std::vector<IdRange>* part_map) {
  if (type_map.size() != types.size()) {
    return invalid_argument(where + ": " + std::to_string(type_map.size()) + " lists of ranges for " +
                            std::to_string(types.size()) + " types");
  }
  count->assign(types.size(), 0);
  part_map->clear();
  int64_t next = 0;
  for (int p = 0; p < num_parts; ++p) {
    const int64_t start = next;
    for (size_t ty = 0; ty < types.size(); ++ty) {
      if (static_cast<int>(type_map[ty].size()) != num_parts) {
        return invalid_argument(where + "[\"" + types[ty] + "\"]: expected num_parts=" + std::to_string(num_parts) +
                                " [start, end] pairs");
      }
      const IdRange& r = type_map[ty][static_cast<size_t>(p)];
      if (r.start != next || r.end < r.start) {
        return invalid_argument(where + "[\"" + types[ty] + "\"][" + std::to_string(p) + "]: range [" +
                                std::to_string(r.start) + ", " + std::to_string(r.end) + ") should start at " +
                                std::to_string(next) + " (ranges are partition-major, then by type id)");
      }
      next = r.end;
      (*count)[ty] += r.size();
    }
    part_map->push_back({start, next});
  }
  if (next != total) {
    return invalid_argument(where + ": ranges end at " + std::to_string(next) + " but the total is " +
                            std::to_string(total));
  }
  return Status::ok();
}

// A heterogeneous graph's node_map or edge_map: {"<type>": [[s, e] per partition]}
// with one key per type, tiled as tile_type_ranges checks. Fills
// (*type_map)[type][part], the count per type and the partition's whole range
// (*part_map)[part].
Status parse_typed_map(const json& root, const std::string& src, const std::string& key, const char* kind,
                       const std::vector<std::string>& types, int num_parts, int64_t total,
                       std::vector<std::vector<IdRange>>* type_map, std::vector<int64_t>* count,
                       std::vector<IdRange>* part_map) {
  const std::string where = src + ": field '" + key + "'";
  auto it = root.find(key);
  if (it == root.end()) return invalid_argument(src + ": missing field '" + key + "'");
  if (!it->is_object()) return invalid_argument(where + ": expected an object, got " + std::string(it->type_name()));
  if (std::string(kind) == "edge" && it->size() == 1 && it->begin().key() == "_E") {
    return invalid_argument(where + ": has one '_E' range per partition, the layout of a dgl-partition older "
                            "than this dgld; heterogeneous graphs now need one list per canonical edge type "
                            "(DGL's layout, per-type edge ids): re-partition the graph with this dgl-partition");
  }
  if (it->size() != types.size()) {
    return invalid_argument(where + ": expected one [[start, end], ...] list per " + kind + " type (" +
                            std::to_string(types.size()) + "), got " + std::to_string(it->size()) + " entries");
  }
  type_map->assign(types.size(), {});
  for (size_t ty = 0; ty < types.size(); ++ty) {
    const std::string tw = where + "[\"" + types[ty] + "\"]";
    auto r = it->find(types[ty]);
    if (r == it->end()) return invalid_argument(where + ": no ranges for " + kind + " type '" + types[ty] + "'");
    if (!r->is_array() || static_cast<int>(r->size()) != num_parts) {
      return invalid_argument(tw + ": expected num_parts=" + std::to_string(num_parts) + " [start, end] pairs");
    }
    for (size_t p = 0; p < r->size(); ++p) {
      const json& x = (*r)[p];
      if (!x.is_array() || x.size() != 2 || !x[0].is_number_integer() || !x[1].is_number_integer()) {
        return invalid_argument(tw + "[" + std::to_string(p) + "]: expected [start, end] integers, got " + x.dump());
      }
      (*type_map)[ty].push_back({x[0].get<int64_t>(), x[1].get<int64_t>()});
    }
  }
  return tile_type_ranges(where, types, *type_map, num_parts, total, count, part_map);
}

// The heterogeneous parts of a config: ntypes, etypes, node_map per type,
// dgld.etype_counts and dgld.target_ntype. c->node_map and c->edge_map are
// derived from the per-type maps.
Status parse_hetero(const json& root, const std::string& src, PartitionConfig* c) {
  GraphTypeInfo& t = c->types;
  DGLD_RETURN_IF_ERROR(parse_type_table(root, src, "ntypes", &t.ntypes));
  DGLD_RETURN_IF_ERROR(parse_type_table(root, src, "etypes", &t.etypes));
  for (size_t e = 0; e < t.etypes.size(); ++e) {
    const std::string& name = t.etypes[e];
    const size_t a = name.find(':'), b = name.rfind(':');
    const std::string where = src + ": field 'etypes'[\"" + name + "\"]";
    if (a == std::string::npos || a == b || name.find(':', a + 1) != b) {
      return invalid_argument(where + ": expected a canonical edge type \"src:relation:dst\"");
    }
    const int s = t.ntype_id(name.substr(0, a)), d = t.ntype_id(name.substr(b + 1));
    if (s < 0 || d < 0) {
      return invalid_argument(where + ": node type '" + name.substr(s < 0 ? 0 : b + 1, s < 0 ? a : std::string::npos) +
                              "' is not in 'ntypes'");
    }
    t.etype_src.push_back(s);
    t.etype_dst.push_back(d);
  }
  DGLD_RETURN_IF_ERROR(parse_typed_map(root, src, "node_map", "node", t.ntypes, c->num_parts, c->num_nodes,
                                       &t.ntype_map, &t.ntype_count, &c->node_map));
  std::vector<int64_t> etype_count;
  DGLD_RETURN_IF_ERROR(parse_typed_map(root, src, "edge_map", "edge", t.etypes, c->num_parts, c->num_edges,
                                       &t.etype_map, &etype_count, &c->edge_map));
  // DGL's own configs have no "dgld" object: the counts are the ranges' sizes.
  static const json kNone = json::object();
  auto dgld = root.find("dgld");
  const json& d = dgld != root.end() && dgld->is_object() ? *dgld : kNone;
  const std::string dw = src + ": field 'dgld'";
  auto counts = d.find("etype_counts");
  if (counts == d.end() && !d.contains("heterogeneous")) {
    t.etype_count = etype_count;
    return Status::ok();
  }
  if (counts == d.end() || !counts->is_array() || counts->size() != t.etypes.size()) {
    return invalid_argument(dw + ".'etype_counts': expected one edge count per edge type (" +
                            std::to_string(t.etypes.size()) + ")");
  }
  int64_t sum = 0;
  for (const json& n : *counts) {
    if (!n.is_number_integer() || n.get<int64_t>() < 0) {
      return invalid_argument(dw + ".'etype_counts': expected counts >= 0, got " + n.dump());
    }
    t.etype_count.push_back(n.get<int64_t>());
    sum += n.get<int64_t>();
  }
  if (sum != c->num_edges) {
    return invalid_argument(dw + ".'etype_counts': sum to " + std::to_string(sum) + ", num_edges is " +
                            std::to_string(c->num_edges));
  }
  if (t.etype_count != etype_count) {
    return invalid_argument(dw + ".'etype_counts': do not match the sizes of 'edge_map''s ranges per edge type");
  }
  if (d.contains("target_ntype")) {
    DGLD_RETURN_IF_ERROR(get_field(d, dw, "target_ntype", &t.target_ntype));
    if (t.ntype_id(t.target_ntype) < 0) {
      return invalid_argument(dw + ".'target_ntype': '" + t.target_ntype + "' is not in 'ntypes'");
    }
  }
  return Status::ok();
}

}  // namespace

int GraphTypeInfo::ntype_id(const std::string& name) const {
  for (size_t i = 0; i < ntypes.size(); ++i) {
    if (ntypes[i] == name) return static_cast<int>(i);
  }
  return -1;
}

int GraphTypeInfo::etype_id(const std::string& canonical) const {
  for (size_t i = 0; i < etypes.size(); ++i) {
    if (etypes[i] == canonical) return static_cast<int>(i);
  }
  return -1;
}

namespace {
std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}
}  // namespace

Result<int> GraphTypeInfo::resolve_ntype(const std::string& name) const {
  const int t = ntype_id(name);
  if (t < 0) return invalid_argument("'" + name + "' is not a node type of the graph (known: " + joined(ntypes) + ")");
  return t;
}

Result<int> GraphTypeInfo::resolve_etype(const std::string& name) const {
  if (std::count(name.begin(), name.end(), ':') == 2) {
    const int t = etype_id(name);
    if (t < 0) {
      return invalid_argument("'" + name + "' is not an edge type of the graph (known: " + joined(etypes) + ")");
    }
    return t;
  }
  std::vector<int> found;
  for (size_t i = 0; i < etypes.size(); ++i) {
    const size_t a = etypes[i].find(':'), b = etypes[i].rfind(':');  // parse_part_config checked "src:rel:dst"
    if (etypes[i].substr(a + 1, b - a - 1) == name) found.push_back(static_cast<int>(i));
  }
  if (found.empty()) {
    return invalid_argument("'" + name + "' is not an edge type of the graph (known: " + joined(etypes) + ")");
  }
  if (found.size() > 1) {
    std::vector<std::string> names;
    for (int i : found) names.push_back(etypes[static_cast<size_t>(i)]);
    return invalid_argument("edge type '" + name + "' is ambiguous: " + joined(names) +
                            " have that relation; name one by its canonical (src, rel, dst)");
  }
  return found[0];
}

namespace {
// The type prefix of a tensor name ("paper" of "paper/features"), or "" (no type has that name).
std::string tensor_type_prefix(const std::string& name) {
  const size_t slash = name.find('/');
  return slash == std::string::npos ? std::string() : name.substr(0, slash);
}
}  // namespace

int node_tensor_type(const PartitionConfig& config, const std::string& name) {
  return config.types.present() ? config.types.ntype_id(tensor_type_prefix(name)) : -1;
}

IdRange node_tensor_range(const PartitionConfig& config, int part, const std::string& name) {
  const int t = node_tensor_type(config, name);
  return t < 0 ? config.node_map[part] : config.types.ntype_map[t][part];
}

int edge_tensor_type(const PartitionConfig& config, const std::string& name) {
  return config.types.present() ? config.types.etype_id(tensor_type_prefix(name)) : -1;
}

IdRange edge_tensor_range(const PartitionConfig& config, int part, const std::string& name) {
  const int t = edge_tensor_type(config, name);
  return t < 0 ? config.edge_map[part] : config.types.etype_map[t][part];
}

int64_t partition_file_bytes(const PartitionConfig& config, int part) {
  const PartitionFiles& f = config.parts[static_cast<size_t>(part)];
  int64_t bytes = 0;
  std::error_code ec;
  for (const std::string* p : {&f.part_graph, &f.node_feats, &f.edge_feats}) {
    const auto n = std::filesystem::file_size(config.resolve(*p), ec);
    if (!ec) bytes += static_cast<int64_t>(n);
  }
  return bytes;
}

Status validate_part_config(const PartitionConfig& c, const std::string& src) {
  if (c.graph_name.empty()) return invalid_argument(src + ": field 'graph_name' is empty");
  if (c.num_parts < 1) {
    return invalid_argument(src + ": field 'num_parts' must be >= 1, got " + std::to_string(c.num_parts));
  }
  if (c.num_nodes < 1) return invalid_argument(src + ": field 'num_nodes' must be >= 1");
  if (c.num_edges < 0) return invalid_argument(src + ": field 'num_edges' must be >= 0");
  if (c.part_method != "metis" && c.part_method != "random" && c.part_method != "ptscotch") {
    return invalid_argument(src + ": field 'part_method' must be \"metis\", \"random\" or \"ptscotch\", got \"" +
                            c.part_method + "\"");
  }
  if (c.halo_hops < 0) return invalid_argument(src + ": field 'halo_hops' must be >= 0");
  auto check_map = [&](const std::vector<IdRange>& m, const char* key, int64_t total) -> Status {
    if (static_cast<int>(m.size()) != c.num_parts) {
      return invalid_argument(src + ": field '" + key + "' has " + std::to_string(m.size()) +
                              " ranges, expected num_parts=" + std::to_string(c.num_parts));
    }
    int64_t next = 0;
    for (size_t i = 0; i < m.size(); ++i) {
      if (m[i].start != next || m[i].end < m[i].start) {
        return invalid_argument(src + ": field '" + key + "'[" + std::to_string(i) +
                                "]: ranges must be contiguous and non-decreasing");
      }
      next = m[i].end;
    }
    if (next != total) {
      return invalid_argument(src + ": field '" + key + "' ends at " + std::to_string(next) +
                              ", expected " + std::to_string(total));
    }
    return Status::ok();
  };
  DGLD_RETURN_IF_ERROR(check_map(c.node_map, "node_map", c.num_nodes));
  DGLD_RETURN_IF_ERROR(check_map(c.edge_map, "edge_map", c.num_edges));
  if (c.types.present()) {
    // The per-type ranges tile each partition's range (configs made in code
    // are checked here; parsed ones were tiled by the parser).
    const GraphTypeInfo& t = c.types;
    auto tiled = [&](const char* key, const std::vector<std::string>& names,
                     const std::vector<std::vector<IdRange>>& map, int64_t total,
                     const std::vector<IdRange>& parts) -> Status {
      std::vector<int64_t> count;
      std::vector<IdRange> whole;
      const std::string where = src + ": field '" + key + "'";
      DGLD_RETURN_IF_ERROR(tile_type_ranges(where, names, map, c.num_parts, total, &count, &whole));
      if (whole != parts) return invalid_argument(where + ": the per-type ranges do not tile the partitions' ranges");
      return Status::ok();
    };
    DGLD_RETURN_IF_ERROR(tiled("node_map", t.ntypes, t.ntype_map, c.num_nodes, c.node_map));
    DGLD_RETURN_IF_ERROR(tiled("edge_map", t.etypes, t.etype_map, c.num_edges, c.edge_map));
  }
  if (static_cast<int>(c.parts.size()) != c.num_parts) {
    return invalid_argument(src + ": expected part-0 .. part-" + std::to_string(c.num_parts - 1));
  }
  for (int i = 0; i < c.num_parts; ++i) {
    const auto& p = c.parts[i];
    if (p.part_graph.empty() || p.node_feats.empty() || p.edge_feats.empty()) {
      return invalid_argument(src + ": field 'part-" + std::to_string(i) +
                              "' needs non-empty node_feats, edge_feats and part_graph");
    }
  }
  if (c.num_trainers_per_machine < 1) {
    return invalid_argument(src + ": field 'dgld.num_trainers_per_machine' must be >= 1");
  }
  return validate_link_split(c, src);
}

Result<PartitionConfig> parse_part_config(const std::string& text, const std::string& src,
                                          const std::filesystem::path& base_dir) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number that overflows
    return invalid_argument(src + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return invalid_argument(src + ": expected a JSON object at the top level");

  PartitionConfig c;
  c.base_dir = base_dir;
  DGLD_RETURN_IF_ERROR(get_field(root, src, "graph_name", &c.graph_name));
  DGLD_RETURN_IF_ERROR(get_field(root, src, "num_nodes", &c.num_nodes));
  DGLD_RETURN_IF_ERROR(get_field(root, src, "num_edges", &c.num_edges));
  DGLD_RETURN_IF_ERROR(get_field(root, src, "part_method", &c.part_method));
  DGLD_RETURN_IF_ERROR(get_field(root, src, "num_parts", &c.num_parts));
  if (root.contains("halo_hops")) DGLD_RETURN_IF_ERROR(get_field(root, src, "halo_hops", &c.halo_hops));
  if (c.num_parts < 1 || c.num_parts > 65536) {
    return invalid_argument(src + ": field 'num_parts' must be in 1..65536, got " +
                            std::to_string(c.num_parts));
  }
  bool hetero = false;
  if (auto d = root.find("dgld"); d != root.end() && d->is_object() && d->contains("heterogeneous")) {
    DGLD_RETURN_IF_ERROR(get_field(*d, src + ": field 'dgld'", "heterogeneous", &hetero));
  } else {
    // DGL's own config of a typed graph: one node_map / edge_map entry per type.
    auto several = [&](const char* key) {
      auto it = root.find(key);
      return it != root.end() && it->is_object() && it->size() > 1;
    };
    hetero = several("node_map") || several("edge_map");
  }
  if (hetero) {
    DGLD_RETURN_IF_ERROR(parse_hetero(root, src, &c));
  } else {
    DGLD_RETURN_IF_ERROR(parse_id_map(root, src, "node_map", c.num_parts, c.num_nodes, &c.ntype, &c.node_map));
    DGLD_RETURN_IF_ERROR(parse_type_ids(root, src, "ntypes", c.ntype));
  }
  if (!hetero) {
    DGLD_RETURN_IF_ERROR(parse_id_map(root, src, "edge_map", c.num_parts, c.num_edges, &c.etype, &c.edge_map));
    DGLD_RETURN_IF_ERROR(parse_type_ids(root, src, "etypes", c.etype));
  }
  for (int i = 0; i < c.num_parts; ++i) {
    const std::string key = "part-" + std::to_string(i);
    auto it = root.find(key);
    if (it == root.end()) return invalid_argument(src + ": missing field '" + key + "'");
    if (!it->is_object()) return invalid_argument(src + ": field '" + key + "': expected an object");
    PartitionFiles f;
    const std::string where = src + ": field '" + key + "'";
    DGLD_RETURN_IF_ERROR(get_field(*it, where, "node_feats", &f.node_feats));
    DGLD_RETURN_IF_ERROR(get_field(*it, where, "edge_feats", &f.edge_feats));
    DGLD_RETURN_IF_ERROR(get_field(*it, where, "part_graph", &f.part_graph));
    if (it->contains("link_split")) DGLD_RETURN_IF_ERROR(get_field(*it, where, "link_split", &f.link_split));
    c.parts.push_back(std::move(f));
  }
  if (auto it = root.find("dgld"); it != root.end()) {
    if (!it->is_object()) return invalid_argument(src + ": field 'dgld': expected an object");
    const std::string where = src + ": field 'dgld'";
    DGLD_RETURN_IF_ERROR(get_field(*it, where, "format_version", &c.format_version));
    if (c.format_version != 1) {
      return invalid_argument(where + ": format_version " + std::to_string(c.format_version) +
                              " is not supported by this dgld (supports 1)");
    }
    if (it->contains("num_trainers_per_machine")) {
      DGLD_RETURN_IF_ERROR(get_field(*it, where, "num_trainers_per_machine", &c.num_trainers_per_machine));
    }
    if (it->contains("graph_formats")) {
      DGLD_RETURN_IF_ERROR(get_field(*it, where, "graph_formats", &c.graph_formats));
      for (const std::string& f : c.graph_formats) {
        if (f != "coo" && f != "csr" && f != "csc") {
          return invalid_argument(where + ".'graph_formats': expected \"coo\", \"csr\" or \"csc\", got \"" + f + "\"");
        }
      }
    }
    if (auto ls = it->find("link_split"); ls != it->end()) {
      DGLD_RETURN_IF_ERROR(parse_link_split(*ls, where + ".'link_split'", &c.link_split));
    }
  }
  DGLD_RETURN_IF_ERROR(validate_part_config(c, src));
  return c;
}

Result<PartitionConfig> load_part_config(const std::filesystem::path& path) {
  DGLD_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_part_config(text, path.string(), path.parent_path());
}

std::string part_config_to_json(const PartitionConfig& c) {
  auto ranges = [](const std::vector<IdRange>& m) {
    json a = json::array();
    for (const auto& r : m) a.push_back({r.start, r.end});
    return a;
  };
  json root;
  root["graph_name"] = c.graph_name;
  root["num_nodes"] = c.num_nodes;
  root["num_edges"] = c.num_edges;
  root["part_method"] = c.part_method;
  root["num_parts"] = c.num_parts;
  root["halo_hops"] = c.halo_hops;
  const GraphTypeInfo& t = c.types;
  if (t.present()) {
    json nm = json::object(), nt = json::object(), em = json::object(), et = json::object();
    for (int i = 0; i < t.num_ntypes(); ++i) {
      nm[t.ntypes[i]] = ranges(t.ntype_map[i]);
      nt[t.ntypes[i]] = i;
    }
    for (int i = 0; i < t.num_etypes(); ++i) {
      em[t.etypes[i]] = ranges(t.etype_map[i]);
      et[t.etypes[i]] = i;
    }
    root["node_map"] = std::move(nm);
    root["edge_map"] = std::move(em);
    root["ntypes"] = std::move(nt);
    root["etypes"] = std::move(et);
  } else {
    root["edge_map"] = {{c.etype, ranges(c.edge_map)}};
    root["node_map"] = {{c.ntype, ranges(c.node_map)}};
    root["ntypes"] = {{c.ntype, 0}};
    root["etypes"] = {{c.etype, 0}};
  }
  for (size_t i = 0; i < c.parts.size(); ++i) {
    json& part = root["part-" + std::to_string(i)];
    part = {{"node_feats", c.parts[i].node_feats},
            {"edge_feats", c.parts[i].edge_feats},
            {"part_graph", c.parts[i].part_graph}};
    if (!c.parts[i].link_split.empty()) part["link_split"] = c.parts[i].link_split;
  }
  root["dgld"] = {{"format_version", c.format_version},
                  {"num_trainers_per_machine", c.num_trainers_per_machine}};
  if (!c.graph_formats.empty()) root["dgld"]["graph_formats"] = c.graph_formats;
  if (t.present()) {
    root["dgld"]["heterogeneous"] = true;
    root["dgld"]["etype_counts"] = t.etype_count;
    if (!t.target_ntype.empty()) root["dgld"]["target_ntype"] = t.target_ntype;
  }
  if (c.link_split.present) {
    const LinkSplitInfo& l = c.link_split;
    json ls = {{"source", l.source},
               {"seed", l.seed},
               {"num_negatives", l.num_negatives},
               {"num_train", l.num_train},
               {"num_valid", l.num_valid},
               {"num_test", l.num_test},
               {"symmetric", l.symmetric}};
    if (!l.fractions.empty()) ls["fractions"] = l.fractions;
    root["dgld"]["link_split"] = std::move(ls);
  }
  return root.dump(2) + "\n";
}

}  // namespace dgld
