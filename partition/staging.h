#pragma once
// The hidden directory dgl-partition assembles an output in (partitions,
// chunks): DIR/.NAME.partial-<pid> beside the final DIR/NAME, renamed into place
// by commit() and removed otherwise, so a failed or killed run leaves no
// partial output under the final name (docs/partition-format.md, "Writing").

#include <filesystem>
#include <memory>

#include "common/status.h"

namespace dgld {

// DIR/.NAME<tag><pid> for DIR/NAME.
std::filesystem::path hidden_sibling(const std::filesystem::path& p, const char* tag);

class StagingDir {
 public:
  // An existing non-empty `final_dir` is an error unless `overwrite`.
  static Result<std::unique_ptr<StagingDir>> create(const std::filesystem::path& final_dir, bool overwrite);
  ~StagingDir();
  const std::filesystem::path& path() const { return tmp_; }
  const std::filesystem::path& final_path() const { return final_; }
  // Renames the staging directory to the final name (an existing one is moved
  // aside first and deleted after).
  Status commit();
  // Moves each entry of the staging directory into the final directory
  // (created if absent), replacing only the entries of the same names (each
  // moved aside first and deleted after); the final directory's other files
  // stay: DGL's partition_graph writing into an existing folder.
  Status commit_into();

 private:
  StagingDir() = default;
  std::filesystem::path final_, tmp_;
  bool committed_ = false;
};

}  // namespace dgld
