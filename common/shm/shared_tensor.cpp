#include "common/shm/shared_tensor.h"

#include <cstring>

#include <fmt/format.h>

namespace dgld::shm {
namespace {

constexpr uint32_t kDescriptorVersion = 1;

// The start of a tensor segment's payload (docs/shared-memory.md).
struct TensorDescriptor {
  uint32_t descriptor_version;  // kDescriptorVersion
  uint32_t dtype;               // DType value
  uint32_t ndim;                // 1..kMaxTensorDims
  uint32_t reserved;
  char name[kMaxTensorNameLength + 1];  // NUL-terminated
  int64_t shape[kMaxTensorDims];        // dims past ndim are 0
  uint64_t row_bytes;                   // dtype size * product(shape[1..ndim))
  uint64_t data_offset;                 // from the payload start; a multiple of 64
};
static_assert(sizeof(TensorDescriptor) == 192);
constexpr size_t kDataOffset = 192;
static_assert(kDataOffset % 64 == 0 && kDataOffset >= sizeof(TensorDescriptor));

// row_bytes for dtype and shape, or an error naming `what` (the segment).
Result<uint64_t> compute_row_bytes(const std::string& what, DType dtype, std::span<const int64_t> shape) {
  const size_t elem = dtype_size(dtype);
  if (elem == 0) {
    return invalid_argument(fmt::format("{}: unknown dtype {}", what, static_cast<uint32_t>(dtype)));
  }
  if (shape.empty() || shape.size() > static_cast<size_t>(kMaxTensorDims)) {
    return invalid_argument(fmt::format("{}: a shared tensor has 1 to {} dimensions, not {}", what,
                                        kMaxTensorDims, shape.size()));
  }
  uint64_t row = elem;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) return invalid_argument(fmt::format("{}: dimension {} is {}", what, d, shape[d]));
    if (d > 0 && __builtin_mul_overflow(row, static_cast<uint64_t>(shape[d]), &row)) {
      return invalid_argument(fmt::format("{}: row size overflows", what));
    }
  }
  uint64_t total;
  if (__builtin_mul_overflow(row, static_cast<uint64_t>(shape[0]), &total) || total > (uint64_t{1} << 61)) {
    return invalid_argument(fmt::format("{}: tensor size overflows", what));
  }
  return row;
}

// Copies rows between the tensor at `base` and a packed buffer, in the direction
// kGather says. A fixed N turns each memcpy into plain loads and stores.
// Rows are scattered over a tensor far larger than the caches, so each one
// is a cache miss the hardware prefetcher cannot foresee; asking for the
// row kPrefetchAhead places on while copying this one keeps several misses
// in flight instead of one.
constexpr size_t kPrefetchAhead = 16;
constexpr size_t kPrefetchMaxBytes = 1024;

template <bool kGather, size_t N>
void copy_rows(char* base, std::span<const int64_t> ids, char* packed, size_t row_bytes) {
  const size_t rb = N != 0 ? N : row_bytes;
  const size_t fetch = std::min(rb, kPrefetchMaxBytes);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + kPrefetchAhead < ids.size()) {
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(base + static_cast<size_t>(ids[i + kPrefetchAhead]) * rb);
      for (uintptr_t line = ahead & ~uintptr_t{63}; line < ahead + fetch; line += 64) {
        __builtin_prefetch(reinterpret_cast<const void*>(line), kGather ? 0 : 1);
      }
    }
    char* row = base + static_cast<size_t>(ids[i]) * rb;
    if constexpr (kGather) {
      std::memcpy(packed, row, rb);
    } else {
      std::memcpy(row, packed, rb);
    }
    packed += rb;
  }
}

template <bool kGather>
void transfer_rows(char* base, std::span<const int64_t> ids, char* packed, size_t row_bytes) {
  switch (row_bytes) {
    case 4: return copy_rows<kGather, 4>(base, ids, packed, row_bytes);
    case 8: return copy_rows<kGather, 8>(base, ids, packed, row_bytes);
    default: return copy_rows<kGather, 0>(base, ids, packed, row_bytes);
  }
}

}  // namespace

Result<SharedTensor> SharedTensor::create(const std::string& segment_name, const std::string& tensor_name,
                                          DType dtype, const std::vector<int64_t>& shape,
                                          const SegmentOptions& options) {
  const std::string what = "shared tensor '" + tensor_name + "' (" + segment_name + ")";
  if (tensor_name.size() > kMaxTensorNameLength || tensor_name.find('\0') != std::string::npos) {
    return invalid_argument(fmt::format("{}: the name must be at most {} characters without NUL", what,
                                        kMaxTensorNameLength));
  }
  DGLD_ASSIGN_OR_RETURN(const uint64_t row_bytes, compute_row_bytes(what, dtype, shape));
  SegmentOptions seg_options = options;
  seg_options.kind = kTensorSegmentKind;
  const size_t payload = kDataOffset + row_bytes * static_cast<uint64_t>(shape[0]);
  DGLD_ASSIGN_OR_RETURN(SharedSegment seg, SharedSegment::create(segment_name, payload, seg_options));

  auto* desc = static_cast<TensorDescriptor*>(seg.mutable_data());
  desc->descriptor_version = kDescriptorVersion;
  desc->dtype = static_cast<uint32_t>(dtype);
  desc->ndim = static_cast<uint32_t>(shape.size());
  std::memcpy(desc->name, tensor_name.data(), tensor_name.size());
  for (size_t d = 0; d < shape.size(); ++d) desc->shape[d] = shape[d];
  desc->row_bytes = row_bytes;
  desc->data_offset = kDataOffset;

  SharedTensor t(std::move(seg));
  t.name_ = tensor_name;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.row_bytes_ = row_bytes;
  t.data_ = static_cast<char*>(t.segment_.mutable_data()) + kDataOffset;
  return t;
}

Result<SharedTensor> SharedTensor::attach(const std::string& segment_name, bool read_only,
                                          Deadline deadline) {
  DGLD_ASSIGN_OR_RETURN(SharedSegment seg, SharedSegment::attach(segment_name, read_only, deadline));
  const std::string what = "shared tensor segment " + segment_name;
  if (seg.kind() != kTensorSegmentKind) {
    return corruption(fmt::format("{}: kind {:#x} is not a tensor ({:#x})", what, seg.kind(),
                                  kTensorSegmentKind));
  }
  if (seg.size() < kDataOffset) {
    return corruption(fmt::format("{}: payload of {} bytes is smaller than the descriptor", what, seg.size()));
  }
  TensorDescriptor desc;
  std::memcpy(&desc, seg.data(), sizeof(desc));
  if (desc.descriptor_version != kDescriptorVersion) {
    return corruption(fmt::format("{}: descriptor version {}; this build reads {}", what,
                                  desc.descriptor_version, kDescriptorVersion));
  }
  if (desc.ndim < 1 || desc.ndim > static_cast<uint32_t>(kMaxTensorDims) ||
      desc.name[kMaxTensorNameLength] != '\0') {
    return corruption(fmt::format("{}: bad descriptor (ndim {})", what, desc.ndim));
  }
  const std::span<const int64_t> shape(desc.shape, desc.ndim);
  auto row_bytes = compute_row_bytes(what, static_cast<DType>(desc.dtype), shape);
  if (!row_bytes.is_ok()) return corruption(row_bytes.status().message());
  if (*row_bytes != desc.row_bytes || desc.data_offset != kDataOffset ||
      kDataOffset + *row_bytes * static_cast<uint64_t>(shape[0]) != seg.size()) {
    return corruption(fmt::format("{}: descriptor (row_bytes {}, data_offset {}, {} rows) does not match "
                                  "the {}-byte payload", what, desc.row_bytes, desc.data_offset,
                                  shape[0], seg.size()));
  }

  SharedTensor t(std::move(seg));
  t.name_ = desc.name;
  t.dtype_ = static_cast<DType>(desc.dtype);
  t.shape_.assign(shape.begin(), shape.end());
  t.row_bytes_ = desc.row_bytes;
  t.data_ = const_cast<char*>(static_cast<const char*>(t.segment_.data())) + kDataOffset;
  return t;
}

Status SharedTensor::check_rows(std::span<const int64_t> local_rows, const char* op) const {
  const uint64_t n = static_cast<uint64_t>(num_rows());
  for (size_t k = 0; k < local_rows.size(); ++k) {
    if (static_cast<uint64_t>(local_rows[k]) >= n) {  // negative ids wrap to huge
      return invalid_argument(fmt::format("{} on shared tensor '{}' ({}): row id {} (position {}) is "
                                          "out of range for {} rows", op, name_, segment_.name(),
                                          local_rows[k], k, n));
    }
  }
  return Status::ok();
}

Status SharedTensor::gather_rows(std::span<const int64_t> local_rows, void* out) const {
  DGLD_RETURN_IF_ERROR(check_rows(local_rows, "gather_rows"));
  transfer_rows<true>(data_, local_rows, static_cast<char*>(out), row_bytes_);
  return Status::ok();
}

Status SharedTensor::scatter_rows(std::span<const int64_t> local_rows, const void* in) {
  if (segment_.read_only()) {
    return invalid_argument(fmt::format("scatter_rows on shared tensor '{}' ({}): mapped read-only",
                                        name_, segment_.name()));
  }
  DGLD_RETURN_IF_ERROR(check_rows(local_rows, "scatter_rows"));
  transfer_rows<false>(data_, local_rows, const_cast<char*>(static_cast<const char*>(in)), row_bytes_);
  return Status::ok();
}

}  // namespace dgld::shm
