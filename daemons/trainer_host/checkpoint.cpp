#include "daemons/trainer_host/checkpoint.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "common/file_util.h"

namespace dgld::trainer {

namespace fs = std::filesystem;

CheckpointDir::CheckpointDir(fs::path root, int rank) : dir_(std::move(root) / fmt::format("rank-{}", rank)) {}

Status CheckpointDir::prepare() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return io_error(fmt::format("checkpoint directory {}: {}", dir_.string(), ec.message()));
  if (::access(dir_.c_str(), W_OK) != 0) {
    return io_error(fmt::format("checkpoint directory {} is not writable: {}", dir_.string(), errno_string()));
  }
  return Status::ok();
}

fs::path CheckpointDir::state_path(int epoch) const { return dir_ / fmt::format("epoch-{}.pt", epoch); }
fs::path CheckpointDir::meta_path(int epoch) const { return dir_ / fmt::format("epoch-{}.json", epoch); }

Result<int> CheckpointDir::latest() const {
  const fs::path path = dir_ / "LATEST";
  std::error_code ec;
  if (!fs::exists(path, ec)) return -1;
  DGLD_ASSIGN_OR_RETURN(std::string text, read_file(path));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  size_t used = 0;
  int epoch = -1;
  try {
    epoch = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || epoch < 0) {
    return corruption(fmt::format("{}: expected an epoch number, found '{}'", path.string(), text));
  }
  return epoch;
}

Status CheckpointDir::commit(int epoch) const {
  DGLD_RETURN_IF_ERROR(write_file_atomic(dir_ / "LATEST", fmt::format("{}\n", epoch)));
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    int e = -1;
    const std::string name = entry.path().filename().string();
    if (std::sscanf(name.c_str(), "epoch-%d.", &e) == 1 && e < epoch - 1) fs::remove(entry.path(), ec);
  }
  return Status::ok();
}

}  // namespace dgld::trainer
