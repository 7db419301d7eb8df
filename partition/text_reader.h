#pragma once
// Streaming reader for the numeric text files dgl-partition takes as input (CSV,
// optionally gzip-compressed: zlib reads both transparently). Lines come out one at
// a time from a large buffer; numbers are parsed with std::from_chars. Every error
// names the file and line.

#include <zlib.h>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dgld {

class TextReader {
 public:
  static Result<std::unique_ptr<TextReader>> open(const std::filesystem::path& path);
  ~TextReader();
  TextReader(const TextReader&) = delete;
  TextReader& operator=(const TextReader&) = delete;

  // Next line without its '\n' (and '\r'); false at end of file. Skips blank lines.
  Result<bool> next_line(std::string_view* line);
  int64_t line_number() const { return line_no_; }
  const std::string& path() const { return path_; }
  // "FILE:LINE: <what>" as an invalid_argument Status.
  Status error(const std::string& what) const;

 private:
  TextReader() = default;
  Result<bool> refill();

  std::string path_;
  gzFile file_ = nullptr;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t line_no_ = 0;
};

// Parses exactly out.size() comma-separated numbers of `line` into `out`; an error
// names the reader's file and line, the column and the offending text.
template <typename T>
Status parse_fields(const TextReader& r, std::string_view line, T* out, size_t count) {
  const char* p = line.data();
  const char* end = p + line.size();
  for (size_t i = 0; i < count; ++i) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    const char* tok = p;
    auto [next, ec] = std::from_chars(p, end, out[i]);
    if (ec != std::errc() || next == tok) {
      const char* stop = tok;
      while (stop < end && *stop != ',') ++stop;
      if (tok == end && i > 0 && line.back() != ',') {
        return r.error("expected " + std::to_string(count) + " values, got " + std::to_string(i));
      }
      return r.error("column " + std::to_string(i + 1) + ": '" + std::string(tok, stop) + "' is not a valid " +
                     (std::is_floating_point_v<T> ? "number" : "integer"));
    }
    p = next;
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (i + 1 < count) {
      if (p == end) return r.error("expected " + std::to_string(count) + " values, got " + std::to_string(i + 1));
      if (*p != ',') return r.error("column " + std::to_string(i + 1) + ": unexpected '" + std::string(1, *p) + "'");
      ++p;
    }
  }
  if (p != end) {
    size_t extra = 1;
    for (const char* q = p; q < end; ++q) extra += *q == ',';
    if (*p == ',') {
      return r.error("expected " + std::to_string(count) + " values, got " + std::to_string(count + extra - 1));
    }
    return r.error("column " + std::to_string(count) + ": trailing text '" + std::string(p, end) + "'");
  }
  return Status::ok();
}

// Number of comma-separated fields in a line.
size_t count_fields(std::string_view line);

}  // namespace dgld
