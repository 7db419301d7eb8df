#include "common/shm/shared_segment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "common/file_util.h"
#include "common/logging.h"
#include "common/memory.h"
#include "common/shm/cleanup.h"

namespace dgld::shm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// The first 64 bytes of every segment (docs/shared-memory.md). magic, layout_version
// and owner_pid keep their offsets in every layout version, so stale detection works
// across versions.
struct SegmentHeader {
  uint64_t magic;              // kSegmentMagic, written last by the creator
  uint32_t layout_version;     // kSegmentLayoutVersion
  uint32_t kind;               // SegmentOptions::kind
  int64_t owner_pid;           // the creating process
  uint64_t owner_start_ticks;  // its start time (/proc/<pid>/stat field 22); 0 if unknown
  int64_t created_unix_ns;     // CLOCK_REALTIME at creation
  uint64_t payload_bytes;      // bytes after the header
  uint32_t header_bytes;       // kSegmentHeaderBytes: where the payload starts
  uint32_t ready;              // 0, then 1 (release store) once the payload is complete
  uint64_t reserved;
};
static_assert(sizeof(SegmentHeader) == kSegmentHeaderBytes);

// How long a segment may show an unwritten header before it counts as a crashed create.
// A live creator writes its header microseconds after shm_open.
constexpr milliseconds kHeaderGrace{200};
constexpr milliseconds kMaxPoll{20};

// status.h has no helper for this code.
Status exists_error(std::string message) { return {StatusCode::already_exists, std::move(message)}; }

struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string ms_since(Clock::time_point start) {
  return std::to_string(std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
}

// Sleeps a growing step (1 ms, doubling, at most kMaxPoll), never past `deadline`.
void poll_sleep(milliseconds& step, Deadline deadline) {
  std::this_thread::sleep_until(std::min(Clock::now() + step, deadline));
  step = std::min(step * 2, kMaxPoll);
}

// What /proc/<pid>/stat says of a process: its state letter (field 3) and its
// start time in clock ticks since boot (field 22); {0, 0} if unreadable.
struct ProcStat {
  char state = 0;
  uint64_t start_ticks = 0;
};
ProcStat read_proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces and ')'
  if (paren == std::string::npos) return {};
  std::istringstream fields(stat.substr(paren + 1));
  ProcStat ps;
  std::string field;
  for (int i = 3; i <= 22; ++i) {  // fields after the name start at number 3
    if (!(fields >> field)) return {};
    if (i == 3) ps.state = field.empty() ? 0 : field[0];
  }
  ps.start_ticks = std::strtoull(field.c_str(), nullptr, 10);
  return ps;
}

uint64_t process_start_ticks(pid_t pid) { return read_proc_stat(pid).start_ticks; }

// Why the recorded owner no longer holds the segment, or "" while it is alive. The
// owner is alive when its pid exists, is not a zombie (a killed server whose parent
// died too waits for a reaper that a container may not have) and, if both start
// times are known, it is the same process, not a new one that reused the pid (as
// after a container restart, where the next server may well get the same pid).
std::string owner_gone_reason(int64_t pid, uint64_t start_ticks) {
  if (pid <= 0 || pid > INT32_MAX) return fmt::format("its owner pid {} is not a valid pid", pid);
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    return fmt::format("its owner pid {} is dead", pid);
  }
  const ProcStat now = read_proc_stat(static_cast<pid_t>(pid));
  if (now.state == 'Z' || now.state == 'X') return fmt::format("its owner pid {} is dead (a zombie)", pid);
  if (start_ticks == 0) return "";
  if (now.start_ticks == 0 || now.start_ticks == start_ticks) return "";
  return fmt::format("its owner pid {} is dead (the pid now belongs to a process started later)", pid);
}

// Reads the header; false while the segment is shorter than a header.
bool read_header(int fd, SegmentHeader& h, off_t& file_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  file_bytes = st.st_size;
  if (st.st_size < static_cast<off_t>(sizeof(h))) return false;
  return ::pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h));
}

struct Existing {
  enum { gone, alive, stale } state = gone;
  int64_t pid = 0;
  std::string why;  // for stale
  Fd fd;            // open on the inspected segment, for the locked unlink
};

Result<Existing> inspect_existing(const std::string& name) {
  Existing e;
  e.fd.fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  if (e.fd.fd < 0) {
    if (errno == ENOENT) return e;
    return exists_error(fmt::format("shared-memory segment {} already exists and cannot be read: {}",
                                      name, errno_string()));
  }
  const auto start = Clock::now();
  const Deadline grace_end = start + kHeaderGrace;
  milliseconds step{1};
  SegmentHeader h{};
  off_t file_bytes = 0;
  for (;;) {
    if (read_header(e.fd.fd, h, file_bytes) && h.magic == kSegmentMagic) break;
    if (Clock::now() >= grace_end) {
      e.state = Existing::stale;
      e.why = fmt::format("it has no valid header after {} ms ({} bytes; a creator crashed while creating it?)",
                          ms_since(start), file_bytes);
      return e;
    }
    poll_sleep(step, grace_end);
  }
  e.pid = h.owner_pid;
  e.why = owner_gone_reason(h.owner_pid, h.owner_start_ticks);
  e.state = e.why.empty() ? Existing::alive : Existing::stale;
  return e;
}

// Unlinks the stale segment `e` inspected, unless `name` now names another segment.
// The flock on the stale inode serialises processes replacing it at the same time, so
// none of them can unlink the fresh segment another has just created.
void remove_stale(const std::string& name, const Existing& e) {
  if (::flock(e.fd.fd, LOCK_EX) != 0) return;
  Fd now;
  now.fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  if (now.fd < 0) return;
  struct stat a {}, b {};
  if (::fstat(e.fd.fd, &a) == 0 && ::fstat(now.fd, &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino) {
    ::shm_unlink(name.c_str());
  }
  // The lock goes with e.fd.
}

const SegmentHeader* header_of(const void* base) { return static_cast<const SegmentHeader*>(base); }

// Opens `name` for create (O_EXCL), replacing a stale segment of that name.
Result<int> open_exclusive(const std::string& name, const SegmentOptions& options) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) return fd;
    if (errno != EEXIST) {
      return io_error(fmt::format("cannot create shared-memory segment {}: {}", name, errno_string()));
    }
    DGLD_ASSIGN_OR_RETURN(Existing e, inspect_existing(name));
    if (e.state == Existing::alive) {
      return exists_error(fmt::format(
          "shared-memory segment {} already exists and its owner pid {} is alive{}", name, e.pid,
          e.pid == ::getpid() ? " (this process)" : ""));
    }
    if (e.state == Existing::stale) {
      if (!options.replace_stale) {
        return exists_error(fmt::format("stale shared-memory segment {} exists: {}; remove /dev/shm{}",
                                          name, e.why, name));
      }
      logger("shm")->warn("stale segment {} replaced: {}", name, e.why);
      remove_stale(name, e);
    }
  }
  return exists_error(fmt::format(
      "shared-memory segment {} keeps reappearing while being replaced (another process creating it?)",
      name));
}

Status reserve(int fd, const std::string& name, size_t total) {
  int rc;
  do {
    rc = ::posix_fallocate(fd, 0, static_cast<off_t>(total));
  } while (rc == EINTR);
  if (rc == 0) return Status::ok();
  if (rc == ENOSPC || rc == ENOMEM || rc == EFBIG) {
    return resource_exhausted(fmt::format(
        "cannot reserve {} bytes for shared-memory segment {}: /dev/shm is full ({}); free space there "
        "or enlarge it (docker: --shm-size)", total, name, std::strerror(rc)));
  }
  return io_error(fmt::format("cannot reserve {} bytes for shared-memory segment {} in /dev/shm: {}",
                              total, name, std::strerror(rc)));
}

}  // namespace

Result<SharedSegment> SharedSegment::create(const std::string& name, size_t bytes,
                                            const SegmentOptions& options) {
  DGLD_RETURN_IF_ERROR(validate_segment_name(name));
  if (bytes > (size_t{1} << 62)) {
    return invalid_argument(fmt::format("shared-memory segment {}: size {} is too large", name, bytes));
  }
  const size_t total = kSegmentHeaderBytes + bytes;
  Fd fd;
  DGLD_ASSIGN_OR_RETURN(fd.fd, open_exclusive(name, options));

  // From here on `seg` owns the name: an early return unlinks it.
  SharedSegment seg;
  seg.name_ = name;
  seg.creator_pid_ = ::getpid();
  if (!register_segment(name)) {
    ::shm_unlink(name.c_str());
    return resource_exhausted(fmt::format(
        "cannot create shared-memory segment {}: the cleanup registry is full ({} segments)", name,
        kMaxRegisteredSegments));
  }
  seg.owner_ = true;

  if (::ftruncate(fd.fd, static_cast<off_t>(total)) != 0) {
    return io_error(fmt::format("cannot size shared-memory segment {} to {} bytes: {}", name, total,
                                errno_string()));
  }
  // The header goes in first, magic last, so a racing create sees the owner pid.
  SegmentHeader h{};
  h.layout_version = kSegmentLayoutVersion;
  h.kind = options.kind;
  h.owner_pid = seg.creator_pid_;
  h.owner_start_ticks = process_start_ticks(seg.creator_pid_);
  h.created_unix_ns = static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch()).count());
  h.payload_bytes = bytes;
  h.header_bytes = kSegmentHeaderBytes;
  const uint64_t magic = kSegmentMagic;
  if (::pwrite(fd.fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h)) ||
      ::pwrite(fd.fd, &magic, sizeof(magic), 0) != static_cast<ssize_t>(sizeof(magic))) {
    return io_error(fmt::format("cannot write the header of shared-memory segment {}: {}", name,
                                errno_string()));
  }
  DGLD_RETURN_IF_ERROR(reserve(fd.fd, name, total));

  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (base == MAP_FAILED) {
    return io_error(fmt::format("cannot map shared-memory segment {} ({} bytes): {}", name, total,
                                errno_string()));
  }
  seg.base_ = base;
  seg.mapped_bytes_ = total;
  seg.payload_ = static_cast<char*>(base) + kSegmentHeaderBytes;
  seg.payload_bytes_ = bytes;
  logger("shm")->debug("created segment {} ({} payload bytes, kind {})", name, bytes, options.kind);
  return seg;
}

void SharedSegment::populate() {
  if (base_) populate_pages(base_, mapped_bytes_, !read_only_);
}

Result<SharedSegment> SharedSegment::attach(const std::string& name, bool read_only,
                                            Deadline deadline) {
  DGLD_RETURN_IF_ERROR(validate_segment_name(name));
  const auto start = Clock::now();
  milliseconds step{1};
  Fd fd;
  for (;;) {
    fd.fd = ::shm_open(name.c_str(), read_only ? O_RDONLY : O_RDWR, 0);
    if (fd.fd >= 0) break;
    if (errno != ENOENT) {
      return io_error(fmt::format("cannot open shared-memory segment {}: {}", name, errno_string()));
    }
    if (Clock::now() >= deadline) {
      return not_found(fmt::format("shared-memory segment {} does not exist (waited {} ms)", name,
                                   ms_since(start)));
    }
    poll_sleep(step, deadline);
  }

  SegmentHeader h{};
  off_t file_bytes = 0;
  for (;;) {
    const bool have = read_header(fd.fd, h, file_bytes);
    if (have && h.magic == kSegmentMagic) break;
    if (have && h.magic != 0) {
      return corruption(fmt::format("shared-memory segment {} is not a dgld segment (magic {:#018x})",
                                    name, h.magic));
    }
    if (Clock::now() >= deadline) {
      return corruption(fmt::format(
          "shared-memory segment {} has no header after {} ms ({} bytes): its creator died while "
          "creating it, or it is not a dgld segment", name, ms_since(start), file_bytes));
    }
    poll_sleep(step, deadline);
  }
  if (h.layout_version != kSegmentLayoutVersion) {
    return corruption(fmt::format("shared-memory segment {} has layout version {}; this build reads {}",
                                  name, h.layout_version, kSegmentLayoutVersion));
  }
  if (h.header_bytes != kSegmentHeaderBytes ||
      h.payload_bytes != static_cast<uint64_t>(file_bytes) - kSegmentHeaderBytes) {
    return corruption(fmt::format(
        "shared-memory segment {}: header says {} + {} bytes but the segment holds {} bytes", name,
        h.header_bytes, h.payload_bytes, file_bytes));
  }

  const size_t total = static_cast<size_t>(file_bytes);
  const int prot = read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  void* base = ::mmap(nullptr, total, prot, MAP_SHARED, fd.fd, 0);
  if (base == MAP_FAILED) {
    return io_error(fmt::format("cannot map shared-memory segment {} ({} bytes): {}", name, total,
                                errno_string()));
  }
  SharedSegment seg;
  seg.name_ = name;
  seg.base_ = base;
  seg.mapped_bytes_ = total;
  seg.payload_ = static_cast<char*>(base) + kSegmentHeaderBytes;
  seg.payload_bytes_ = h.payload_bytes;
  seg.read_only_ = read_only;

  // Wait for the creator's release store of `ready`, checking now and then that it lives.
  auto next_liveness_check = Clock::now();
  while (!seg.is_ready()) {
    if (Clock::now() >= next_liveness_check) {
      const std::string gone = owner_gone_reason(h.owner_pid, h.owner_start_ticks);
      if (!gone.empty()) {
        return closed_error(fmt::format("shared-memory segment {} was never marked ready: {}", name, gone));
      }
      next_liveness_check = Clock::now() + milliseconds(50);
    }
    if (Clock::now() >= deadline) {
      return timeout_error(fmt::format(
          "shared-memory segment {} was not marked ready within {} ms (owner pid {} is still loading?)",
          name, ms_since(start), h.owner_pid));
    }
    poll_sleep(step, deadline);
  }
  logger("shm")->debug("attached segment {} ({} payload bytes, {})", name, seg.payload_bytes_,
                       read_only ? "read-only" : "read-write");
  return seg;
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept { *this = std::move(other); }

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this == &other) return *this;
  reset();
  name_ = std::move(other.name_);
  base_ = std::exchange(other.base_, nullptr);
  mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  payload_ = std::exchange(other.payload_, nullptr);
  payload_bytes_ = std::exchange(other.payload_bytes_, 0);
  read_only_ = other.read_only_;
  owner_ = std::exchange(other.owner_, false);
  creator_pid_ = other.creator_pid_;
  return *this;
}

SharedSegment::~SharedSegment() { reset(); }

void SharedSegment::reset() {
  if (base_ != nullptr) ::munmap(base_, mapped_bytes_);
  // Unlink only what this process registered and nobody unlinked yet (a signal or
  // unlink_all_registered_segments() may have done it, and the name may be reused).
  if (owner_ && ::getpid() == creator_pid_) unlink_registered_segment(name_);
  base_ = payload_ = nullptr;
  mapped_bytes_ = payload_bytes_ = 0;
  owner_ = false;
}

uint32_t SharedSegment::kind() const { return base_ ? header_of(base_)->kind : 0; }

pid_t SharedSegment::owner_pid() const {
  return base_ ? static_cast<pid_t>(header_of(base_)->owner_pid) : 0;
}

int64_t SharedSegment::created_unix_ns() const { return base_ ? header_of(base_)->created_unix_ns : 0; }

bool SharedSegment::is_ready() const {
  return base_ != nullptr && __atomic_load_n(&header_of(base_)->ready, __ATOMIC_ACQUIRE) == 1;
}

Status SharedSegment::mark_ready() {
  if (base_ == nullptr || read_only_) {
    return invalid_argument(fmt::format("cannot mark shared-memory segment {} ready: {}", name_,
                                        base_ ? "it is mapped read-only" : "it is not mapped"));
  }
  __atomic_store_n(&static_cast<SegmentHeader*>(base_)->ready, 1u, __ATOMIC_RELEASE);
  return Status::ok();
}

void SharedSegment::release() {
  if (owner_ && ::getpid() == creator_pid_) unregister_segment(name_);
  owner_ = false;
}

Status validate_segment_name(std::string_view name) {
  const auto bad = [&](const char* why) {
    return invalid_argument(fmt::format("invalid shared-memory segment name '{}': {}", name, why));
  };
  if (name.size() < 2) return bad("too short");
  if (name.size() > kMaxSegmentNameLength) return bad("longer than 255 characters");
  if (name[0] != '/') return bad("must start with '/'");
  if (name.find('/', 1) != std::string_view::npos) return bad("no '/' allowed after the first");
  if (name.find('\0') != std::string_view::npos) return bad("contains a NUL byte");
  if (name == "/." || name == "/..") return bad("'.' and '..' are not segment names");
  return Status::ok();
}

std::string segment_name(std::string_view job_id, int machine_id, std::string_view what) {
  bool changed = false;
  const auto sanitize = [&](std::string_view s) {
    std::string out(s);
    for (char& c : out) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
      if (!ok) {
        c = '_';
        changed = true;
      }
    }
    return out;
  };
  std::string name = "/dgld." + sanitize(job_id) + ".m" + std::to_string(machine_id) + "." + sanitize(what);
  if (!changed && name.size() <= kMaxSegmentNameLength) return name;
  // FNV-1a over the original job id and `what` keeps sanitised names distinct.
  uint64_t hash = 0xcbf29ce484222325ull;
  const auto mix = [&](std::string_view s) {
    for (unsigned char c : s) hash = (hash ^ c) * 0x100000001b3ull;
  };
  mix(job_id);
  mix(std::string_view("\0", 1));
  mix(what);
  const std::string suffix = fmt::format("-{:016x}", hash);
  name.resize(std::min(name.size(), kMaxSegmentNameLength - suffix.size()));
  return name + suffix;
}

}  // namespace dgld::shm
