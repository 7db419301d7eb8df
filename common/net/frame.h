#pragma once
// The dgld frame: what every TCP connection carries, in both directions.
//
//   offset size field
//   0      4    magic        'D' 'G' 'L' 'D'  (0x444C4744 little-endian)
//   4      2    version      kProtocolVersion
//   6      2    kind         dgld::fbs::MessageKind
//   8      4    flags        FrameFlags bits
//   12     4    payload_len  bytes of the FlatBuffers payload
//   16     8    request_id   correlates a response with its request
//   24     4    blob_count   number of raw byte blobs after the payload
//   28     4    reserved     must be 0
//   32     8*blob_count      blob lengths (u64 each; 0 is a valid, present, empty blob)
//   then   payload_len bytes of FlatBuffers, then each blob's bytes in order.
// All integers little-endian. No implicit padding. Pure encode/decode, no I/O:
// the fuzzers and the connection class share it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace dgld::net {

inline constexpr uint32_t kFrameMagic = 0x444C4744;  // "DGLD"
// 3: SampleNeighbors.spec and SampleBatch.rng_seed took over ids of fields of 2;
// 4: the trainers' rendezvous is dgld's authenticated store (StoreRequest) instead of c10d's TCPStore.
inline constexpr uint16_t kProtocolVersion = 4;
inline constexpr size_t kFrameHeaderSize = 32;

enum FrameFlags : uint32_t {
  kFlagResponse = 1u << 0,  // this frame answers request_id
  kFlagError = 1u << 1,     // payload is an fbs::ErrorReply
  kFlagOneWay = 1u << 2,    // the sender wants no reply (fire-and-forget)
};
inline constexpr uint32_t kKnownFlags = kFlagResponse | kFlagError | kFlagOneWay;

struct FrameHeader {
  uint16_t version = kProtocolVersion;
  uint16_t kind = 0;
  uint32_t flags = 0;
  uint32_t payload_len = 0;
  uint64_t request_id = 0;
  uint32_t blob_count = 0;
};

struct FrameLimits {
  uint64_t max_frame_bytes = 1ull << 31;  // payload + all blobs
  uint32_t max_payload_bytes = 64u << 20;
  uint32_t max_blobs = 1024;
};

void encode_header(const FrameHeader& h, uint8_t out[kFrameHeaderSize]);
// Validates magic, version, flags, reserved and limits. Errors are specific
// ("bad magic 0x...", "protocol version 7, this build speaks 2", ...).
Result<FrameHeader> decode_header(std::span<const uint8_t, kFrameHeaderSize> in, const FrameLimits& limits);
// Decodes the blob length table (8 * blob_count bytes) and checks the total
// frame size against the limits.
Result<std::vector<uint64_t>> decode_blob_table(std::span<const uint8_t> in, const FrameHeader& h,
                                                const FrameLimits& limits);
void encode_blob_table(std::span<const uint64_t> lengths, std::vector<uint8_t>& out);

// Decodes one complete frame held in memory (used by fuzzers and tests).
struct DecodedFrame {
  FrameHeader header;
  std::span<const uint8_t> payload;
  std::vector<std::span<const uint8_t>> blobs;
  size_t total_size = 0;
};
Result<DecodedFrame> decode_frame(std::span<const uint8_t> bytes, const FrameLimits& limits);
// Encodes a complete frame into one buffer (tests, small messages).
std::vector<uint8_t> encode_frame(const FrameHeader& h, std::span<const uint8_t> payload,
                                  const std::vector<std::span<const uint8_t>>& blobs);

}  // namespace dgld::net
