#include "partition/staging.h"

#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

namespace dgld {
namespace fs = std::filesystem;

// DIR/.NAME<tag><pid> for DIR/NAME.
fs::path hidden_sibling(const fs::path& p, const char* tag) {
  std::string name(".");
  name += p.filename().string();
  name += tag;
  name += std::to_string(::getpid());
  return p.parent_path() / name;
}

Result<std::unique_ptr<StagingDir>> StagingDir::create(const fs::path& final_dir, bool overwrite) {
    std::error_code ec;
    if (final_dir.empty()) return invalid_argument("--output is required");
    if (fs::exists(final_dir, ec) && !fs::is_directory(final_dir, ec)) {
      return invalid_argument("output " + final_dir.string() + " exists and is not a directory");
    }
    if (fs::exists(final_dir, ec) && !overwrite && !(fs::is_directory(final_dir, ec) && fs::is_empty(final_dir, ec))) {
      return Status(StatusCode::already_exists, "output " + final_dir.string() + " exists and is not empty (pass --overwrite to replace it)");
    }
    fs::path abs = fs::absolute(final_dir, ec).lexically_normal();
    if (abs.filename().empty()) abs = abs.parent_path();
    fs::create_directories(abs.parent_path(), ec);
    if (ec) return io_error("cannot create " + abs.parent_path().string() + ": " + ec.message());
    std::unique_ptr<StagingDir> s(new StagingDir());
    s->final_ = abs;
    s->tmp_ = hidden_sibling(abs, ".partial-");
    fs::remove_all(s->tmp_, ec);
    if (!fs::create_directory(s->tmp_, ec)) return io_error("cannot create " + s->tmp_.string() + ": " + ec.message());
    return s;
}

StagingDir::~StagingDir() {
    std::error_code ec;
    if (!committed_) fs::remove_all(tmp_, ec);
}

Status StagingDir::commit() {
    std::error_code ec;
    fs::path old;
    if (fs::exists(final_, ec)) {
      old = hidden_sibling(final_, ".old-");
      fs::rename(final_, old, ec);
      if (ec) return io_error("cannot move " + final_.string() + " aside: " + ec.message());
    }
    fs::rename(tmp_, final_, ec);
    if (ec) {
      Status st = io_error("cannot rename " + tmp_.string() + " to " + final_.string() + ": " + ec.message());
      if (!old.empty()) fs::rename(old, final_, ec);
      return st;
    }
    committed_ = true;
    if (!old.empty()) fs::remove_all(old, ec);
    return Status::ok();
}

Status StagingDir::commit_into() {
    std::error_code ec;
    if (!fs::exists(final_, ec)) return commit();
    std::vector<std::pair<fs::path, fs::path>> moved_aside;  // (final entry, where it went)
    std::vector<fs::path> placed;
    auto undo = [&] {
      for (const fs::path& p : placed) fs::remove_all(p, ec);
      for (const auto& [entry, aside] : moved_aside) fs::rename(aside, entry, ec);
    };
    for (const auto& e : fs::directory_iterator(tmp_, ec)) {
      const fs::path target = final_ / e.path().filename();
      if (fs::exists(target, ec)) {
        const fs::path aside = hidden_sibling(target, ".old-");
        fs::rename(target, aside, ec);
        if (ec) {
          Status st = io_error("cannot move " + target.string() + " aside: " + ec.message());
          undo();
          return st;
        }
        moved_aside.emplace_back(target, aside);
      }
      fs::rename(e.path(), target, ec);
      if (ec) {
        Status st = io_error("cannot rename " + e.path().string() + " to " + target.string() + ": " + ec.message());
        undo();
        return st;
      }
      placed.push_back(target);
    }
    if (ec) {
      Status st = io_error("cannot list " + tmp_.string() + ": " + ec.message());
      undo();
      return st;
    }
    committed_ = true;
    for (const auto& [entry, aside] : moved_aside) fs::remove_all(aside, ec);
    fs::remove_all(tmp_, ec);
    return Status::ok();
}

}  // namespace dgld
