#pragma once
// Small file helpers shared by every program. All errors name the path.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dgld {

// Reads a whole file into a string.
Result<std::string> read_file(const std::filesystem::path& path);

// Writes `data` to `path` atomically: a temporary file in the same directory,
// fsync, rename over `path`. A crash leaves either the old file or the new one.
// `mode` is applied to the temporary file before anything is written.
Status write_file_atomic(const std::filesystem::path& path, std::string_view data, unsigned mode = 0644);

// A file written under a temporary name in the same directory and renamed over
// `path` by commit() after an fsync; destroyed (or after a failed write)
// without commit, the temporary file is removed. A crash leaves no partial
// file under the final name.
class AtomicFile {
 public:
  AtomicFile() = default;
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  Status open(const std::filesystem::path& path, unsigned mode = 0644);
  Status write(std::string_view data);
  Status commit();

 private:
  void abandon();
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
};

// The header of a NumPy .npy file (format 1.0, C order) for an array of
// `shape` with dtype `descr` ("<f4", "<i8"); the raw data follows it.
std::string npy_header(std::string_view descr, std::span<const int64_t> shape);

// "<strerror(errno)>" for the current errno.
std::string errno_string();

}  // namespace dgld
