#include "common/net/frame.h"

#include <catch2/catch.hpp>
#include <cstring>

using namespace dgld;
using namespace dgld::net;

namespace {
std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
}  // namespace

TEST_CASE("frame: encode/decode round trip with zero-length and large blobs") {
  FrameHeader h;
  h.kind = 4;
  h.flags = kFlagResponse;
  h.request_id = 0x1122334455667788ull;
  auto payload = bytes("flatbuffer-bytes");
  std::vector<uint8_t> big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31);
  std::vector<uint8_t> empty;
  auto frame = encode_frame(h, payload, {big, empty, payload});
  auto d = decode_frame(frame, FrameLimits{});
  REQUIRE(d.is_ok());
  CHECK(d->header.kind == 4);
  CHECK(d->header.flags == kFlagResponse);
  CHECK(d->header.request_id == 0x1122334455667788ull);
  REQUIRE(d->blobs.size() == 3);
  CHECK(d->blobs[0].size() == big.size());
  CHECK(std::memcmp(d->blobs[0].data(), big.data(), big.size()) == 0);
  CHECK(d->blobs[1].empty());
  CHECK(d->blobs[2].size() == payload.size());
  CHECK(d->total_size == frame.size());
}

TEST_CASE("frame: header is little-endian with the documented layout") {
  FrameHeader h;
  h.kind = 0x0102;
  h.request_id = 1;
  auto f = encode_frame(h, {}, {});
  REQUIRE(f.size() == kFrameHeaderSize);
  CHECK(std::string(f.begin(), f.begin() + 4) == "DGLD");
  CHECK(f[4] == kProtocolVersion);
  CHECK(f[5] == 0);
  CHECK(f[6] == 0x02);
  CHECK(f[7] == 0x01);
  CHECK(f[16] == 1);
}

TEST_CASE("frame: every malformed header gives a specific error") {
  FrameHeader h;
  h.kind = 2;
  auto good = encode_frame(h, bytes("abc"), {});
  FrameLimits limits;

  auto bad_magic = good;
  bad_magic[0] = 'X';
  auto r = decode_frame(bad_magic, limits);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::protocol_error);
  CHECK_THAT(r.status().message(), Catch::Contains("bad frame magic"));

  auto bad_version = good;
  bad_version[4] = 7;
  r = decode_frame(bad_version, limits);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("protocol version 7, this build speaks " + std::to_string(net::kProtocolVersion)));

  auto bad_flags = good;
  bad_flags[11] = 0x80;
  r = decode_frame(bad_flags, limits);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("unknown frame flags"));

  auto bad_reserved = good;
  bad_reserved[30] = 1;
  r = decode_frame(bad_reserved, limits);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("reserved header field"));

  r = decode_frame(std::span<const uint8_t>(good.data(), 10), limits);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("truncated frame"));

  r = decode_frame(std::span<const uint8_t>(good.data(), good.size() - 1), limits);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("payload cut short"));
}

TEST_CASE("frame: size caps on payload, blob count and total") {
  FrameLimits limits;
  limits.max_payload_bytes = 16;
  limits.max_blobs = 2;
  limits.max_frame_bytes = 100;
  FrameHeader h;
  std::vector<uint8_t> p17(17), b60(60), b50(50);
  auto r = decode_frame(encode_frame(h, p17, {}), limits);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::resource_exhausted);
  CHECK_THAT(r.status().message(), Catch::Contains("exceeds the cap of 16"));

  std::vector<uint8_t> one(1);
  r = decode_frame(encode_frame(h, {}, {one, one, one}), limits);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("3 blobs, cap is 2"));

  r = decode_frame(encode_frame(h, {}, {b60, b50}), limits);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("exceeds the cap of 100"));

  CHECK(decode_frame(encode_frame(h, {}, {b50, b50}), limits).is_ok());
}

TEST_CASE("frame: a blob length near 2^64 cannot overflow the total") {
  FrameHeader h;
  std::vector<uint8_t> one(1);
  auto f = encode_frame(h, {}, {one, one});
  for (int i = 0; i < 8; ++i) f[kFrameHeaderSize + i] = 0xff;
  auto r = decode_frame(f, FrameLimits{});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::resource_exhausted);
}
