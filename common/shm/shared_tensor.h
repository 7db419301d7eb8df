#pragma once
// SharedTensor: a named, row-major tensor in its own shared-memory segment, the way a
// main graph server publishes node/edge features and graph arrays to the backup
// servers and clients of its machine. The segment payload is a 192-byte descriptor
// (tensor name, dtype, shape, row size) followed by the 64-byte-aligned data
// (docs/shared-memory.md). Rows are along dimension 0.
//
// The creator fills the data, then mark_ready(); attach() waits for that. A
// SharedTensor owns its SharedSegment (and so, for the creator, the name).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/shm/shared_segment.h"
#include "common/status.h"

namespace dgld::shm {

inline constexpr uint32_t kTensorSegmentKind = 0x524e5354;  // "TSNR": SegmentHeader::kind
inline constexpr size_t kMaxTensorNameLength = 127;
inline constexpr int kMaxTensorDims = 4;

class SharedTensor {
 public:
  // A zeroed tensor of `shape` (1 to 4 dims, each >= 0) in a new segment. The segment's
  // kind is kTensorSegmentKind whatever options.kind says.
  static Result<SharedTensor> create(const std::string& segment_name, const std::string& tensor_name,
                                     DType dtype, const std::vector<int64_t>& shape,
                                     const SegmentOptions& options = {});

  // Attaches as SharedSegment::attach does, then checks the descriptor (corruption
  // naming the segment when it is not a valid tensor).
  static Result<SharedTensor> attach(const std::string& segment_name, bool read_only,
                                     Deadline deadline);

  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  std::span<const int64_t> shape() const { return {shape_.data(), shape_.size()}; }
  int64_t num_rows() const { return shape_[0]; }
  size_t row_bytes() const { return row_bytes_; }
  size_t data_bytes() const { return static_cast<size_t>(num_rows()) * row_bytes_; }

  // The data; mutable_* are nullptr on a read-only mapping. row(i) does not check i.
  const void* data() const { return data_; }
  void* mutable_data() { return segment_.read_only() ? nullptr : data_; }
  const void* row(int64_t i) const { return data_ + static_cast<size_t>(i) * row_bytes_; }
  void* mutable_row(int64_t i) { return segment_.read_only() ? nullptr : data_ + static_cast<size_t>(i) * row_bytes_; }

  // out[k] = row(local_rows[k]); `out` holds local_rows.size() * row_bytes() bytes.
  // Every id is checked before any copy: an id outside [0, num_rows) is
  // invalid_argument naming the id and the row count.
  Status gather_rows(std::span<const int64_t> local_rows, void* out) const;
  // row(local_rows[k]) = in[k]; same checks, and invalid_argument when read-only.
  // With repeated ids the last one wins.
  Status scatter_rows(std::span<const int64_t> local_rows, const void* in);

  Status mark_ready() { return segment_.mark_ready(); }
  void release() { segment_.release(); }
  const SharedSegment& segment() const { return segment_; }

 private:
  explicit SharedTensor(SharedSegment segment) : segment_(std::move(segment)) {}
  Status check_rows(std::span<const int64_t> local_rows, const char* op) const;

  SharedSegment segment_;
  std::string name_;
  DType dtype_ = DType::uint8;
  std::vector<int64_t> shape_;
  size_t row_bytes_ = 0;
  char* data_ = nullptr;  // inside segment_'s mapping
};

}  // namespace dgld::shm
