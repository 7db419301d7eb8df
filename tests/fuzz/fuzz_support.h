#pragma once
// Helpers the fuzz targets and the corpus generator share: quiet logging, a
// scratch directory, the tiny partitioned graph the partition and
// graph-server targets load, and the input layouts of those two targets.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "common/status.h"

namespace dgld::fuzz {

// Silences every dgld logger (a fuzz run makes millions of bad requests).
void quiet_logging();

// A new directory under $TMPDIR (or /tmp), removed with its contents when
// the object is destroyed.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Cuts a tiny generated graph (48 nodes, 4 features, labels and masks) into
// two partitions with dgl-partition's own code, in process, under `dir`, and
// returns the path of its config (`dir`/fz.json). Deterministic.
Result<std::filesystem::path> write_tiny_partition(const std::filesystem::path& dir);

// Input of the partition target: a flags byte, then the graph file, the node
// feature file and the edge feature file (each but the last preceded by its
// length as a little-endian u32).
enum PartitionInputFlags : uint8_t {
  kVerifyChecksums = 1,  // open_partition(..., verify_checksums = true)
  kFixChecksums = 2,     // recompute every CRC first, so mutations reach the checks behind them
  kPartitionOne = 4,     // load partition 1 instead of 0
};
struct PartitionInput {
  uint8_t flags = 0;
  std::string graph, node_feats, edge_feats;
};
std::vector<uint8_t> pack_partition_input(const PartitionInput& in);
PartitionInput unpack_partition_input(std::span<const uint8_t> bytes);

// Input of the graph-server target: a flags byte, then frames as a client
// would send them on one connection (common/net/frame.h).
enum ServerInputFlags : uint8_t {
  kRegisterFirst = 1,  // the harness registers the caller (RegisterClient) before the frames
};
// Appends one request frame with `fbb`'s finished payload and `blobs`.
void append_frame(std::vector<uint8_t>& out, uint16_t kind, uint32_t flags, uint64_t request_id,
                  flatbuffers::FlatBufferBuilder& fbb, const std::vector<std::vector<uint8_t>>& blobs = {});
// Little-endian int64 ids as a blob.
std::vector<uint8_t> id_blob(std::initializer_list<int64_t> ids);

}  // namespace dgld::fuzz
