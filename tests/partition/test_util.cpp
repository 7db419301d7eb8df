#include "tests/partition/test_util.h"

#include <unistd.h>

#include <atomic>
#include <fstream>

namespace dgld::testing {
namespace fs = std::filesystem;

std::vector<std::unique_ptr<MappedPartition>> open_all(const fs::path& json, PartitionConfig* config) {
  auto c = load_part_config(json);
  REQUIRE(c.is_ok());
  *config = *c;
  std::vector<std::unique_ptr<MappedPartition>> parts;
  for (int i = 0; i < c->num_parts; ++i) {
    auto p = open_partition(*c, i, true);
    REQUIRE(p.is_ok());
    parts.push_back(std::move(p).value());
  }
  return parts;
}

VerifyReport require_verified(const fs::path& json) {
  VerifyReport r;
  Status st = verify_partitions(json, &r);
  INFO(st.to_string());
  REQUIRE(st.is_ok());
  return r;
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = fs::temp_directory_path() /
          ("dgld-partition-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

bool no_entry_named(const fs::path& dir, const std::string& prefix) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 || name.rfind("." + prefix, 0) == 0) return false;
  }
  return true;
}

}  // namespace dgld::testing
