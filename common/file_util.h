#pragma once
// Small file helpers shared by every program. All errors name the path.

#include <filesystem>
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

// "<strerror(errno)>" for the current errno.
std::string errno_string();

}  // namespace dgld
