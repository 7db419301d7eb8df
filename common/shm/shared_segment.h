#pragma once
// SharedSegment: one named POSIX shared-memory segment (/dev/shm/<name>) that starts
// with a 64-byte header (magic, layout version, owner pid, creation time, payload size,
// kind tag, ready flag) followed by the 64-byte-aligned payload. docs/shared-memory.md
// describes the layout, the ready protocol and how stale segments are detected.
//
// The creator owns the name: its SharedSegment unlinks the segment when destroyed
// (unless release()d), and the segment sits in the process-wide cleanup registry
// (common/shm/cleanup.h) so a signal or exit() unlinks it too. An attached segment
// only owns its mapping. Move-only; data() stays valid until the object is destroyed.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dgld::shm {

inline constexpr uint64_t kSegmentMagic = 0x314d4853444c4744ull;  // "DGLDSHM1" little-endian
inline constexpr uint32_t kSegmentLayoutVersion = 1;
inline constexpr size_t kSegmentHeaderBytes = 64;
inline constexpr size_t kMaxSegmentNameLength = 255;  // including the leading '/'

using Deadline = std::chrono::steady_clock::time_point;

struct SegmentOptions {
  uint32_t kind = 0;          // user tag stored in the header (see kind())
  bool replace_stale = true;  // replace a segment whose owner is dead; else already_exists
};

class SharedSegment {
 public:
  // Creates `name` with `bytes` of zeroed payload, reserved up front (a full /dev/shm
  // is resource_exhausted here, not a SIGBUS later). An existing segment whose owner
  // is alive is already_exists naming the pid; a stale one is replaced with a warning.
  // Readers see the segment only after mark_ready().
  static Result<SharedSegment> create(const std::string& name, size_t bytes,
                                      const SegmentOptions& options = {});

  // Maps an existing segment, waiting until `deadline` for it to appear and be ready.
  // not_found if it never appears, timeout if it is never marked ready, closed if its
  // owner dies first, corruption for a bad header. Every error names the segment.
  static Result<SharedSegment> attach(const std::string& name, bool read_only, Deadline deadline);

  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();

  // The payload (64-byte aligned). mutable_data() is nullptr for a read-only mapping.
  const void* data() const { return payload_; }
  void* mutable_data() { return read_only_ ? nullptr : payload_; }
  size_t size() const { return payload_bytes_; }

  const std::string& name() const { return name_; }
  bool read_only() const { return read_only_; }
  bool is_owner() const { return owner_; }
  uint32_t kind() const;
  pid_t owner_pid() const;
  int64_t created_unix_ns() const;
  bool is_ready() const;

  // Maps every page of this process's mapping now (populate_pages), instead of
  // one fault per page on first touch; for segments used whole (batch slots).
  void populate();

  // Publishes the payload: a release store of the ready flag, so a reader that sees
  // ready also sees every byte written before. Needs a writable mapping.
  Status mark_ready();

  // Keeps the segment after this object is destroyed (no unlink) and drops it from
  // the cleanup registry. The mapping stays until destruction.
  void release();

 private:
  SharedSegment() = default;
  void reset();

  std::string name_;
  void* base_ = nullptr;  // mapping of header + payload
  size_t mapped_bytes_ = 0;
  void* payload_ = nullptr;
  size_t payload_bytes_ = 0;
  bool read_only_ = false;
  bool owner_ = false;
  pid_t creator_pid_ = 0;  // a forked child never unlinks its parent's segments
};

// Ok when `name` is a valid shm name: a leading '/', no other '/', 2..255 characters,
// not "/." or "/..". Otherwise invalid_argument naming it.
Status validate_segment_name(std::string_view name);

// "/dgld.<job_id>.m<machine_id>.<what>". Characters outside [A-Za-z0-9._-] become '_';
// when anything was replaced or the name had to be shortened, a 16-hex-digit hash of
// the original job id and `what` is appended so distinct inputs stay distinct.
std::string segment_name(std::string_view job_id, int machine_id, std::string_view what);

}  // namespace dgld::shm
