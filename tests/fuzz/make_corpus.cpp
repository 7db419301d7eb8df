// Writes the seed corpora of the fuzz targets: valid inputs, built with the
// project's own encoders from the same tiny generated graph the targets load.
//
//   fuzz_make_corpus OUTDIR     (scripts/fuzz.sh --make-corpus: OUTDIR = tests/fuzz/corpus)
//
// Writes OUTDIR/<target>/<name> for the seeds below (deterministic: the same
// bytes on every run), and the crafted regression inputs of findings
// (regression-*). Regression inputs that libFuzzer wrote are copied beside
// them by hand (regression-*-libfuzzer); this program leaves those alone.

#include <fstream>
#include <iostream>
#include <string>

#include "common/net/frame.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "common/file_util.h"
#include "schemas/cluster_generated.h"
#include "schemas/graph_generated.h"
#include "schemas/kvstore_generated.h"
#include "schemas/rpc_generated.h"
#include "tests/fuzz/fuzz_support.h"

using namespace dgld;
using namespace dgld::fuzz;
using K = fbs::MessageKind;
namespace fs = std::filesystem;

namespace {

fs::path out_root;
int written = 0;

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(out_root / target);
  std::ofstream(out_root / target / name, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ++written;
}
void put(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  put(target, name, std::string(bytes.begin(), bytes.end()));
}

std::string read_all(const fs::path& p) {
  auto r = read_file(p);
  if (!r.is_ok()) {
    std::cerr << r.status().message() << "\n";
    std::exit(1);
  }
  return *r;
}

// ---- frame ------------------------------------------------------------------

void frame_corpus() {
  uint64_t id = 1;
  {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fbs::CreatePing(fbb, 123456789));
    std::vector<uint8_t> out;
    append_frame(out, static_cast<uint16_t>(K::Ping), 0, id++, fbb);
    put("frame", "ping", out);
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fbs::CreateKvPull(fbb, fbb.CreateString("_N/features")));
    std::vector<uint8_t> out;
    append_frame(out, static_cast<uint16_t>(K::KvPull), 0, id++, fbb, {id_blob({0, 1, 5})});
    put("frame", "kvpull-ids", out);
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fbs::CreateErrorReply(fbb, static_cast<int>(StatusCode::not_found), fbb.CreateString("no tensor")));
    std::vector<uint8_t> out;
    append_frame(out, static_cast<uint16_t>(K::ErrorReply), net::kFlagResponse | net::kFlagError, 7, fbb);
    put("frame", "error-reply", out);
  }
  {
    // Three frames in one stream: a one-way push with two blobs, an empty
    // blob, and a response.
    std::vector<uint8_t> out;
    flatbuffers::FlatBufferBuilder a;
    a.Finish(fbs::CreateKvPush(a, a.CreateString("emb"), 5));
    append_frame(out, static_cast<uint16_t>(K::KvPush), net::kFlagOneWay, id++, a,
                 {id_blob({3}), std::vector<uint8_t>(16, 0x3f)});
    flatbuffers::FlatBufferBuilder b;
    b.Finish(fbs::CreateDegrees(b, true));
    append_frame(out, static_cast<uint16_t>(K::Degrees), 0, id++, b, {{}});
    flatbuffers::FlatBufferBuilder c;
    c.Finish(fbs::CreatePong(c, 1));
    append_frame(out, static_cast<uint16_t>(K::Pong), net::kFlagResponse, 1, c);
    put("frame", "stream-of-three", out);
  }
}

// ---- ip_config ------------------------------------------------------------

void ip_config_corpus() {
  put("ip_config", "one-machine", std::string("127.0.0.1\n"));
  put("ip_config", "ports-and-comments",
      std::string("# machines of the job\n10.0.0.1 30050\n10.0.0.2 30050  # second\n\nnode-3.cluster 40000\n"));
  put("ip_config", "simulated-machines", std::string("127.0.0.1 30050\n127.0.0.1 30060\n127.0.0.1 30070\n"));
  put("ip_config", "crlf-and-tabs", std::string("host_a\t30050\r\nhost-b 65535\r\n"));
}

// ---- part_config and partition ---------------------------------------------

// Table entry of array `name` in an array file (docs/partition-format.md),
// or npos.
size_t entry_of(const std::string& file, const std::string& name) {
  const uint32_t n = static_cast<uint32_t>(static_cast<uint8_t>(file[20])) |
                     static_cast<uint32_t>(static_cast<uint8_t>(file[21])) << 8;
  for (size_t i = 0; i < n; ++i) {
    const size_t e = 64 + i * 128;
    if (std::string(file.c_str() + e) == name) return e;
  }
  return std::string::npos;
}
void put_le(std::string& b, size_t at, uint64_t v, size_t width) {
  for (size_t i = 0; i < width; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}
uint64_t get_le(const std::string& b, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
  return v;
}

// Partitions crafted to reach the loader bugs found while fuzzing (checksums
// are fixed by the target: kFixChecksums).
void partition_regressions(const PartitionConfig& c) {
  PartitionInput base;
  base.graph = read_all(c.resolve(c.parts[0].part_graph));
  base.node_feats = read_all(c.resolve(c.parts[0].node_feats));
  base.edge_feats = read_all(c.resolve(c.parts[0].edge_feats));
  base.flags = kVerifyChecksums | kFixChecksums;
  // An array of shape [n, 0] has n rows and no elements: meta [8, 0] was
  // read as 8 values past its (empty) span.
  for (const char* name : {"meta", "node/global_id", "in/indptr"}) {
    PartitionInput in = base;
    const size_t e = entry_of(in.graph, name);
    put_le(in.graph, e + 68, 2, 4);   // ndim
    put_le(in.graph, e + 80, 0, 8);   // shape[1]
    put_le(in.graph, e + 112, 0, 8);  // length
    put("partition", std::string("regression-2d-empty-") + (name[0] == 'm' ? "meta" : name[0] == 'n' ? "global-id" : "indptr"),
        pack_partition_input(in));
  }
  {
    // A zero dim hides trailing dims whose product overflows the row size.
    PartitionInput in = base;
    const size_t e = entry_of(in.node_feats, "_N/features");
    put_le(in.node_feats, e + 68, 4, 4);
    put_le(in.node_feats, e + 80, 0, 8);
    put_le(in.node_feats, e + 88, uint64_t{1} << 62, 8);
    put_le(in.node_feats, e + 96, uint64_t{1} << 62, 8);
    put_le(in.node_feats, e + 112, 0, 8);
    put("partition", "regression-row-size-overflow", pack_partition_input(in));
  }
  {
    // meta's local node count at INT64_MAX (n_local + 1 overflowed).
    PartitionInput in = base;
    const size_t off = get_le(in.graph, entry_of(in.graph, "meta") + 104);
    put_le(in.graph, off + 8 * part_arrays::kMetaNumLocalNodes, static_cast<uint64_t>(INT64_MAX), 8);
    put("partition", "regression-local-nodes-max", pack_partition_input(in));
  }
}

void config_and_partition_corpus(const fs::path& json) {
  const std::string text = read_all(json);
  put("part_config", "generated-2-parts", text);
  auto c = load_part_config(json);
  if (!c.is_ok()) {
    std::cerr << c.status().message() << "\n";
    std::exit(1);
  }
  PartitionConfig one = *c;
  one.num_parts = 1;
  one.node_map = {{0, c->num_nodes}};
  one.edge_map = {{0, c->num_edges}};
  one.parts.resize(1);
  one.part_method = "random";
  put("part_config", "one-part-random", part_config_to_json(one));
  // DGL's own layout: no "dgld" object, no ntypes/etypes.
  put("part_config", "dgl-minimal",
      std::string(R"({"graph_name": "g", "num_nodes": 10, "num_edges": 20, "part_method": "metis", "num_parts": 2,)"
                  R"( "halo_hops": 1, "node_map": {"_N": [[0, 4], [4, 10]]}, "edge_map": {"_N:_E:_N": [[0, 9], [9, 20]]},)"
                  R"( "part-0": {"node_feats": "part0/node_feat.dgl", "edge_feats": "part0/edge_feat.dgl",)"
                  R"( "part_graph": "part0/graph.dgl"}, "part-1": {"node_feats": "part1/node_feat.dgl",)"
                  R"( "edge_feats": "part1/edge_feat.dgl", "part_graph": "part1/graph.dgl"}})"));

  partition_regressions(*c);
  for (int p = 0; p < c->num_parts; ++p) {
    PartitionInput in;
    in.graph = read_all(c->resolve(c->parts[p].part_graph));
    in.node_feats = read_all(c->resolve(c->parts[p].node_feats));
    in.edge_feats = read_all(c->resolve(c->parts[p].edge_feats));
    const uint8_t part_flag = p == 1 ? kPartitionOne : 0;
    for (uint8_t f : {uint8_t{0}, uint8_t{kVerifyChecksums}, uint8_t{kVerifyChecksums | kFixChecksums}}) {
      in.flags = f | part_flag;
      put("partition", "part" + std::to_string(p) + "-flags" + std::to_string(f), pack_partition_input(in));
    }
  }
}

// ---- graph_server ----------------------------------------------------------

// One input: flags, then the frames `build` appends.
struct Seq {
  std::vector<uint8_t> bytes;
  uint64_t id = 1;
  explicit Seq(uint8_t flags) : bytes{flags} {}
  template <typename F>
  Seq& req(K kind, F build, std::vector<std::vector<uint8_t>> blobs = {}, uint32_t flags = 0) {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(build(fbb));
    append_frame(bytes, static_cast<uint16_t>(kind), flags, id++, fbb, blobs);
    return *this;
  }
};

// One layer's SampleNeighbors request (schemas/sampling.fbs); prob names a
// float32 edge tensor, nullptr for uniform.
flatbuffers::Offset<fbs::SampleNeighbors> sample(flatbuffers::FlatBufferBuilder& b, int64_t fanout, bool out_edges,
                                                 bool replace, const char* prob, int64_t seed) {
  const std::vector<int64_t> fanouts{fanout};
  flatbuffers::Offset<flatbuffers::String> prob_name;
  if (prob != nullptr) prob_name = b.CreateString(prob);
  const auto spec = fbs::CreateSamplingSpec(b, b.CreateVector(fanouts), 0, out_edges, replace, prob_name);
  return fbs::CreateSampleNeighbors(b, spec, seed);
}

void graph_server_corpus(const PartitionConfig& c) {
  const uint8_t reg = kRegisterFirst, m1 = 2;
  const int64_t n0 = c.node_map[0].end, e0 = c.edge_map[0].end;  // machine 0 owns [0, n0) and [0, e0)
  const int64_t n1 = c.node_map[1].start, e1 = c.edge_map[1].start;
  auto name = [](auto& b, const char* s) { return b.CreateString(s); };

  put("graph_server", "unregistered-ping-info-stats",
      Seq(0).req(K::Ping, [](auto& b) { return fbs::CreatePing(b, 42); })
          .req(K::GraphInfo, [](auto& b) { return fbs::CreateGraphInfo(b); })
          .req(K::Stats, [](auto& b) { return fbs::CreateStats(b); })
          .req(K::KvList, [](auto& b) { return fbs::CreateKvList(b); })
          .bytes);
  put("graph_server", "register-heartbeat-barrier-leave",
      Seq(0).req(K::RegisterClient,
                 [](auto& b) { return fbs::CreateRegisterClient(b, fbs::Role::Trainer, 0, 7, b.CreateString("h"), -1, 0); })
          .req(K::Heartbeat, [](auto& b) { return fbs::CreateHeartbeat(b, 1); })
          .req(K::Barrier, [&](auto& b) { return fbs::CreateBarrier(b, 1, fbs::Role::Trainer, name(b, "start"), 1000); })
          .req(K::Leave, [](auto& b) { return fbs::CreateLeave(b, 1); })
          .bytes);
  put("graph_server", "two-samplers-barrier",
      Seq(0).req(K::RegisterClient,
                 [](auto& b) { return fbs::CreateRegisterClient(b, fbs::Role::Sampler, 0, 8, b.CreateString("s"), 0, -1); })
          .req(K::RegisterClient,
                 [](auto& b) { return fbs::CreateRegisterClient(b, fbs::Role::Sampler, 1, 9, b.CreateString("t"), 1, -1); })
          .req(K::Barrier, [&](auto& b) { return fbs::CreateBarrier(b, 1, fbs::Role::Sampler, name(b, "b"), 0); })
          .req(K::Barrier, [&](auto& b) { return fbs::CreateBarrier(b, 2, fbs::Role::Sampler, name(b, "b"), 0); })
          .bytes);
  put("graph_server", "hello-then-pull",
      Seq(0).req(K::Hello, [](auto& b) { return fbs::CreateHello(b, 0, fbs::Role::Trainer, 0); })
          .req(K::KvPull, [&](auto& b) { return fbs::CreateKvPull(b, name(b, "_N/labels")); }, {id_blob({0})})
          .bytes);
  put("graph_server", "pull-features-and-labels",
      Seq(reg).req(K::KvPull, [&](auto& b) { return fbs::CreateKvPull(b, name(b, "_N/features")); },
                   {id_blob({0, 1, 2, n0 - 1})})
          .req(K::KvPull, [&](auto& b) { return fbs::CreateKvPull(b, name(b, "_N/labels")); }, {id_blob({n0 - 1, 0})})
          .req(K::KvPull, [&](auto& b) { return fbs::CreateKvPull(b, name(b, "_N/train_mask")); }, {id_blob({n0})})
          .bytes);
  put("graph_server", "create-push-pull-delete",
      Seq(reg)
          .req(K::KvCreate,
               [&](auto& b) {
                 std::vector<int64_t> shape{c.num_nodes, 3};
                 return fbs::CreateKvCreate(b, name(b, "emb"), b.CreateVector(shape), 5, fbs::PartPolicy::Node,
                                            fbs::InitKind::Uniform, -1.0, 1.0, 11, false);
               })
          .req(K::KvPush, [&](auto& b) { return fbs::CreateKvPush(b, name(b, "emb"), 5); },
               {id_blob({1, 0}), std::vector<uint8_t>(24, 0x40)})
          .req(K::KvPush, [&](auto& b) { return fbs::CreateKvPush(b, name(b, "emb"), 5); },
               {id_blob({2}), std::vector<uint8_t>(12, 0x41)}, net::kFlagOneWay)
          .req(K::KvPull, [&](auto& b) { return fbs::CreateKvPull(b, name(b, "emb")); }, {id_blob({0, 1, 2})})
          .req(K::KvList, [](auto& b) { return fbs::CreateKvList(b); })
          .req(K::KvDelete, [&](auto& b) { return fbs::CreateKvDelete(b, name(b, "emb")); })
          .bytes);
  put("graph_server", "create-edge-normal-int64",
      Seq(reg)
          .req(K::KvCreate,
               [&](auto& b) {
                 std::vector<int64_t> shape{c.num_edges};
                 return fbs::CreateKvCreate(b, name(b, "ew"), b.CreateVector(shape), 6, fbs::PartPolicy::Edge,
                                            fbs::InitKind::Normal, 0.0, 2.0, 3, true);
               })
          .req(K::KvCreate,
               [&](auto& b) {
                 std::vector<int64_t> shape{c.num_nodes, 2, 2};
                 return fbs::CreateKvCreate(b, name(b, "counts"), b.CreateVector(shape), 4, fbs::PartPolicy::Node,
                                            fbs::InitKind::Zeros, 0.0, 0.0, 0, false);
               })
          .req(K::KvPull, [&](auto& b) { return fbs::CreateKvPull(b, name(b, "ew")); }, {id_blob({0, e0 - 1})})
          .bytes);
  put("graph_server", "degrees-find-edges",
      Seq(reg).req(K::Degrees, [](auto& b) { return fbs::CreateDegrees(b, false); }, {id_blob({0, 1, n0 - 1})})
          .req(K::Degrees, [](auto& b) { return fbs::CreateDegrees(b, true); }, {id_blob({2, 3})})
          .req(K::FindEdges, [](auto& b) { return fbs::CreateFindEdges(b); }, {id_blob({0, 1, e0 - 1})})
          .bytes);
  put("graph_server", "sample-in-out",
      Seq(reg)
          .req(K::SampleNeighbors, [](auto& b) { return sample(b, 2, false, false, nullptr, 5); },
               {id_blob({0, 1, 2, 3})})
          .req(K::SampleNeighbors, [](auto& b) { return sample(b, -1, true, false, nullptr, 6); },
               {id_blob({4, 5})})
          .req(K::SampleNeighbors, [](auto& b) { return sample(b, 3, false, true, nullptr, 7); },
               {id_blob({n0 - 1})})
          .bytes);
  put("graph_server", "sample-weighted",
      Seq(reg)
          .req(K::KvCreate,
               [&](auto& b) {
                 std::vector<int64_t> shape{c.num_edges};
                 return fbs::CreateKvCreate(b, name(b, "w"), b.CreateVector(shape), 5, fbs::PartPolicy::Edge,
                                            fbs::InitKind::Uniform, 0.0, 1.0, 1, false);
               })
          .req(K::SampleNeighbors,
               [&](auto& b) { return sample(b, 2, false, false, "w", 9); },
               {id_blob({0, 1, 2})})
          .bytes);
  put("graph_server", "machine1-hello-queries",
      Seq(m1).req(K::Hello, [](auto& b) { return fbs::CreateHello(b, 3, fbs::Role::Sampler, 1); })
          .req(K::KvPull, [&](auto& b) { return fbs::CreateKvPull(b, name(b, "_N/features")); }, {id_blob({n1, n1 + 1})})
          .req(K::SampleNeighbors, [](auto& b) { return sample(b, 2, false, false, nullptr, 5); },
               {id_blob({n1})})
          .req(K::FindEdges, [](auto& b) { return fbs::CreateFindEdges(b); }, {id_blob({e1})})
          .req(K::RegisterClient,
               [](auto& b) { return fbs::CreateRegisterClient(b, fbs::Role::Trainer, 1, 7, b.CreateString("h")); })
          .bytes);
  // Regression: with replacement every seed gives `fanout` edges; 2^31 - 2
  // made the server allocate 48 GiB for one request.
  put("graph_server", "regression-sample-huge-fanout",
      Seq(reg)
          .req(K::SampleNeighbors,
               [](auto& b) { return sample(b, 0x7ffffffe, false, true, nullptr, 5); }, {id_blob({1})})
          .bytes);
  put("graph_server", "shutdown",
      Seq(reg).req(K::Shutdown, [&](auto& b) { return fbs::CreateShutdown(b, name(b, "fuzz")); }).bytes);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_make_corpus OUTDIR\n";
    return 2;
  }
  out_root = argv[1];
  quiet_logging();
  ScratchDir dir("dgld-fuzz-corpus");
  auto json = write_tiny_partition(dir.path());
  if (!json.is_ok()) {
    std::cerr << json.status().message() << "\n";
    return 1;
  }
  frame_corpus();
  ip_config_corpus();
  config_and_partition_corpus(*json);
  auto c = load_part_config(*json);
  if (!c.is_ok()) return 1;
  graph_server_corpus(*c);
  std::cout << "fuzz_make_corpus: wrote " << written << " files under " << out_root.string() << "\n";
  return 0;
}
