#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace dgld {

std::string errno_string() { return std::strerror(errno); }

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open " + path.string() + ": " + errno_string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error("cannot read " + path.string() + ": " + errno_string());
  return ss.str();
}

Status write_file_atomic(const std::filesystem::path& path, std::string_view data, unsigned mode) {
  std::random_device rd;
  auto tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return io_error("cannot create " + tmp.string() + ": " + errno_string());
  ::fchmod(fd, mode);
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status st = io_error("cannot write " + tmp.string() + ": " + errno_string());
      ::close(fd);
      ::unlink(tmp.c_str());
      return st;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Status st = io_error("cannot flush " + tmp.string() + ": " + errno_string());
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = io_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + errno_string());
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::ok();
}

}  // namespace dgld
