#pragma once
// In-memory forms of a frame: Message (received, owns its bytes) and
// OutMessage (to send; blobs may borrow memory kept alive by `keep_alive`).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "common/net/frame.h"
#include "common/status.h"

namespace dgld::net {

// An uninitialised, owned byte array (no zero-fill for large tensors), or a
// borrowed view of memory someone else owns (a blob received straight into a
// caller's buffer).
class ByteBuffer {
 public:
  ByteBuffer() = default;
  explicit ByteBuffer(size_t size) : data_(size ? new uint8_t[size] : nullptr, &free_array), size_(size) {}
  static ByteBuffer borrowed(uint8_t* data, size_t size) {
    ByteBuffer b;
    b.data_ = Ptr(data, &no_free);
    b.size_ = size;
    return b;
  }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool is_borrowed() const { return data_.get_deleter() == &no_free; }
  std::span<const uint8_t> span() const { return {data_.get(), size_}; }

 private:
  static void free_array(uint8_t* p) { delete[] p; }
  static void no_free(uint8_t*) {}
  using Ptr = std::unique_ptr<uint8_t[], void (*)(uint8_t*)>;
  Ptr data_{nullptr, &free_array};
  size_t size_ = 0;
};

struct Message {
  FrameHeader header;
  ByteBuffer payload;
  std::vector<ByteBuffer> blobs;

  uint16_t kind() const { return header.kind; }
  uint64_t request_id() const { return header.request_id; }
  bool is_error() const { return header.flags & kFlagError; }
  // The payload as FlatBuffers table T; only valid after verification.
  template <typename T>
  const T* as() const {
    return flatbuffers::GetRoot<T>(payload.data());
  }
};

// A blob to send: `size` bytes at `data`, or, when `pieces` is set, the
// concatenation of those pieces (rows sent straight from where they live,
// with no gather copy). `keep_alive` owns whatever they point into.
struct OutPiece {
  const void* data;
  size_t size;
};
struct OutBlob {
  const void* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> keep_alive;
  std::shared_ptr<const std::vector<OutPiece>> pieces;

  static OutBlob copy_of(const void* p, size_t n);
  template <typename T>
  static OutBlob from_vector(std::vector<T> v) {
    auto owner = std::make_shared<std::vector<T>>(std::move(v));
    return OutBlob{owner->data(), owner->size() * sizeof(T), owner};
  }
};

struct OutMessage {
  uint16_t kind = 0;
  uint32_t flags = 0;
  uint64_t request_id = 0;  // set by the RPC layer for requests
  flatbuffers::DetachedBuffer payload;
  std::vector<OutBlob> blobs;

  OutMessage() = default;
  template <typename Kind>
  OutMessage(Kind k, flatbuffers::FlatBufferBuilder& fbb)
      : kind(static_cast<uint16_t>(k)), payload(fbb.Release()) {}
};

// Runs the FlatBuffers verifier for root type T over a received payload.
template <typename T>
Status verify_payload(const Message& m, const char* type_name) {
  flatbuffers::Verifier v(m.payload.data(), m.payload.size());
  if (m.payload.size() == 0 || !v.VerifyBuffer<T>(nullptr)) {
    return protocol_error(std::string("payload of ") + std::to_string(m.payload.size()) +
                          " bytes is not a valid " + type_name + " FlatBuffer");
  }
  return Status::ok();
}

// Builds the error response to `request_id` carrying `st`.
OutMessage make_error_reply(const Status& st);
// Converts an error response into a Status (code and message from the peer).
Status status_from_error_reply(const Message& m, const std::string& peer);

}  // namespace dgld::net
