#include "partition/text_reader.h"

#include <cstring>

#include "common/file_util.h"

namespace dgld {
namespace {
constexpr size_t kReadBytes = 4 << 20;
}

Result<std::unique_ptr<TextReader>> TextReader::open(const std::filesystem::path& path) {
  std::unique_ptr<TextReader> r(new TextReader());
  r->path_ = path.string();
  r->file_ = ::gzopen(path.c_str(), "rb");
  if (r->file_ == nullptr) return io_error("cannot open " + r->path_ + ": " + errno_string());
  ::gzbuffer(r->file_, 1 << 20);
  r->buf_.resize(kReadBytes);
  return r;
}

TextReader::~TextReader() {
  if (file_ != nullptr) ::gzclose(file_);
}

Status TextReader::error(const std::string& what) const {
  return invalid_argument(path_ + ":" + std::to_string(line_no_) + ": " + what);
}

// Moves the unread tail to the front and reads more; false when nothing more came.
Result<bool> TextReader::refill() {
  if (eof_) return false;
  const size_t tail = end_ - begin_;
  if (begin_ > 0) std::memmove(buf_.data(), buf_.data() + begin_, tail);
  begin_ = 0;
  end_ = tail;
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // a line longer than the buffer
  const int n = ::gzread(file_, buf_.data() + end_, static_cast<unsigned>(buf_.size() - end_));
  if (n < 0) {
    int err = 0;
    const char* msg = ::gzerror(file_, &err);
    return io_error("cannot read " + path_ + " after line " + std::to_string(line_no_) + ": " +
                    (err == Z_ERRNO ? errno_string() : std::string(msg)));
  }
  if (n == 0) {
    eof_ = true;
    return false;
  }
  end_ += static_cast<size_t>(n);
  return true;
}

Result<bool> TextReader::next_line(std::string_view* line) {
  for (;;) {
    const char* start = buf_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    size_t len;
    if (nl != nullptr) {
      len = static_cast<const char*>(nl) - start;
      begin_ += len + 1;
    } else {
      DGLD_ASSIGN_OR_RETURN(bool more, refill());
      if (more) continue;
      if (begin_ == end_) return false;
      start = buf_.data() + begin_;  // last line without a newline
      len = end_ - begin_;
      begin_ = end_;
    }
    ++line_no_;
    if (len > 0 && start[len - 1] == '\r') --len;
    bool blank = true;
    for (size_t i = 0; i < len && blank; ++i) blank = start[i] == ' ' || start[i] == '\t';
    if (blank) continue;
    *line = std::string_view(start, len);
    return true;
  }
}

size_t count_fields(std::string_view line) {
  size_t n = 1;
  for (char c : line) n += c == ',';
  return n;
}

}  // namespace dgld
