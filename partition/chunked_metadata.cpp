#include "partition/chunked.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>

#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/logging.h"

namespace dgld {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;


namespace {

std::string key_ref(const std::string& s) { return "[\"" + s + "\"]"; }

// A short rendering of a JSON value for messages.
std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Chunk sizes: root[key] must be [[s0, s1, ...]] (one list, for the one type).
Status parse_sizes(const json& root, const std::string& file, const char* key, const char* what,
                   std::vector<int64_t>* out) {
  auto it = root.find(key);
  if (it == root.end()) return invalid_argument(file + ": missing field '" + key + "'");
  const std::string where = file + ": field '" + key + "'";
  if (!it->is_array()) {
    return invalid_argument(where + ": expected an array with one list of chunk sizes per " + what + " type, got " +
                            shown(*it));
  }
  if (it->size() != 1) {
    return invalid_argument(where + ": expected one list of chunk sizes (one " + what + " type), got " +
                            std::to_string(it->size()));
  }
  const json& sizes = (*it)[0];
  if (!sizes.is_array() || sizes.empty()) {
    return invalid_argument(where + "[0]: expected a non-empty array of chunk sizes, got " + shown(sizes));
  }
  out->clear();
  for (size_t i = 0; i < sizes.size(); ++i) {
    const json& s = sizes[i];
    if (!s.is_number_integer() || (!s.is_number_unsigned() && s.get<int64_t>() < 0) ||
        (s.is_number_unsigned() && s.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      return invalid_argument(where + "[0][" + std::to_string(i) + "]: expected a non-negative integer, got " +
                              shown(s));
    }
    out->push_back(s.get<int64_t>());
  }
  return Status::ok();
}

// A list of `count` file names at obj["data"]; `where` names obj.
Status parse_files(const json& obj, const std::string& where, size_t count, const std::string& per,
                   std::vector<std::string>* out) {
  auto it = obj.find("data");
  if (it == obj.end()) return invalid_argument(where + ": missing field 'data'");
  if (!it->is_array()) return invalid_argument(where + "[\"data\"]: expected an array of file names, got " + shown(*it));
  if (it->size() != count) {
    return invalid_argument(where + "[\"data\"]: expected " + std::to_string(count) + " files (one per " + per +
                            "), got " + std::to_string(it->size()));
  }
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& f = (*it)[i];
    if (!f.is_string() || f.get<std::string>().empty()) {
      return invalid_argument(where + "[\"data\"][" + std::to_string(i) + "]: expected a file name, got " + shown(f));
    }
    out->push_back(f.get<std::string>());
  }
  return Status::ok();
}

// obj["format"]["name"], which must be `expected`.
Status check_format(const json& obj, const std::string& where, const std::string& expected, const json** format) {
  auto it = obj.find("format");
  if (it == obj.end()) return invalid_argument(where + ": missing field 'format'");
  if (!it->is_object()) {
    return invalid_argument(where + "[\"format\"]: expected an object {\"name\": \"" + expected + "\"}, got " +
                            shown(*it));
  }
  auto name = it->find("name");
  if (name == it->end()) return invalid_argument(where + "[\"format\"]: missing field 'name'");
  if (!name->is_string() || name->get<std::string>() != expected) {
    return invalid_argument(where + "[\"format\"][\"name\"]: unsupported format " + shown(*name) +
                            " (dgl-partition reads \"" + expected + "\" here)");
  }
  *format = &*it;
  return Status::ok();
}

// One type name from root[key], which must be an array of one string.
Status parse_single_type(const json& root, const std::string& file, const char* key, std::string* out) {
  auto it = root.find(key);
  if (it == root.end()) return invalid_argument(file + ": missing field '" + key + "'");
  const std::string where = file + ": field '" + key + "'";
  if (!it->is_array() || it->empty()) return invalid_argument(where + ": expected an array of type names, got " + shown(*it));
  if (it->size() > 1) {
    return invalid_argument(where + ": " + std::to_string(it->size()) + " types " + shown(*it) +
                            ": heterogeneous chunked graphs are not supported yet (one node type and one edge type)");
  }
  if (!(*it)[0].is_string()) return invalid_argument(where + "[0]: expected a type name, got " + shown((*it)[0]));
  *out = (*it)[0].get<std::string>();
  return Status::ok();
}

}  // namespace

int64_t ChunkedGraph::num_nodes() const {
  return std::accumulate(node_chunk_sizes.begin(), node_chunk_sizes.end(), int64_t{0});
}
int64_t ChunkedGraph::num_edges() const {
  return std::accumulate(edge_chunk_sizes.begin(), edge_chunk_sizes.end(), int64_t{0});
}
int64_t ChunkedGraph::node_chunk_start(int i) const {
  return std::accumulate(node_chunk_sizes.begin(), node_chunk_sizes.begin() + i, int64_t{0});
}
int64_t ChunkedGraph::edge_chunk_start(int i) const {
  return std::accumulate(edge_chunk_sizes.begin(), edge_chunk_sizes.begin() + i, int64_t{0});
}

Result<ChunkedGraph> read_chunked_metadata(const fs::path& dir) {
  ChunkedGraph g;
  g.dir = dir;
  const fs::path path = dir / "metadata.json";
  const std::string file = path.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found("chunked graph directory " + dir.string() + " does not exist");
  if (!fs::exists(path, ec)) return not_found("missing " + file + " (the chunked graph's metadata)");
  DGLD_ASSIGN_OR_RETURN(std::string text, read_file(path));
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    return invalid_argument(file + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return invalid_argument(file + ": expected a JSON object, got " + std::string(root.type_name()));

  auto name = root.find("graph_name");
  if (name == root.end()) return invalid_argument(file + ": missing field 'graph_name'");
  if (!name->is_string()) return invalid_argument(file + ": field 'graph_name': expected a string, got " + shown(*name));
  g.graph_name = name->get<std::string>();

  std::string ntype, etype;
  DGLD_RETURN_IF_ERROR(parse_single_type(root, file, "node_type", &ntype));
  DGLD_RETURN_IF_ERROR(parse_single_type(root, file, "edge_type", &etype));
  {
    const size_t a = etype.find(':'), b = etype.rfind(':');
    if (a == std::string::npos || a == b || etype.substr(0, a) != ntype || etype.substr(b + 1) != ntype) {
      return invalid_argument(file + ": field 'edge_type'[0]: expected \"" + ntype + ":<relation>:" + ntype +
                              "\" (source and destination type '" + ntype + "'), got \"" + etype + "\"");
    }
  }
  DGLD_RETURN_IF_ERROR(parse_sizes(root, file, "num_nodes_per_chunk", "node", &g.node_chunk_sizes));
  DGLD_RETURN_IF_ERROR(parse_sizes(root, file, "num_edges_per_chunk", "edge", &g.edge_chunk_sizes));

  // edges: {"<etype>": {"format": {"name": "csv", "delimiter": " "}, "data": [...]}}
  auto edges = root.find("edges");
  if (edges == root.end()) return invalid_argument(file + ": missing field 'edges'");
  if (!edges->is_object()) {
    return invalid_argument(file + ": field 'edges': expected an object {\"" + etype + "\": {...}}, got " + shown(*edges));
  }
  auto e = edges->find(etype);
  if (e == edges->end()) return invalid_argument(file + ": field 'edges': missing field '" + etype + "'");
  for (auto it = edges->begin(); it != edges->end(); ++it) {
    if (it.key() != etype) {
      return invalid_argument(file + ": field 'edges': edge type '" + it.key() + "' is not in edge_type (heterogeneous "
                              "chunked graphs are not supported yet)");
    }
  }
  const std::string ewhere = file + ": field 'edges'" + key_ref(etype);
  if (!e->is_object()) return invalid_argument(ewhere + ": expected an object, got " + shown(*e));
  const json* format = nullptr;
  DGLD_RETURN_IF_ERROR(check_format(*e, ewhere, "csv", &format));
  if (auto d = format->find("delimiter"); d != format->end()) {
    const std::string s = d->is_string() ? d->get<std::string>() : std::string();
    if (s != " " && s != "," && s != "\t") {
      return invalid_argument(ewhere + "[\"format\"][\"delimiter\"]: expected \" \", \",\" or \"\\t\", got " + shown(*d));
    }
    g.delimiter = s[0];
  }
  DGLD_RETURN_IF_ERROR(parse_files(*e, ewhere, g.edge_chunk_sizes.size(),
                                   "edge chunk, as num_edges_per_chunk[0] lists", &g.edge_files));

  // node_data: {"<ntype>": {"<name>": {"format": {"name": "numpy"}, "data": [...]}}}
  if (auto nd = root.find("node_data"); nd != root.end() && !nd->is_null()) {
    if (!nd->is_object()) {
      return invalid_argument(file + ": field 'node_data': expected an object {\"" + ntype + "\": {...}}, got " +
                              shown(*nd));
    }
    for (auto it = nd->begin(); it != nd->end(); ++it) {
      if (it.key() != ntype) {
        return invalid_argument(file + ": field 'node_data': node type '" + it.key() + "' is not in node_type");
      }
      const std::string twhere = file + ": field 'node_data'" + key_ref(ntype);
      if (!it->is_object()) return invalid_argument(twhere + ": expected an object of arrays, got " + shown(*it));
      for (auto a = it->begin(); a != it->end(); ++a) {
        const std::string awhere = twhere + key_ref(a.key());
        if (!a->is_object()) return invalid_argument(awhere + ": expected an object, got " + shown(*a));
        const json* f = nullptr;
        DGLD_RETURN_IF_ERROR(check_format(*a, awhere, "numpy", &f));
        ChunkedNodeData d;
        d.name = a.key();
        DGLD_RETURN_IF_ERROR(parse_files(*a, awhere, g.node_chunk_sizes.size(),
                                         "node chunk, as num_nodes_per_chunk[0] lists", &d.files));
        g.node_data.push_back(std::move(d));
      }
    }
  }
  if (auto ed = root.find("edge_data"); ed != root.end() && !ed->is_null()) {
    bool any = false;
    if (ed->is_object()) {
      for (const auto& t : *ed) any = any || !(t.is_object() && t.empty());
    } else {
      any = true;
    }
    if (any) logger("partition")->info("{}: ignoring field 'edge_data' (edge data is not read yet)", file);
  }
  return g;
}

}  // namespace dgld
