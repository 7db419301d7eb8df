// Fuzz target: the partition file loader (common/partition/): open_partition
// over a fuzzed graph file, node feature file and edge feature file of a tiny
// two-partition graph (input layout: fuzz_support.h). With kFixChecksums the
// harness recomputes the header and array CRCs first, so mutations get past
// the checksums to the checks behind them.
//
// Beyond "no crash", a partition the loader accepts keeps its promises
// (partition.h): every array has the size meta says, indptr arrays are
// monotone and in range, and, with verify_checksums, every index and edge id
// is in range; the harness walks every row the way the graph-server does and
// samples neighbours on it.

#include <cstring>
#include <fstream>

#include "common/partition/array_file.h"
#include "common/partition/partition.h"
#include "common/sampling/neighbor_sampling.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/fuzz_target.h"

using namespace dgld;

namespace {

struct State {
  fuzz::ScratchDir dir{"dgld-fuzz-partition"};
  PartitionConfig config;
};
State* state = nullptr;

uint64_t get_u(const std::string& b, size_t at, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
  return v;
}
void put_u32(std::string& b, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}

// Recomputes every array CRC and the header CRC that lie inside the file
// (layout: docs/partition-format.md).
void fix_checksums(std::string& b) {
  if (b.size() < 64) return;
  const uint64_t header_bytes = get_u(b, 16, 4), num_arrays = get_u(b, 20, 4);
  for (uint64_t i = 0; i < num_arrays && 64 + (i + 1) * 128 <= b.size(); ++i) {
    const size_t e = 64 + i * 128;
    const uint64_t off = get_u(b, e + 104, 8), len = get_u(b, e + 112, 8);
    if (off <= b.size() && len <= b.size() - off) put_u32(b, e + 120, crc32_update(0, b.data() + off, len));
  }
  if (header_bytes >= 36 && header_bytes <= b.size()) {
    put_u32(b, 32, 0);
    put_u32(b, 32, crc32_update(0, b.data(), header_bytes));
  }
}

void write(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

volatile uint64_t sink;

void touch(const void* p, size_t n) {
  uint64_t h = 0;
  const auto* c = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h += c[i];
  sink = sink + h;
}

// Walks the CSC (or CSR) rows [0, rows) as the servers do.
void walk(const AdjacencyView& adj, int64_t rows, int64_t num_local, bool indices_checked) {
  FUZZ_CHECK(adj.indptr.size() == static_cast<size_t>(rows) + 1, "indptr size");
  FUZZ_CHECK(adj.indices.size() == adj.eids.size(), "indices and eids differ in size");
  for (int64_t v = 0; v < rows; ++v) {
    FUZZ_CHECK(adj.indptr[v] >= 0 && adj.indptr[v] <= adj.indptr[v + 1] &&
                   adj.indptr[v + 1] <= static_cast<int64_t>(adj.indices.size()),
               "indptr out of range");
    for (int64_t k = adj.indptr[v]; k < adj.indptr[v + 1]; ++k) {
      if (indices_checked) FUZZ_CHECK(adj.indices[k] >= 0 && adj.indices[k] < num_local, "index out of range");
      sink = sink + static_cast<uint64_t>(adj.indices[k]) + static_cast<uint64_t>(adj.eids[k]);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  state = new State();
  auto json = fuzz::write_tiny_partition(state->dir.path() / "src");
  FUZZ_CHECK(json.is_ok(), json.status().message().c_str());
  auto c = load_part_config(*json);
  FUZZ_CHECK(c.is_ok(), c.status().message().c_str());
  state->config = *c;
  // The fuzzed files go to in/ under the names the config gives.
  state->config.base_dir = state->dir.path() / "in";
  for (const auto& p : state->config.parts) {
    std::filesystem::create_directories(state->config.resolve(p.part_graph).parent_path());
  }
  fuzz::quiet_logging();
  std::atexit([] {  // removes the scratch directory on a normal exit
    delete state;
    state = nullptr;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (state == nullptr) LLVMFuzzerInitialize(nullptr, nullptr);
  fuzz::PartitionInput in = fuzz::unpack_partition_input({data, size});
  if (in.flags & fuzz::kFixChecksums) {
    fix_checksums(in.graph);
    fix_checksums(in.node_feats);
    fix_checksums(in.edge_feats);
  }
  const int part = (in.flags & fuzz::kPartitionOne) ? 1 : 0;
  const bool verify = in.flags & fuzz::kVerifyChecksums;
  const PartitionConfig& config = state->config;
  const PartitionFiles& files = config.parts[part];
  write(config.resolve(files.part_graph), in.graph);
  write(config.resolve(files.node_feats), in.node_feats);
  write(config.resolve(files.edge_feats), in.edge_feats);

  auto p = open_partition(config, part, verify);
  if (!p.is_ok()) {
    FUZZ_CHECK(!p.status().message().empty(), "an error without a message");
    return 0;
  }
  const MappedPartition& P = **p;
  const int64_t ni = P.num_inner_nodes(), nl = P.num_local_nodes();
  FUZZ_CHECK(ni == config.node_map[part].size() && P.num_inner_edges() == config.edge_map[part].size(),
             "inner counts differ from the config");
  FUZZ_CHECK(nl >= ni && P.num_local_edges() >= P.num_inner_edges(), "local counts below inner counts");
  FUZZ_CHECK(P.node_global_ids().size() == static_cast<size_t>(nl) && P.inner_node().size() == static_cast<size_t>(nl) &&
                 P.node_owner().size() == static_cast<size_t>(nl) && P.orig_node_ids().size() == static_cast<size_t>(ni),
             "per-node array sizes");
  FUZZ_CHECK(P.inner_edge().size() == static_cast<size_t>(P.num_local_edges()) &&
                 P.orig_edge_ids().size() == static_cast<size_t>(P.num_inner_edges()),
             "per-edge array sizes");
  walk(P.in_edges(), nl, nl, verify);
  walk(P.out_edges(), ni, nl, verify);
  FUZZ_CHECK(P.in_edges().indptr[ni] == P.num_inner_edges(), "inner in-edges do not end at num_inner_edges");
  for (const auto* ts : {&P.node_tensors(), &P.edge_tensors()}) {
    for (const TensorView& t : *ts) {
      touch(t.data, t.num_bytes);
      sink = sink + static_cast<uint64_t>(t.row_size());
    }
  }
  touch(P.trainer_ids().data(), P.trainer_ids().size_bytes());
  if (verify) {
    // What a main graph-server does with a verified partition: map sampled
    // local ids to global ids over the in-edges of its inner nodes.
    const auto& in_edges = P.in_edges();
    const auto ne = static_cast<size_t>(in_edges.indptr[ni]);
    AdjacencyView inner{in_edges.indptr.first(static_cast<size_t>(ni) + 1), in_edges.indices.first(ne),
                        in_edges.eids.first(ne)};
    std::vector<int64_t> seeds;
    for (int64_t v = 0; v < ni; ++v) seeds.push_back(v);
    SampleOptions so;
    so.fanout = 3;
    auto edges = sample_neighbors(inner, seeds, so);
    FUZZ_CHECK(edges.is_ok(), edges.status().message().c_str());
    FUZZ_CHECK(map_to_global(edges->src, P.node_global_ids()).is_ok(), "sampled a source with no global id");
    for (int64_t e : edges->eid) FUZZ_CHECK(e >= 0 && e < config.num_edges, "sampled an edge id out of range");
  }
  return 0;
}
