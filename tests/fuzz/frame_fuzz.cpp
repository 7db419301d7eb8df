// Fuzz target: the frame decoder (common/net/frame.h), fed a byte stream as a
// connection would be. Checks, beyond "no crash":
// - decode_frame either fails or returns a frame that lies inside the input
//   and re-encodes to exactly the bytes it came from;
// - the piecewise path the connection takes (decode_header, then
//   decode_blob_table) reaches the same verdict as decode_frame;
// - a frame accepted under small limits respects them;
// - an ErrorReply payload converts to a Status without crashing.

#include <cstring>
#include <span>

#include "common/net/frame.h"
#include "common/net/message.h"
#include "schemas/rpc_generated.h"
#include "tests/fuzz/fuzz_target.h"

using namespace dgld;
using namespace dgld::net;

namespace {

// The connection's order: header, blob table, then payload and blobs.
bool piecewise_ok(std::span<const uint8_t> in, const FrameLimits& limits) {
  if (in.size() < kFrameHeaderSize) return false;
  auto h = decode_header(in.first<kFrameHeaderSize>(), limits);
  if (!h.is_ok()) return false;
  const uint64_t table = 8ull * h->blob_count;
  if (in.size() - kFrameHeaderSize < table) return false;
  auto lengths = decode_blob_table(in.subspan(kFrameHeaderSize, table), *h, limits);
  if (!lengths.is_ok()) return false;
  uint64_t need = kFrameHeaderSize + table + h->payload_len;
  for (uint64_t l : *lengths) need += l;
  return need <= in.size();
}

void check_frame(std::span<const uint8_t> in, const FrameLimits& limits) {
  auto f = decode_frame(in, limits);
  FUZZ_CHECK(f.is_ok() == piecewise_ok(in, limits), "decode_frame and the piecewise decoder disagree");
  if (!f.is_ok()) {
    FUZZ_CHECK(!f.status().message().empty(), "an error without a message");
    return;
  }
  FUZZ_CHECK(f->total_size >= kFrameHeaderSize && f->total_size <= in.size(), "frame size outside the input");
  FUZZ_CHECK(f->header.payload_len <= limits.max_payload_bytes, "payload over the limit");
  FUZZ_CHECK(f->blobs.size() == f->header.blob_count && f->blobs.size() <= limits.max_blobs, "blob count");
  uint64_t body = f->payload.size();
  for (auto b : f->blobs) {
    FUZZ_CHECK(b.data() >= in.data() && b.data() + b.size() <= in.data() + in.size(), "blob outside the input");
    body += b.size();
  }
  FUZZ_CHECK(body <= limits.max_frame_bytes, "frame over the limit");
  auto again = encode_frame(f->header, f->payload, f->blobs);
  FUZZ_CHECK(again.size() == f->total_size && std::memcmp(again.data(), in.data(), again.size()) == 0,
             "a decoded frame does not re-encode to its bytes");

  // What a client does with an error reply (a response whose payload is
  // anything the peer chose to send).
  Message m;
  m.header = f->header;
  m.payload = ByteBuffer(f->payload.size());
  if (!f->payload.empty()) std::memcpy(m.payload.data(), f->payload.data(), f->payload.size());
  Status st = status_from_error_reply(m, "fuzz peer");
  FUZZ_CHECK(!st.is_ok(), "an error reply converted to ok");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  const FrameLimits defaults;
  FrameLimits small;
  small.max_frame_bytes = 4096;
  small.max_payload_bytes = 1024;
  small.max_blobs = 4;
  // A stream of frames, one after another, as a connection reads them.
  size_t at = 0;
  for (int n = 0; n < 64 && at < size; ++n) {
    check_frame(in.subspan(at), defaults);
    check_frame(in.subspan(at), small);
    auto f = decode_frame(in.subspan(at), defaults);
    if (!f.is_ok()) break;
    at += f->total_size;
  }
  return 0;
}
