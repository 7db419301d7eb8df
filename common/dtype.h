#pragma once
// Element types of tensors in partition files, shared memory and on the wire.
// Values are stored in files and messages: never renumber, only append.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dgld {

enum class DType : uint32_t { int8 = 1, uint8 = 2, int32 = 3, int64 = 4, float32 = 5, float64 = 6 };

// Bytes per element; 0 for an unknown value.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::int8:
    case DType::uint8: return 1;
    case DType::int32:
    case DType::float32: return 4;
    case DType::int64:
    case DType::float64: return 8;
  }
  return 0;
}

// "int64", ...; "unknown" for an unknown value.
constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::int8: return "int8";
    case DType::uint8: return "uint8";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::float32: return "float32";
    case DType::float64: return "float64";
  }
  return "unknown";
}

// The inverse of dtype_name.
inline std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::int8, DType::uint8, DType::int32, DType::int64, DType::float32, DType::float64}) {
    if (s == dtype_name(t)) return t;
  }
  return std::nullopt;
}

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<int8_t>() { return DType::int8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::uint8; }
template <> constexpr DType dtype_of<int32_t>() { return DType::int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::int64; }
template <> constexpr DType dtype_of<float>() { return DType::float32; }
template <> constexpr DType dtype_of<double>() { return DType::float64; }

}  // namespace dgld
