#include "common/checksum.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <vector>

#include "common/file_util.h"

namespace dgld {

uint32_t crc32_update(uint32_t crc, const void* bytes, size_t size) {
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(bytes), size));
}

Result<FileDigest> digest_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open " + path.string() + ": " + errno_string());
  FileDigest d;
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status st = io_error("cannot read " + path.string() + ": " + errno_string());
      ::close(fd);
      return st;
    }
    if (n == 0) break;
    d.crc32 = crc32_update(d.crc32, buf.data(), static_cast<size_t>(n));
    d.size += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return d;
}

}  // namespace dgld
