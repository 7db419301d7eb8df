#pragma once
// Checksums of bytes and files: CRC-32 (ISO-HDLC, the zlib/gzip polynomial),
// used by the partition files' headers, dgl-launch's copy decisions and the
// checkpoints' integrity check.

#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "common/status.h"

namespace dgld {

// CRC-32 of `bytes`, continuing from `crc` (0 to start).
uint32_t crc32_update(uint32_t crc, const void* bytes, size_t size);

struct FileDigest {
  uint64_t size = 0;
  uint32_t crc32 = 0;
  bool operator==(const FileDigest&) const = default;
};

// Size and CRC-32 of a whole file, read in 1 MiB pieces; errors name the path.
Result<FileDigest> digest_file(const std::filesystem::path& path);

}  // namespace dgld
