#include "common/net/frame.h"

#include <cstring>
#include <sstream>

namespace dgld::net {
namespace {

template <typename T>
void put(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}
template <typename T>
T get(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}
std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

}  // namespace

void encode_header(const FrameHeader& h, uint8_t out[kFrameHeaderSize]) {
  put<uint32_t>(out + 0, kFrameMagic);
  put<uint16_t>(out + 4, h.version);
  put<uint16_t>(out + 6, h.kind);
  put<uint32_t>(out + 8, h.flags);
  put<uint32_t>(out + 12, h.payload_len);
  put<uint64_t>(out + 16, h.request_id);
  put<uint32_t>(out + 24, h.blob_count);
  put<uint32_t>(out + 28, 0);
}

Result<FrameHeader> decode_header(std::span<const uint8_t, kFrameHeaderSize> in, const FrameLimits& limits) {
  const uint8_t* p = in.data();
  uint32_t magic = get<uint32_t>(p);
  if (magic != kFrameMagic) {
    return protocol_error("bad frame magic " + hex(magic) + " (expected " + hex(kFrameMagic) +
                          " \"DGLD\"; is the peer a dgld process?)");
  }
  FrameHeader h;
  h.version = get<uint16_t>(p + 4);
  if (h.version != kProtocolVersion) {
    return protocol_error("peer speaks protocol version " + std::to_string(h.version) +
                          ", this build speaks " + std::to_string(kProtocolVersion));
  }
  h.kind = get<uint16_t>(p + 6);
  h.flags = get<uint32_t>(p + 8);
  if (h.flags & ~kKnownFlags) return protocol_error("unknown frame flags " + hex(h.flags));
  h.payload_len = get<uint32_t>(p + 12);
  h.request_id = get<uint64_t>(p + 16);
  h.blob_count = get<uint32_t>(p + 24);
  uint32_t reserved = get<uint32_t>(p + 28);
  if (reserved != 0) return protocol_error("reserved header field is " + hex(reserved) + ", expected 0");
  if (h.payload_len > limits.max_payload_bytes) {
    return resource_exhausted("frame payload of " + std::to_string(h.payload_len) +
                              " bytes exceeds the cap of " + std::to_string(limits.max_payload_bytes));
  }
  if (h.blob_count > limits.max_blobs) {
    return resource_exhausted("frame has " + std::to_string(h.blob_count) + " blobs, cap is " +
                              std::to_string(limits.max_blobs));
  }
  return h;
}

Result<std::vector<uint64_t>> decode_blob_table(std::span<const uint8_t> in, const FrameHeader& h,
                                                const FrameLimits& limits) {
  if (in.size() != 8ull * h.blob_count) {
    return protocol_error("blob table is " + std::to_string(in.size()) + " bytes, expected " +
                          std::to_string(8ull * h.blob_count));
  }
  std::vector<uint64_t> lengths(h.blob_count);
  uint64_t total = h.payload_len;
  for (uint32_t i = 0; i < h.blob_count; ++i) {
    lengths[i] = get<uint64_t>(in.data() + 8ull * i);
    if (lengths[i] > limits.max_frame_bytes || total + lengths[i] > limits.max_frame_bytes) {
      return resource_exhausted("frame of at least " + std::to_string(total + lengths[i]) +
                                " bytes exceeds the cap of " + std::to_string(limits.max_frame_bytes));
    }
    total += lengths[i];
  }
  return lengths;
}

void encode_blob_table(std::span<const uint64_t> lengths, std::vector<uint8_t>& out) {
  size_t at = out.size();
  out.resize(at + 8 * lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) put<uint64_t>(out.data() + at + 8 * i, lengths[i]);
}

Result<DecodedFrame> decode_frame(std::span<const uint8_t> bytes, const FrameLimits& limits) {
  if (bytes.size() < kFrameHeaderSize) {
    return protocol_error("truncated frame: " + std::to_string(bytes.size()) + " bytes, header needs " +
                          std::to_string(kFrameHeaderSize));
  }
  DGLD_ASSIGN_OR_RETURN(FrameHeader h, decode_header(bytes.first<kFrameHeaderSize>(), limits));
  size_t at = kFrameHeaderSize;
  uint64_t table = 8ull * h.blob_count;
  if (bytes.size() - at < table) return protocol_error("truncated frame: blob table cut short");
  DGLD_ASSIGN_OR_RETURN(std::vector<uint64_t> lengths, decode_blob_table(bytes.subspan(at, table), h, limits));
  at += table;
  DecodedFrame f;
  f.header = h;
  if (bytes.size() - at < h.payload_len) return protocol_error("truncated frame: payload cut short");
  f.payload = bytes.subspan(at, h.payload_len);
  at += h.payload_len;
  for (uint64_t len : lengths) {
    if (bytes.size() - at < len) return protocol_error("truncated frame: blob cut short");
    f.blobs.push_back(bytes.subspan(at, len));
    at += len;
  }
  f.total_size = at;
  return f;
}

std::vector<uint8_t> encode_frame(const FrameHeader& h_in, std::span<const uint8_t> payload,
                                  const std::vector<std::span<const uint8_t>>& blobs) {
  FrameHeader h = h_in;
  h.payload_len = static_cast<uint32_t>(payload.size());
  h.blob_count = static_cast<uint32_t>(blobs.size());
  std::vector<uint8_t> out(kFrameHeaderSize);
  encode_header(h, out.data());
  std::vector<uint64_t> lengths;
  for (auto b : blobs) lengths.push_back(b.size());
  encode_blob_table(lengths, out);
  out.insert(out.end(), payload.begin(), payload.end());
  for (auto b : blobs) out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace dgld::net
