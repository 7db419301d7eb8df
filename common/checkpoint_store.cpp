#include "common/checkpoint_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "common/checksum.h"
#include "common/file_util.h"

namespace dgld {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kProgressPrefix = "dgld-progress ";

// The position of "ckpt-<E>-<S>.<ext>", nullopt for any other name.
std::optional<CheckpointPosition> parse_name(const std::string& name, const std::string& ext) {
  long long e = -1, s = -1;
  int used = 0;
  if (std::sscanf(name.c_str(), "ckpt-%lld-%lld.%n", &e, &s, &used) != 2 || used <= 0 || e < 0 || s < 0) return std::nullopt;
  if (name.substr(static_cast<size_t>(used)) != ext) return std::nullopt;
  CheckpointPosition p{e, s};
  if (name != fmt::format("ckpt-{}-{}.{}", e, s, ext)) return std::nullopt;  // no leading zeros or signs
  return p;
}

Status fsync_path(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open " + path.string() + " to flush it: " + errno_string());
  const bool ok = ::fsync(fd) == 0;
  const std::string err = ok ? "" : errno_string();
  ::close(fd);
  return ok ? Status::ok() : io_error("cannot flush " + path.string() + ": " + err);
}

// `len` bytes of `path` from `offset`; corruption when the file ends sooner.
Result<std::string> read_range(const fs::path& path, uint64_t offset, uint64_t len) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(fmt::format("cannot open {}: {}", path.string(), errno_string()));
  std::string out(len, '\0');
  uint64_t got = 0;
  while (got < len) {
    const ssize_t n = ::pread(fd, out.data() + got, len - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status st = io_error(fmt::format("cannot read {}: {}", path.string(), errno_string()));
      ::close(fd);
      return st;
    }
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (got < len) {
    return corruption(fmt::format("{}: {} bytes, but {} are needed (truncated)", path.string(), offset + got,
                                  offset + len));
  }
  return out;
}

// Writes `text` into the journal at `at`, cutting whatever follows, and flushes it.
Status write_journal(const fs::path& path, uint64_t at, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(fmt::format("cannot open {}: {}", path.string(), errno_string()));
  struct stat st {};
  Status result = Status::ok();
  if (::fstat(fd, &st) != 0) {
    result = io_error(fmt::format("cannot stat {}: {}", path.string(), errno_string()));
  } else if (static_cast<uint64_t>(st.st_size) < at) {
    result = corruption(fmt::format("{}: {} bytes, but the history to continue has {} (cut or replaced)",
                                    path.string(), st.st_size, at));
  } else if (::ftruncate(fd, static_cast<off_t>(at)) != 0) {
    result = io_error(fmt::format("cannot cut {} to {} bytes: {}", path.string(), at, errno_string()));
  }
  for (size_t done = 0; result.is_ok() && done < text.size();) {
    const ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) result = io_error(fmt::format("cannot write {}: {}", path.string(), errno_string()));
    else done += static_cast<size_t>(n);
  }
  if (result.is_ok() && ::fsync(fd) != 0) result = io_error(fmt::format("cannot flush {}: {}", path.string(), errno_string()));
  ::close(fd);
  return result;
}

}  // namespace

std::string CheckpointPosition::str() const {
  return step == 0 && epoch > 0 ? fmt::format("the end of epoch {}", epoch - 1)
                                : fmt::format("epoch {} step {}", epoch, step);
}

CheckpointStore::CheckpointStore(fs::path root, int rank)
    : dir_(std::move(root) / fmt::format("rank-{}", rank)), rank_(rank) {}

CheckpointStore CheckpointStore::replica(const fs::path& root, int rank) { return CheckpointStore(root / "replica", rank); }

Status CheckpointStore::prepare() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return io_error(fmt::format("checkpoint directory {}: {}", dir_.string(), ec.message()));
  if (::access(dir_.c_str(), W_OK) != 0) {
    return io_error(fmt::format("checkpoint directory {} is not writable: {}", dir_.string(), errno_string()));
  }
  return Status::ok();
}

fs::path CheckpointStore::payload_path(CheckpointPosition p) const {
  return dir_ / fmt::format("ckpt-{}-{}.pt", p.epoch, p.step);
}
fs::path CheckpointStore::meta_path(CheckpointPosition p) const {
  return dir_ / fmt::format("ckpt-{}-{}.json", p.epoch, p.step);
}
fs::path CheckpointStore::temp_payload_path(CheckpointPosition p) const {
  return dir_ / fmt::format("ckpt-{}-{}.pt.tmp.{}", p.epoch, p.step, ::getpid());
}

Status CheckpointStore::seal(CheckpointPosition p, const fs::path& written, json meta) const {
  if (!meta.is_object()) return invalid_argument("checkpoint metadata must be a JSON object");
  const fs::path payload = payload_path(p), meta_file = meta_path(p);
  std::error_code ec;
  fs::remove(meta_file, ec);  // an older seal of p: never paired with the new payload
  DGLD_RETURN_IF_ERROR(fsync_path(written, false));
  DGLD_ASSIGN_OR_RETURN(FileDigest d, digest_file(written));
  fs::rename(written, payload, ec);
  if (ec) return io_error(fmt::format("renaming {} to {}: {}", written.string(), payload.string(), ec.message()));
  meta["position"] = {{"epoch", p.epoch}, {"step", p.step}};
  meta["rank"] = rank_;
  meta["payload"] = {{"file", payload.filename().string()}, {"bytes", d.size}, {"crc32", d.crc32}};
  DGLD_RETURN_IF_ERROR(write_file_atomic(meta_file, meta.dump(2) + "\n"));
  return fsync_path(dir_, true);
}

std::vector<CheckpointPosition> CheckpointStore::on_disk() const {
  std::vector<CheckpointPosition> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (auto p = parse_name(entry.path().filename().string(), "json")) out.push_back(*p);
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

Result<json> CheckpointStore::verify(CheckpointPosition p) const {
  const fs::path meta_file = meta_path(p), payload = payload_path(p);
  DGLD_ASSIGN_OR_RETURN(std::string text, read_file(meta_file));
  json meta;
  try {
    meta = json::parse(text);
  } catch (const std::exception& e) {
    return corruption(fmt::format("{}: not valid JSON ({})", meta_file.string(), e.what()));
  }
  const json want_pos = {{"epoch", p.epoch}, {"step", p.step}};
  if (!meta.is_object() || meta.value("position", json()) != want_pos || meta.value("rank", -1) != rank_) {
    return corruption(fmt::format("{}: it does not describe rank {} at {}", meta_file.string(), rank_, p.str()));
  }
  const json info = meta.value("payload", json::object());
  if (!info.contains("bytes") || !info.contains("crc32")) {
    return corruption(fmt::format("{}: no payload size and CRC-32", meta_file.string()));
  }
  auto d = digest_file(payload);
  if (!d.is_ok()) return corruption(fmt::format("{}: {}", payload.string(), d.status().message()));
  const auto bytes = info["bytes"].get<uint64_t>();
  const auto crc = info["crc32"].get<uint32_t>();
  if (d->size != bytes) {
    return corruption(fmt::format("{}: {} bytes, but {} records {} (truncated or overwritten)", payload.string(),
                                  d->size, meta_file.filename().string(), bytes));
  }
  if (d->crc32 != crc) {
    return corruption(fmt::format("{}: CRC-32 {:08x}, but {} records {:08x} (the file was altered)", payload.string(),
                                  d->crc32, meta_file.filename().string(), crc));
  }
  DGLD_ASSIGN_OR_RETURN(const std::optional<HistoryMark> mark, history_mark(meta, meta_file));
  if (mark) {
    std::error_code ec;
    const uint64_t have = fs::exists(history_path(), ec) ? fs::file_size(history_path(), ec) : 0;
    if (ec || have < mark->bytes) {
      return corruption(fmt::format("{}: {} bytes, but {} records a history of {} (cut or replaced)",
                                    history_path().string(), ec ? 0 : have, meta_file.filename().string(),
                                    mark->bytes));
    }
  }
  return meta;
}

Result<std::optional<HistoryMark>> CheckpointStore::history_mark(const json& meta, const fs::path& file) {
  if (!meta.contains("history")) return std::optional<HistoryMark>();
  const json& h = meta["history"];
  if (!h.is_object() || !h.contains("bytes") || !h.contains("crc32") || !h["bytes"].is_number_unsigned() ||
      !h["crc32"].is_number_unsigned()) {
    return corruption(fmt::format("{}: \"history\" must be {{\"bytes\": N, \"crc32\": C}}, not {}", file.string(),
                                  h.dump()));
  }
  return std::optional<HistoryMark>(HistoryMark{h["bytes"].get<uint64_t>(), h["crc32"].get<uint32_t>()});
}

Result<HistoryMark> CheckpointStore::append_history(HistoryMark at, std::string_view text) const {
  DGLD_RETURN_IF_ERROR(write_journal(history_path(), at.bytes, text));
  return HistoryMark{at.bytes + text.size(), crc32_update(at.crc32, text.data(), text.size())};
}

Status CheckpointStore::read_history(HistoryMark mark, const std::function<Status(std::string_view)>& each) const {
  const fs::path path = history_path();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(fmt::format("cannot open {}: {}", path.string(), errno_string()));
  std::vector<char> buf(size_t{1} << 20);
  std::string partial;  // a line cut by the end of a piece
  uint64_t done = 0;
  uint32_t crc = 0;
  bool ends_line = true;
  Status st = Status::ok();
  while (st.is_ok() && done < mark.bytes) {
    const ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), mark.bytes - done), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = io_error(fmt::format("cannot read {}: {}", path.string(), errno_string()));
    } else if (n == 0) {
      st = corruption(fmt::format("{}: {} bytes, but the checkpoint records a history of {} (cut)", path.string(), done,
                                  mark.bytes));
    } else {
      crc = crc32_update(crc, buf.data(), static_cast<size_t>(n));
      done += static_cast<uint64_t>(n);
      ends_line = buf[static_cast<size_t>(n) - 1] == '\n';
      if (!each) continue;
      const std::string_view piece(buf.data(), static_cast<size_t>(n));
      size_t at = 0;
      for (size_t nl; st.is_ok() && (nl = piece.find('\n', at)) != std::string_view::npos; at = nl + 1) {
        if (partial.empty()) {
          st = each(piece.substr(at, nl - at));
        } else {
          partial.append(piece.substr(at, nl - at));
          st = each(partial);
          partial.clear();
        }
      }
      partial.append(piece.substr(std::min(at, piece.size())));
    }
  }
  ::close(fd);
  if (!st.is_ok()) return st;
  if (crc != mark.crc32) {
    return corruption(fmt::format("{}: CRC-32 of its first {} bytes is {:08x}, but the checkpoint records {:08x} (the "
                                  "file was altered)",
                                  path.string(), mark.bytes, crc, mark.crc32));
  }
  if (!ends_line) {
    return corruption(fmt::format("{}: its first {} bytes end inside a line", path.string(), mark.bytes));
  }
  return Status::ok();
}

Result<CheckpointStore::Files> CheckpointStore::read(CheckpointPosition p, HistoryMark history_from) const {
  DGLD_ASSIGN_OR_RETURN(const json meta, verify(p));
  Files f;
  DGLD_ASSIGN_OR_RETURN(f.payload, read_file(payload_path(p)));
  DGLD_ASSIGN_OR_RETURN(f.meta, read_file(meta_path(p)));
  DGLD_ASSIGN_OR_RETURN(const std::optional<HistoryMark> mark, history_mark(meta, meta_path(p)));
  if (!mark) return f;
  if (history_from.bytes <= mark->bytes) {
    DGLD_ASSIGN_OR_RETURN(f.history, read_range(history_path(), history_from.bytes, mark->bytes - history_from.bytes));
    if (crc32_update(history_from.crc32, f.history.data(), f.history.size()) == mark->crc32) {
      f.history_from = history_from;
      return f;
    }
  }
  // The receiver's journal is not a prefix of this one: all of it.
  DGLD_ASSIGN_OR_RETURN(f.history, read_range(history_path(), 0, mark->bytes));
  if (crc32_update(0, f.history.data(), f.history.size()) != mark->crc32) {
    Status st = read_history(*mark);  // its error names the journal and the CRCs
    return st.is_ok() ? corruption(fmt::format("{}: changed while it was read", history_path().string())) : st;
  }
  f.history_from = {};
  return f;
}

Status CheckpointStore::adopt(CheckpointPosition p, const Files& files, const std::string& from,
                              HistoryMark* mark_out) const {
  const auto refused = [&](const std::string& why) {
    return corruption(fmt::format("the copy of rank {}'s checkpoint of {} from {} is refused: {}", rank_, p.str(), from,
                                  why));
  };
  std::optional<HistoryMark> mark;
  try {
    auto m = history_mark(json::parse(files.meta), meta_path(p));
    if (!m.is_ok()) return refused(m.status().message());
    mark = *m;
  } catch (const std::exception& e) {
    return refused(fmt::format("{}: not valid JSON ({})", meta_path(p).string(), e.what()));
  }
  if (mark) {
    const HistoryMark& at = files.history_from;
    const uint32_t crc = crc32_update(at.crc32, files.history.data(), files.history.size());
    if (at.bytes + files.history.size() != mark->bytes || crc != mark->crc32) {
      return refused(fmt::format("its history ({} bytes from byte {}, CRC-32 {:08x}) does not end at the mark its "
                                 "JSON records ({} bytes, CRC-32 {:08x})",
                                 files.history.size(), at.bytes, crc, mark->bytes, mark->crc32));
    }
  }
  DGLD_RETURN_IF_ERROR(prepare());
  const fs::path payload = payload_path(p), meta_file = meta_path(p);
  std::error_code ec;
  fs::remove(meta_file, ec);  // an older copy of p: never paired with the new payload
  if (mark) {
    Status st = write_journal(history_path(), files.history_from.bytes, files.history);
    if (!st.is_ok()) return refused(st.message());
  }
  DGLD_RETURN_IF_ERROR(write_file_atomic(payload, files.payload));
  DGLD_RETURN_IF_ERROR(write_file_atomic(meta_file, files.meta));
  DGLD_RETURN_IF_ERROR(fsync_path(dir_, true));
  auto meta = verify(p);
  if (meta.is_ok()) {
    if (mark_out && mark) *mark_out = *mark;
    return Status::ok();
  }
  fs::remove(meta_file, ec);
  fs::remove(payload, ec);
  return refused(meta.status().message());
}

std::vector<CheckpointPosition> CheckpointStore::valid(std::vector<RefusedCheckpoint>* refused) const {
  std::vector<CheckpointPosition> out;
  for (const CheckpointPosition& p : on_disk()) {
    auto meta = verify(p);
    Status st = meta.status();
    if (st.is_ok()) {  // the journal's bytes too (verify checks only its length)
      auto mark = history_mark(*meta, meta_path(p));
      if (!mark.is_ok()) st = mark.status();
      else if (*mark) st = read_history(**mark).with_context(meta_path(p).string());
    }
    if (st.is_ok()) {
      out.push_back(p);
    } else if (refused) {
      refused->push_back({payload_path(p), st.message()});
    }
  }
  return out;
}

void CheckpointStore::prune(CheckpointPosition committed) const {
  std::set<CheckpointPosition> keep = {committed};
  for (const CheckpointPosition& p : on_disk()) {  // newest first
    if (p < committed) {
      keep.insert(p);
      break;
    }
  }
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    std::optional<CheckpointPosition> p = parse_name(name, "json");
    if (!p) p = parse_name(name, "pt");
    const bool temp = name.rfind("ckpt-", 0) == 0 && name.find(".tmp.") != std::string::npos;
    if (temp || (p && !keep.count(*p))) doomed.push_back(entry.path());
  }
  for (const auto& path : doomed) fs::remove(path, ec);
}

std::optional<CheckpointPosition> agreed_position(const std::vector<std::vector<CheckpointPosition>>& per_rank) {
  if (per_rank.empty()) return std::nullopt;
  std::set<CheckpointPosition> common(per_rank[0].begin(), per_rank[0].end());
  for (size_t r = 1; r < per_rank.size(); ++r) {
    std::set<CheckpointPosition> mine(per_rank[r].begin(), per_rank[r].end()), both;
    std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(), std::inserter(both, both.end()));
    common.swap(both);
  }
  if (common.empty()) return std::nullopt;
  return *common.rbegin();
}

namespace {

// Each machine's ranks in rank order; machines without trainers stay empty.
std::vector<std::vector<int>> ranks_by_machine(const std::vector<int>& machine_of_rank) {
  int machines = 0;
  for (int m : machine_of_rank) machines = std::max(machines, m + 1);
  std::vector<std::vector<int>> by(static_cast<size_t>(machines));
  for (size_t r = 0; r < machine_of_rank.size(); ++r) {
    if (machine_of_rank[r] >= 0) by[static_cast<size_t>(machine_of_rank[r])].push_back(static_cast<int>(r));
  }
  return by;
}

}  // namespace

std::vector<int> replica_holders(const std::vector<int>& machine_of_rank, int rank, int k) {
  std::vector<int> out;
  if (k <= 0 || rank < 0 || static_cast<size_t>(rank) >= machine_of_rank.size()) return out;
  const auto by = ranks_by_machine(machine_of_rank);
  const int machines = static_cast<int>(by.size()), own = machine_of_rank[static_cast<size_t>(rank)];
  const auto& mates = by[static_cast<size_t>(own)];
  const auto index = static_cast<size_t>(std::find(mates.begin(), mates.end(), rank) - mates.begin());
  for (int step = 1; step < machines && static_cast<int>(out.size()) < k; ++step) {
    const auto& there = by[static_cast<size_t>((own + step) % machines)];
    if (!there.empty()) out.push_back(there[index % there.size()]);
  }
  return out;
}

std::vector<int> replicas_held_by(const std::vector<int>& machine_of_rank, int rank, int k) {
  std::vector<int> out;
  for (int r = 0; r < static_cast<int>(machine_of_rank.size()); ++r) {
    const auto holders = replica_holders(machine_of_rank, r, k);
    if (std::find(holders.begin(), holders.end(), rank) != holders.end()) out.push_back(r);
  }
  return out;
}

std::vector<std::pair<int, int>> CheckpointPlan::transfers() const {
  std::vector<std::pair<int, int>> out;
  for (size_t r = 0; r < source.size(); ++r) {
    if (source[r] != static_cast<int>(r)) out.emplace_back(static_cast<int>(r), source[r]);
  }
  return out;
}

std::vector<int64_t> checkpoint_offer(const std::vector<std::vector<CheckpointPosition>>& held) {
  constexpr size_t k = kCheckpointExchange;
  std::vector<int64_t> row(held.size() * k, 0);  // 0: no position
  for (size_t r = 0; r < held.size(); ++r) {
    for (size_t i = 0; i < held[r].size() && i < k; ++i) row[r * k + i] = held[r][i].encode() + 1;
  }
  return row;
}

Result<CheckpointPlan> agreed_from_offers(std::span<const int64_t> table, int world, const std::string& dir,
                                          const std::string& dir_option, const std::string& replicas_option) {
  constexpr size_t k = kCheckpointExchange;
  const auto w = static_cast<size_t>(std::max(world, 0));
  if (world < 1 || table.size() != w * w * k) {
    return invalid_argument(fmt::format("checkpoint offers: {} values for {} ranks, each offering {} positions of each "
                                        "rank",
                                        table.size(), world, kCheckpointExchange));
  }
  // held[r][h]: the positions of rank r's files that rank h holds.
  std::vector<std::vector<std::set<CheckpointPosition>>> held(w, std::vector<std::set<CheckpointPosition>>(w));
  std::vector<std::vector<CheckpointPosition>> anywhere(w);  // by rank, newest first
  bool any = false;
  for (size_t h = 0; h < w; ++h) {
    for (size_t r = 0; r < w; ++r) {
      for (size_t i = 0; i < k; ++i) {
        const int64_t v = table[(h * w + r) * k + i];
        if (v > 0) held[r][h].insert(CheckpointPosition::decode(v - 1));
      }
    }
  }
  for (size_t r = 0; r < w; ++r) {
    std::set<CheckpointPosition> all;
    for (const auto& s : held[r]) all.insert(s.begin(), s.end());
    anywhere[r].assign(all.rbegin(), all.rend());
    any = any || !all.empty();
  }
  CheckpointPlan plan;
  plan.position = agreed_position(anywhere);
  if (plan.position) {
    for (size_t r = 0; r < w; ++r) {
      int from = held[r][r].count(*plan.position) ? static_cast<int>(r) : -1;
      for (size_t h = 0; h < w && from < 0; ++h) {
        if (held[r][h].count(*plan.position)) from = static_cast<int>(h);
      }
      plan.source.push_back(from);
    }
    return plan;
  }
  if (!any) return plan;
  std::string list;
  for (size_t r = 0; r < w; ++r) {
    list += fmt::format("{}rank {}: {}", list.empty() ? "" : "; ", r,
                        anywhere[r].empty() ? "none" : anywhere[r].front().str());
  }
  return not_found(fmt::format("no checkpoint in {} is held intact by every trainer ({}): a trainer whose machine was "
                               "replaced needs its files replicated on a machine still there ({} of at least 1) or {} "
                               "on storage every machine shares",
                               dir, list, replicas_option, dir_option));
}

std::string progress_line(const std::string& event, CheckpointPosition p) {
  return kProgressPrefix + json{{"event", event}, {"epoch", p.epoch}, {"step", p.step}}.dump();
}

std::optional<ProgressEvent> parse_progress_line(const std::string& line) {
  const auto at = line.find(kProgressPrefix);
  if (at == std::string::npos) return std::nullopt;
  try {
    const json j = json::parse(line.substr(at + std::string(kProgressPrefix).size()));
    ProgressEvent e;
    e.event = j.at("event").get<std::string>();
    e.position = {j.at("epoch").get<int64_t>(), j.at("step").get<int64_t>()};
    return e;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace dgld
