#pragma once
// NumPy's .npy arrays, as DGL's chunked graphs and partition tools hold node
// data: reading a header, a whole array, and writing one atomically.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace dgld {

// A .npy array's values: dtype float32, int64 or uint8; `cols` values per row
// (1 for a vector).
struct NodeDataChunk {
  DType dtype = DType::float32;
  int64_t rows = 0, cols = 1;
  std::vector<std::byte> data;  // rows * cols values
};

// A .npy file's header, format 1.0, 2.0 or
// 3.0, C order, descr '<f4', '<i8', '|u1' or '|b1' (bool, read as uint8),
// shape (rows,) (cols 1, ndim 1) or (rows, cols). Errors name the file.
struct NpyHeader {
  std::string descr;  // as written: "<f4", ...
  DType dtype = DType::float32;
  int ndim = 1;
  int64_t rows = 0, cols = 1;
  uint64_t data_offset = 0;  // bytes before the data
};
Result<NpyHeader> read_npy_header(const std::filesystem::path& path);

// The whole array (the file's size must match the header's shape).
Result<NodeDataChunk> read_npy(const std::filesystem::path& path);

// Writes rows x cols values of `descr` ("<f4", "<i8", "|u1") to `path`
// atomically; shape (rows,) unless `matrix`.
Status write_npy(const std::filesystem::path& path, const char* descr, int64_t rows, int64_t cols, bool matrix,
                 const void* data, size_t bytes);

}  // namespace dgld
