#pragma once
// The OGB raw layout's CSV files (plain or gzip), as both OGB readers
// (file_input: homogeneous, hetero_input: ogbn-mag's typed layout) open them;
// errors name the file and line and say what was expected.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "partition/text_reader.h"

namespace dgld::ogb_csv {

// DIR/<stem>.csv.gz, else DIR/<stem>.csv; empty path if neither exists.
std::filesystem::path find(const std::filesystem::path& dir, const std::string& stem);
// The same, or "missing DIR/<stem>.csv[.gz]" (not_found).
Result<std::filesystem::path> require(const std::filesystem::path& dir, const std::string& stem);

// Opens `path` and reads its first line; an empty file is an error saying
// what was expected.
Status open_first_line(const std::filesystem::path& path, const char* expected, std::unique_ptr<TextReader>* r,
                       std::string_view* line);
// A file holding one integer (num-node-list.csv, num-edge-list.csv).
Result<int64_t> read_single_int(const std::filesystem::path& path);
// The number of columns of a feature file's first line (checked to parse).
Result<int64_t> feature_dim(const std::filesystem::path& path);

// Calls fn(value, reader) with the integer of every line.
template <typename F>
Status for_each_int(const std::filesystem::path& path, F&& fn) {
  DGLD_ASSIGN_OR_RETURN(auto r, TextReader::open(path));
  std::string_view line;
  for (;;) {
    DGLD_ASSIGN_OR_RETURN(bool more, r->next_line(&line));
    if (!more) return Status::ok();
    int64_t v = 0;
    DGLD_RETURN_IF_ERROR(parse_fields(*r, line, &v, 1));
    DGLD_RETURN_IF_ERROR(fn(v, *r));
  }
}

}  // namespace dgld::ogb_csv
