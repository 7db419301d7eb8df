#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

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

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

Status AtomicFile::open(const std::filesystem::path& path, unsigned mode) {
  abandon();
  std::random_device rd;
  path_ = path;
  tmp_ = path;
  tmp_ += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd_ < 0) {
    Status st = io_error("cannot create " + tmp_.string() + ": " + errno_string());
    tmp_.clear();
    return st;
  }
  ::fchmod(fd_, mode);
  return Status::ok();
}

Status AtomicFile::write(std::string_view data) {
  if (fd_ < 0) return io_error("writing " + path_.string() + ": the file is not open");
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status st = io_error("cannot write " + tmp_.string() + ": " + errno_string());
      abandon();
      return st;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  if (fd_ < 0) return io_error("committing " + path_.string() + ": the file is not open");
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Status st = io_error("cannot flush " + tmp_.string() + ": " + errno_string());
    abandon();
    return st;
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    Status st = io_error("cannot rename " + tmp_.string() + " to " + path_.string() + ": " + errno_string());
    abandon();
    return st;
  }
  tmp_.clear();
  return Status::ok();
}

Status write_file_atomic(const std::filesystem::path& path, std::string_view data, unsigned mode) {
  AtomicFile f;
  DGLD_RETURN_IF_ERROR(f.open(path, mode));
  DGLD_RETURN_IF_ERROR(f.write(data));
  return f.commit();
}

std::string npy_header(std::string_view descr, std::span<const int64_t> shape) {
  std::string dims;
  for (const int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() == 1) dims.pop_back();  // "(3,)"
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(3, 4)"
  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + dict + padding + '\n', a multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string h("\x93NUMPY\x01\x00", 8);
  h += static_cast<char>(dict.size() & 0xff);
  h += static_cast<char>((dict.size() >> 8) & 0xff);
  return h + dict;
}

}  // namespace dgld
