#pragma once
// Helpers shared by the partition tests: scratch directories and small files.

#include <catch2/catch.hpp>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/part_config.h"
#include "common/partition/array_file.h"
#include "common/partition/partition.h"
#include "partition/verify.h"

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

// Every partition of the config `json` (checksums verified); the config in *config.
std::vector<std::unique_ptr<MappedPartition>> open_all(const std::filesystem::path& json, PartitionConfig* config);

// --verify on `json` passes; its report.
VerifyReport require_verified(const std::filesystem::path& json);

// Rewrites an array file (with valid checksums) after `mutate(specs, data)` changed
// its arrays: one spec and one byte vector per array.
template <typename F>
void rewrite_arrays(const std::filesystem::path& path, ArrayFileKind kind, F&& mutate) {
  std::vector<ArraySpec> specs;
  std::vector<std::vector<std::byte>> data;
  {
    auto f = MappedArrayFile::open(path, kind, true);
    REQUIRE(f.is_ok());
    for (const auto& e : (*f)->arrays()) {
      specs.push_back({e.name, e.dtype, e.shape});
      data.emplace_back(e.data, e.data + e.length);
    }
  }
  mutate(specs, data);
  auto w = ArrayFileWriter::create(path, kind, specs);
  REQUIRE(w.is_ok());
  for (size_t i = 0; i < specs.size(); ++i) REQUIRE((*w)->append(data[i].data(), data[i].size()).is_ok());
  REQUIRE((*w)->finish().is_ok());
}

// Rewrites one array of an array file through `mutate(T* values, size_t count)`.
template <typename T, typename F>
void rewrite_array(const std::filesystem::path& path, ArrayFileKind kind, const std::string& name, F&& mutate) {
  rewrite_arrays(path, kind, [&](std::vector<ArraySpec>& specs, std::vector<std::vector<std::byte>>& data) {
    bool found = false;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].name != name) continue;
      mutate(reinterpret_cast<T*>(data[i].data()), data[i].size() / sizeof(T));
      found = true;
    }
    REQUIRE(found);
  });
}

}  // namespace dgld::testing
