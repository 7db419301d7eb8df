#pragma once
// Helpers shared by the partition tests: scratch directories and small files.

#include <filesystem>
#include <string>

namespace dgld::testing {

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Writes `text` to `path` (creating parent directories).
void write_text(const std::filesystem::path& path, const std::string& text);

// True when `dir` holds no entry whose name starts with `prefix` (no output and no
// hidden staging directory left behind).
bool no_entry_named(const std::filesystem::path& dir, const std::string& prefix);

}  // namespace dgld::testing
