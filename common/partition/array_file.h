#pragma once
// The dgld array file: a header, a table of named arrays, then the arrays, each
// 64-byte aligned, so a reader can mmap the file and use the arrays in place.
// Partition graphs and feature files are both array files (docs/partition-format.md).
//
// ArrayFileWriter streams arrays to a temporary file and renames it into place on
// finish(); a writer destroyed before finish() removes the temporary file.
// MappedArrayFile maps a file read-only and validates the header and table; it owns
// the mapping, and every span it hands out borrows from it.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/checksum.h"  // crc32_update, used with the headers
#include "common/dtype.h"
#include "common/status.h"

namespace dgld {

// DType, dtype_size, dtype_name: common/dtype.h. Files store their own dtype codes
// (docs/partition-format.md), independent of DType's numbering.
uint32_t dtype_file_code(DType t);             // 0 for a type files cannot hold
Result<DType> dtype_from_file_code(uint32_t code);

// The DType of a C++ element type.
template <typename T> struct element_dtype;
template <> struct element_dtype<uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct element_dtype<int32_t> { static constexpr DType value = DType::int32; };
template <> struct element_dtype<int64_t> { static constexpr DType value = DType::int64; };
template <> struct element_dtype<float> { static constexpr DType value = DType::float32; };
template <> struct element_dtype<double> { static constexpr DType value = DType::float64; };

// What an array file holds (header field `kind`).
enum class ArrayFileKind : uint32_t { partition_graph = 1, node_features = 2, edge_features = 3, link_split = 4 };

inline constexpr uint32_t kArrayFileVersion = 1;
inline constexpr size_t kArrayAlignment = 64;
inline constexpr size_t kMaxArrayName = 63;  // bytes, NUL-terminated in a 64-byte field
inline constexpr size_t kMaxArrayDims = 4;

struct ArraySpec {
  std::string name;             // at most kMaxArrayName bytes, unique in the file
  DType dtype = DType::uint8;
  std::vector<int64_t> shape;   // 1..kMaxArrayDims dims, each >= 0
  size_t num_bytes() const;     // product(shape) * dtype_size
};

class ArrayFileWriter {
 public:
  // Creates `path`'s temporary sibling and fixes the layout: the arrays are
  // written in the order of `specs`.
  static Result<std::unique_ptr<ArrayFileWriter>> create(const std::filesystem::path& path,
                                                          ArrayFileKind kind,
                                                          std::vector<ArraySpec> specs);
  ~ArrayFileWriter();
  ArrayFileWriter(const ArrayFileWriter&) = delete;
  ArrayFileWriter& operator=(const ArrayFileWriter&) = delete;

  // Appends bytes to the current array; moves to the next array once the current
  // one is full. A call may not span two arrays.
  Status append(const void* data, size_t size);
  template <typename T>
  Status append(std::span<const T> values) { return append(values.data(), values.size_bytes()); }
  // Writes a whole array (must be the next one, and exactly its size).
  template <typename T>
  Status write_array(std::span<const T> values) { return append(values); }

  // Index of the array being written (specs.size() once all are complete).
  size_t current_array() const { return current_; }

  // Checks every array is complete, writes the header, fsyncs, renames into place.
  Status finish();

 private:
  ArrayFileWriter() = default;
  Status flush_buffer();

  std::filesystem::path path_, tmp_path_;
  int fd_ = -1;
  ArrayFileKind kind_ = ArrayFileKind::partition_graph;
  std::vector<ArraySpec> specs_;
  std::vector<uint64_t> offsets_;
  std::vector<uint32_t> crcs_;
  size_t header_bytes_ = 0;
  uint64_t file_bytes_ = 0;
  size_t current_ = 0;
  uint64_t written_in_current_ = 0;
  uint64_t file_pos_ = 0;  // where buffer_ starts in the file
  uint64_t writeback_from_ = 0;  // bytes before this have been handed to writeback
  std::vector<char> buffer_;
  bool finished_ = false;

  void wrote(uint64_t bytes);
};

// One array of a mapped file.
struct ArrayEntry {
  std::string name;
  DType dtype = DType::uint8;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t crc = 0;
  const std::byte* data = nullptr;  // into the mapping
};

class MappedArrayFile {
 public:
  // Maps `path` read-only and checks magic, version, kind, header checksum and the
  // table (bounds, alignment, sizes). With `verify_checksums` also checks every
  // array's CRC (reads the whole file) and then lets each array's pages go
  // (release_pages): what the caller reads later faults back from the page
  // cache, and the process's RSS is not the whole file at once.
  static Result<std::unique_ptr<MappedArrayFile>> open(const std::filesystem::path& path,
                                                       ArrayFileKind expected_kind,
                                                       bool verify_checksums);
  ~MappedArrayFile();
  MappedArrayFile(const MappedArrayFile&) = delete;
  MappedArrayFile& operator=(const MappedArrayFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<ArrayEntry>& arrays() const { return arrays_; }
  const ArrayEntry* find(std::string_view name) const;
  // Drops the pages wholly inside [p, p + n) from this process's memory (the
  // kernel keeps them in the page cache; a later read faults them back in),
  // for a reader that has copied them elsewhere. Nothing happens outside
  // this file's mapping. Returns whether the range lay inside it.
  bool release_pages(const void* p, size_t n) const;

  // The named array as T, checking dtype and (when expect_rows >= 0) that it
  // is one-dimensional with expect_rows elements.
  template <typename T>
  Result<std::span<const T>> get(std::string_view name, int64_t expect_rows = -1) const {
    DGLD_ASSIGN_OR_RETURN(const ArrayEntry* e, get_entry(name, element_dtype<T>::value, expect_rows));
    return std::span<const T>(reinterpret_cast<const T*>(e->data), e->length / sizeof(T));
  }

 private:
  MappedArrayFile() = default;
  Result<const ArrayEntry*> get_entry(std::string_view name, DType dtype, int64_t expect_rows) const;

  std::filesystem::path path_;
  void* base_ = nullptr;
  size_t size_ = 0;
  std::vector<ArrayEntry> arrays_;
};

}  // namespace dgld
