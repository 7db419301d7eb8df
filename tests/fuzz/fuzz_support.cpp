#include "tests/fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "common/logging.h"
#include "common/net/frame.h"
#include "partition/tool.h"

namespace dgld::fuzz {

void quiet_logging() {
  LogOptions o;
  o.program = "fuzz";
  o.level = "off";
  (void)setup_logging(o);
}

ScratchDir::ScratchDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    std::cerr << "fuzz: cannot create a directory from " << pattern << "\n";
    std::abort();
  }
  path_ = buf.data();
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Result<std::filesystem::path> write_tiny_partition(const std::filesystem::path& dir) {
  const std::string out = (dir / "parts").string();
  const char* argv[] = {"dgl-partition", "--generate",
                        "sbm:nodes=48,avg_degree=4,classes=3,feat_dim=4,seed=7",
                        "--num-parts", "2", "--graph-name", "fz", "--output", out.c_str(), "--log-level", "error"};
  // The tool prints a summary on stdout; libFuzzer's own output is on stderr.
  std::cout.setstate(std::ios::failbit);
  const int rc = run_partition_tool(static_cast<int>(std::size(argv)), argv);
  std::cout.clear();
  if (rc != 0) return internal_error("dgl-partition for the fuzz graph exited " + std::to_string(rc));
  return std::filesystem::path(out) / "fz.json";
}

namespace {
void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
// Takes a u32-length-prefixed piece from the front of `in` (what is there
// when the input is cut short).
std::string take_piece(std::span<const uint8_t>& in) {
  if (in.size() < 4) {
    in = {};
    return {};
  }
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(in[i]) << (8 * i);
  in = in.subspan(4);
  const size_t take = std::min<size_t>(n, in.size());
  std::string s(reinterpret_cast<const char*>(in.data()), take);
  in = in.subspan(take);
  return s;
}
}  // namespace

std::vector<uint8_t> pack_partition_input(const PartitionInput& in) {
  std::vector<uint8_t> out{in.flags};
  put_u32(out, static_cast<uint32_t>(in.graph.size()));
  out.insert(out.end(), in.graph.begin(), in.graph.end());
  put_u32(out, static_cast<uint32_t>(in.node_feats.size()));
  out.insert(out.end(), in.node_feats.begin(), in.node_feats.end());
  out.insert(out.end(), in.edge_feats.begin(), in.edge_feats.end());
  return out;
}

PartitionInput unpack_partition_input(std::span<const uint8_t> bytes) {
  PartitionInput p;
  if (bytes.empty()) return p;
  p.flags = bytes[0];
  bytes = bytes.subspan(1);
  p.graph = take_piece(bytes);
  p.node_feats = take_piece(bytes);
  p.edge_feats.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return p;
}

void append_frame(std::vector<uint8_t>& out, uint16_t kind, uint32_t flags, uint64_t request_id,
                  flatbuffers::FlatBufferBuilder& fbb, const std::vector<std::vector<uint8_t>>& blobs) {
  net::FrameHeader h;
  h.kind = kind;
  h.flags = flags;
  h.request_id = request_id;
  std::vector<std::span<const uint8_t>> views(blobs.begin(), blobs.end());
  auto frame = net::encode_frame(h, std::span<const uint8_t>(fbb.GetBufferPointer(), fbb.GetSize()), views);
  out.insert(out.end(), frame.begin(), frame.end());
}

std::vector<uint8_t> id_blob(std::initializer_list<int64_t> ids) {
  std::vector<uint8_t> out(ids.size() * 8);
  size_t i = 0;
  for (int64_t id : ids) {
    for (int b = 0; b < 8; ++b) out[i * 8 + b] = static_cast<uint8_t>(static_cast<uint64_t>(id) >> (8 * b));
    ++i;
  }
  return out;
}

}  // namespace dgld::fuzz
