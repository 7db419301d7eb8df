#include "partition/ogb_csv.h"

#include <vector>

namespace dgld::ogb_csv {
namespace fs = std::filesystem;

fs::path find(const fs::path& dir, const std::string& stem) {
  for (const char* ext : {".csv.gz", ".csv"}) {
    fs::path p = dir / (stem + ext);
    std::error_code ec;
    if (fs::exists(p, ec)) return p;
  }
  return {};
}

Result<fs::path> require(const fs::path& dir, const std::string& stem) {
  fs::path p = find(dir, stem);
  if (p.empty()) return not_found("missing " + (dir / (stem + ".csv")).string() + "[.gz]");
  return p;
}

Status open_first_line(const fs::path& path, const char* expected, std::unique_ptr<TextReader>* r,
                       std::string_view* line) {
  DGLD_ASSIGN_OR_RETURN(*r, TextReader::open(path));
  DGLD_ASSIGN_OR_RETURN(bool more, (*r)->next_line(line));
  if (!more) return invalid_argument(path.string() + ": empty file, expected " + expected);
  return Status::ok();
}

Result<int64_t> read_single_int(const fs::path& path) {
  std::unique_ptr<TextReader> r;
  std::string_view line;
  DGLD_RETURN_IF_ERROR(open_first_line(path, "one integer", &r, &line));
  int64_t v = 0;
  DGLD_RETURN_IF_ERROR(parse_fields(*r, line, &v, 1));
  return v;
}

Result<int64_t> feature_dim(const fs::path& path) {
  std::unique_ptr<TextReader> r;
  std::string_view line;
  DGLD_RETURN_IF_ERROR(open_first_line(path, "one row of features per node", &r, &line));
  const size_t d = count_fields(line);
  std::vector<float> row(d);
  DGLD_RETURN_IF_ERROR(parse_fields(*r, line, row.data(), d));
  return static_cast<int64_t>(d);
}

}  // namespace dgld::ogb_csv
