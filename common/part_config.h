#pragma once
// The partition config `<graph_name>.json` that dgl-partition writes and every
// process reads. Same keys and meanings as DGL (see docs/formats.md):
//   graph_name, num_nodes, num_edges, part_method, num_parts, halo_hops,
//   node_map {"_N": [[start,end),...]}, edge_map {"_N:_E:_N": [...]},
//   ntypes {"_N":0}, etypes {"_N:_E:_N":0},
//   part-<i> {node_feats, edge_feats, part_graph}  (paths relative to the JSON).
// dgld adds one object, "dgld", with its own fields (format version, trainer split,
// link split), and "link_split" to part-<i> when the graph has a link split;
// DGL tools ignore unknown keys, so the file stays readable by them.
// A heterogeneous graph (dgld.heterogeneous = true, docs/heterogeneous.md) is one
// homogeneous graph whose nodes are ordered partition-major, then by node type:
// node_map has one key per node type, giving the homogeneous id range of that
// type's nodes in each partition (DGL's layout); edges likewise: partition-major,
// then by edge type, edge_map one key per canonical edge type; each edge's type is
// also stored in the partition graph (in/etype).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace dgld {

struct IdRange {
  int64_t start = 0;  // inclusive
  int64_t end = 0;    // exclusive
  int64_t size() const { return end - start; }
  bool operator==(const IdRange&) const = default;
};

// Files of one partition. Relative paths as written in the JSON.
struct PartitionFiles {
  std::string node_feats;
  std::string edge_feats;
  std::string part_graph;
  std::string link_split;  // held-out edges (common/partition/link_split.h); empty when absent
};

// A link-prediction edge split made by dgl-partition ("dgld"."link_split"). The
// training edges stay in the graph, marked by the edge tensor "<etype>/train_mask";
// the validation and test edges are removed from it and stored per partition (by
// the partition of their destination) in PartitionFiles::link_split.
struct LinkSplitInfo {
  bool present = false;
  std::string source;             // "random" (--link-split) or "ogb:<split name>"
  std::vector<double> fractions;  // train, valid, test (random only, else empty)
  uint64_t seed = 0;              // --seed (shuffle and drawn negatives)
  int64_t num_negatives = 0;      // negative destinations per valid/test edge
  int64_t num_train = 0;          // edges marked in the train mask
  int64_t num_valid = 0, num_test = 0;
  bool symmetric = true;          // undirected edges: held out in both directions
};

// The types of a heterogeneous graph ("dgld"."heterogeneous": true). Homogeneous
// graphs have none (ntypes empty) and use PartitionConfig::ntype / etype.
struct GraphTypeInfo {
  std::vector<std::string> ntypes;              // by type id (the "ntypes" values)
  std::vector<std::string> etypes;              // canonical "src:rel:dst", by type id
  std::vector<int32_t> etype_src, etype_dst;    // node type ids of each edge type's ends
  std::vector<std::vector<IdRange>> ntype_map;  // [ntype][part]: homogeneous ids
  std::vector<std::vector<IdRange>> etype_map;  // [etype][part]: homogeneous edge ids
  std::vector<int64_t> ntype_count;             // nodes per type over all partitions
  std::vector<int64_t> etype_count;             // edges per type ("dgld"."etype_counts")
  std::string target_ntype;                     // the labelled type ("dgld"."target_ntype"), may be empty

  bool present() const { return !ntypes.empty(); }
  int num_ntypes() const { return static_cast<int>(ntypes.size()); }
  int num_etypes() const { return static_cast<int>(etypes.size()); }
  // Type id of a name, or -1.
  int ntype_id(const std::string& name) const;
  int etype_id(const std::string& canonical) const;
  // The node type `name` names; invalid_argument naming the known types otherwise.
  Result<int> resolve_ntype(const std::string& name) const;
  // The edge type `name` names, in DGL's forms: a canonical "src:rel:dst", or
  // a relation name that one edge type has. invalid_argument for an unknown
  // name, and for a relation name several edge types share (naming them).
  Result<int> resolve_etype(const std::string& name) const;
};

struct PartitionConfig {
  std::string graph_name;
  int64_t num_nodes = 0;
  int64_t num_edges = 0;
  std::string part_method;  // "metis", "random" or "ptscotch" (dgl-partition --distributed)
  int num_parts = 0;
  int halo_hops = 1;
  std::string ntype = "_N";           // the single node type's name
  std::string etype = "_N:_E:_N";     // the single edge type's canonical name
  std::vector<IdRange> node_map;      // [num_parts], contiguous, covering [0, num_nodes)
  std::vector<IdRange> edge_map;      // [num_parts], contiguous, covering [0, num_edges)
  std::vector<PartitionFiles> parts;  // [num_parts]
  // dgld extensions (the "dgld" object).
  int format_version = 1;
  int num_trainers_per_machine = 1;
  LinkSplitInfo link_split;
  GraphTypeInfo types;  // heterogeneous graphs only
  // DGL's graph_formats the graph was partitioned with ("coo", "csr", "csc";
  // "dgld"."graph_formats"): the sparse formats load_partition creates. Empty:
  // none named (COO).
  std::vector<std::string> graph_formats;

  // Directory holding the JSON; relative paths are resolved against it.
  std::filesystem::path base_dir;
  std::filesystem::path resolve(const std::string& relative) const { return base_dir / relative; }
};

// The node type whose rows a node tensor holds: on a heterogeneous graph a tensor
// named "<ntype>/..." has one row per node of that type (DGL's per-type node
// data); any other name (and every tensor of a homogeneous graph) one row per
// node. Returns the type id, or -1 for "every node".
int node_tensor_type(const PartitionConfig& config, const std::string& name);
// The homogeneous ids whose rows partition `part` holds for that tensor.
IdRange node_tensor_range(const PartitionConfig& config, int part, const std::string& name);
// The same for edge tensors: "<canonical etype>/..." has one row per edge of that
// type (DGL's per-type edge data), in edge id order.
int edge_tensor_type(const PartitionConfig& config, const std::string& name);
IdRange edge_tensor_range(const PartitionConfig& config, int part, const std::string& name);
// Bytes of partition `part`'s files (graph, node and edge data); files that
// cannot be read count 0.
int64_t partition_file_bytes(const PartitionConfig& config, int part);

// Parses and validates a config. `source` names the text in error messages
// (normally the file path). Every error names the offending field.
Result<PartitionConfig> parse_part_config(const std::string& text, const std::string& source,
                                          const std::filesystem::path& base_dir);
// Reads `path` and parses it; base_dir is the file's directory.
Result<PartitionConfig> load_part_config(const std::filesystem::path& path);
// Serialises to DGL's JSON layout (pretty-printed).
std::string part_config_to_json(const PartitionConfig& config);
// Checks the invariants that parse_part_config enforces (used before writing too).
Status validate_part_config(const PartitionConfig& config, const std::string& source);

}  // namespace dgld
