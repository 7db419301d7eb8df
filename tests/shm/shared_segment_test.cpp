#include "common/shm/shared_segment.h"

#include <fcntl.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "tests/shm/shm_test_util.h"

using namespace dgld;
using namespace dgld::shm;
using namespace dgld::shm::testing;
using std::chrono::milliseconds;

namespace {

// The header as docs/shared-memory.md lays it out, for hand-made segments.
struct RawHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t kind;
  int64_t owner_pid;
  uint64_t owner_start_ticks;
  int64_t created_unix_ns;
  uint64_t payload_bytes;
  uint32_t header_bytes;
  uint32_t ready;
  uint64_t reserved;
};
static_assert(sizeof(RawHeader) == 64);

// Writes a segment by hand: `h` followed by `payload` zero bytes.
void write_raw_segment(const std::string& name, const void* header, size_t header_bytes, size_t payload) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(header_bytes + payload)) == 0);
  REQUIRE(::pwrite(fd, header, header_bytes, 0) == static_cast<ssize_t>(header_bytes));
  ::close(fd);
}

RawHeader valid_header(int64_t pid, uint64_t payload) {
  RawHeader h{};
  h.magic = kSegmentMagic;
  h.layout_version = kSegmentLayoutVersion;
  h.owner_pid = pid;
  h.payload_bytes = payload;
  h.header_bytes = kSegmentHeaderBytes;
  h.ready = 1;
  return h;
}

// The pid of a process that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = fork_child([] { return 0; });
  wait_child(pid);
  return pid;
}

}  // namespace

TEST_CASE("shm segment: header fields, alignment, ready flag", "[shm]") {
  const std::string name = unique_name("fields");
  ScopedUnlink cleanup({name});
  auto seg = SharedSegment::create(name, 1000, {.kind = 42});
  REQUIRE(seg.is_ok());
  CHECK(seg->size() == 1000);
  CHECK(reinterpret_cast<uintptr_t>(seg->data()) % 64 == 0);
  CHECK(seg->is_owner());
  CHECK(seg->kind() == 42);
  CHECK(seg->owner_pid() == ::getpid());
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(std::abs(now_ns - seg->created_unix_ns()) < int64_t{10'000'000'000});
  const auto* bytes = static_cast<const unsigned char*>(seg->data());
  CHECK(std::all_of(bytes, bytes + 1000, [](unsigned char c) { return c == 0; }));
  CHECK_FALSE(seg->is_ready());
  REQUIRE(seg->mark_ready().is_ok());
  CHECK(seg->is_ready());
}

TEST_CASE("shm segment: a child attaches read-only and read-write", "[shm]") {
  const std::string name = unique_name("cross");
  ScopedUnlink cleanup({name});
  auto seg = SharedSegment::create(name, 4096, {.kind = 7});
  REQUIRE(seg.is_ok());
  auto* p = static_cast<unsigned char*>(seg->mutable_data());
  for (size_t i = 0; i < 4096; ++i) p[i] = static_cast<unsigned char>(i * 31 + 5);
  REQUIRE(seg->mark_ready().is_ok());
  const pid_t parent = ::getpid();

  const int reader = run_in_child([&] {
    auto s = SharedSegment::attach(name, /*read_only=*/true, in_ms(2000));
    if (!s.is_ok()) return 2;
    if (s->size() != 4096 || s->kind() != 7 || s->owner_pid() != parent || s->is_owner()) return 3;
    if (s->mutable_data() != nullptr || !s->read_only()) return 4;
    const auto* q = static_cast<const unsigned char*>(s->data());
    for (size_t i = 0; i < 4096; ++i) {
      if (q[i] != static_cast<unsigned char>(i * 31 + 5)) return 5;
    }
    return s->mark_ready().code() == StatusCode::invalid_argument ? 0 : 6;
  });
  CHECK(exited_with(reader, 0));

  const int writer = run_in_child([&] {
    auto s = SharedSegment::attach(name, /*read_only=*/false, in_ms(2000));
    if (!s.is_ok()) return 2;
    std::memset(s->mutable_data(), 0xab, 16);
    return 0;
  });
  CHECK(exited_with(writer, 0));
  CHECK(p[0] == 0xab);
  CHECK(p[15] == 0xab);
  CHECK(p[16] == static_cast<unsigned char>(16 * 31 + 5));
  CHECK(segment_exists(name));  // an attached segment never unlinks
}

TEST_CASE("shm segment: attach waits for the segment and for ready", "[shm]") {
  const std::string name = unique_name("wait");
  ScopedUnlink cleanup({name});
  // The child starts first, like a backup server starting while the main one loads.
  const pid_t child = fork_child([&] {
    const auto start = std::chrono::steady_clock::now();
    auto s = SharedSegment::attach(name, true, in_ms(5000));
    if (!s.is_ok()) return 2;
    if (std::chrono::steady_clock::now() - start < milliseconds(150)) return 3;
    return static_cast<const char*>(s->data())[0] == 'x' ? 0 : 4;
  });
  std::this_thread::sleep_for(milliseconds(80));
  auto seg = SharedSegment::create(name, 64);
  REQUIRE(seg.is_ok());
  std::this_thread::sleep_for(milliseconds(120));
  static_cast<char*>(seg->mutable_data())[0] = 'x';
  REQUIRE(seg->mark_ready().is_ok());
  CHECK(exited_with(wait_child(child), 0));
}

TEST_CASE("shm segment: attach times out, or fails fast when the owner died", "[shm]") {
  SECTION("never ready: timeout naming the segment") {
    const std::string name = unique_name("never-ready");
    ScopedUnlink cleanup({name});
    auto seg = SharedSegment::create(name, 128);
    REQUIRE(seg.is_ok());
    const auto start = std::chrono::steady_clock::now();
    auto s = SharedSegment::attach(name, true, in_ms(100));
    CHECK(std::chrono::steady_clock::now() - start >= milliseconds(100));
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == StatusCode::timeout);
    CHECK(contains(s.status().message(), name));
    CHECK(contains(s.status().message(), "not marked ready"));
  }
  SECTION("missing: not_found naming the segment") {
    const std::string name = unique_name("missing");
    auto s = SharedSegment::attach(name, true, in_ms(30));
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == StatusCode::not_found);
    CHECK(contains(s.status().message(), name));
  }
  SECTION("owner died before ready: closed naming the pid") {
    const std::string name = unique_name("died");
    ScopedUnlink cleanup({name});
    const pid_t child = fork_child([&] {
      auto s = SharedSegment::create(name, 128);
      if (!s.is_ok()) return 2;
      s->release();  // leave it behind, never ready
      return 0;
    });
    REQUIRE(exited_with(wait_child(child), 0));
    auto s = SharedSegment::attach(name, true, in_ms(5000));
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == StatusCode::closed);
    CHECK(contains(s.status().message(), std::to_string(child)));
    CHECK(contains(s.status().message(), name));
  }
}

TEST_CASE("shm segment: a live owner makes create fail with already_exists", "[shm]") {
  const std::string name = unique_name("live");
  ScopedUnlink cleanup({name});
  Pipe created, done;
  const pid_t child = fork_child([&] {
    auto s = SharedSegment::create(name, 64);
    if (!s.is_ok()) return 2;
    created.signal();
    done.wait();
    return 0;
  });
  REQUIRE(created.wait());
  auto again = SharedSegment::create(name, 64);
  REQUIRE_FALSE(again.is_ok());
  CHECK(again.status().code() == StatusCode::already_exists);
  CHECK(contains(again.status().message(), name));
  CHECK(contains(again.status().message(), std::to_string(child)));
  done.signal();
  CHECK(exited_with(wait_child(child), 0));
  CHECK_FALSE(segment_exists(name));  // the child's destructor unlinked it

  // Also within one process.
  auto first = SharedSegment::create(name, 64);
  REQUIRE(first.is_ok());
  auto second = SharedSegment::create(name, 64);
  REQUIRE_FALSE(second.is_ok());
  CHECK(contains(second.status().message(), std::to_string(::getpid())));
}

TEST_CASE("shm segment: stale segments are detected and replaced", "[shm]") {
  const std::string name = unique_name("stale");
  ScopedUnlink cleanup({name});

  SECTION("a crashed creator: _exit without unlinking") {
    const pid_t child = fork_child([&] {
      auto s = SharedSegment::create(name, 256);
      if (!s.is_ok()) return 2;
      static_cast<char*>(s->mutable_data())[0] = 'o';
      ::_exit(s->mark_ready().is_ok() ? 0 : 3);  // no destructor, no atexit: a crash
      return 4;
    });
    REQUIRE(exited_with(wait_child(child), 0));
    REQUIRE(segment_exists(name));

    auto keep = SharedSegment::create(name, 64, {.replace_stale = false});
    REQUIRE_FALSE(keep.is_ok());
    CHECK(keep.status().code() == StatusCode::already_exists);
    CHECK(contains(keep.status().message(), "owner pid " + std::to_string(child) + " is dead"));

    auto fresh = SharedSegment::create(name, 64);
    REQUIRE(fresh.is_ok());
    CHECK(fresh->owner_pid() == ::getpid());
    CHECK(fresh->size() == 64);
    CHECK(static_cast<const char*>(fresh->data())[0] == 0);
  }
  SECTION("a crashed creator nobody reaped yet (a zombie, as under a container without init)") {
    const pid_t child = fork_child([&] {
      auto s = SharedSegment::create(name, 256);
      if (!s.is_ok()) return 2;
      ::_exit(s->mark_ready().is_ok() ? 0 : 3);
      return 4;
    });
    // Not reaped: the pid exists (kill(pid, 0) succeeds) until wait_child below.
    auto zombie = [&] {
      std::ifstream in("/proc/" + std::to_string(child) + "/stat");
      std::string stat;
      std::getline(in, stat);
      const auto close = stat.rfind(')');
      return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
    };
    for (int i = 0; i < 500 && !zombie(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(zombie());
    REQUIRE(segment_exists(name));
    auto keep = SharedSegment::create(name, 64, {.replace_stale = false});
    REQUIRE_FALSE(keep.is_ok());
    CHECK(contains(keep.status().message(), "owner pid " + std::to_string(child) + " is dead (a zombie)"));
    auto fresh = SharedSegment::create(name, 64);
    REQUIRE(fresh.is_ok());
    CHECK(fresh->owner_pid() == ::getpid());
    CHECK(exited_with(wait_child(child), 0));
  }
  SECTION("a hand-written header with a dead pid") {
    const RawHeader h = valid_header(dead_pid(), 32);
    write_raw_segment(name, &h, sizeof(h), 32);
    auto fresh = SharedSegment::create(name, 64);
    REQUIRE(fresh.is_ok());
    CHECK(fresh->owner_pid() == ::getpid());
  }
  SECTION("a reused pid: our own pid but another start time (container restart)") {
    RawHeader h = valid_header(::getpid(), 32);
    h.owner_start_ticks = 1;
    write_raw_segment(name, &h, sizeof(h), 32);
    auto fresh = SharedSegment::create(name, 64);
    REQUIRE(fresh.is_ok());
  }
  SECTION("an incomplete header: a crash mid-create") {
    const char zeros[16] = {};
    write_raw_segment(name, zeros, sizeof(zeros), 0);
    auto attached = SharedSegment::attach(name, true, in_ms(50));
    REQUIRE_FALSE(attached.is_ok());
    CHECK(attached.status().code() == StatusCode::corruption);
    CHECK(contains(attached.status().message(), name));
    auto fresh = SharedSegment::create(name, 64);
    REQUIRE(fresh.is_ok());
    CHECK(fresh->size() == 64);
  }
}

TEST_CASE("shm segment: attach rejects bad headers", "[shm]") {
  const std::string name = unique_name("bad");
  ScopedUnlink cleanup({name});
  RawHeader h = valid_header(::getpid(), 64);
  std::string expect;
  SECTION("bad magic") {
    h.magic = 0x1234;
    expect = "not a dgld segment";
  }
  SECTION("other layout version") {
    h.layout_version = 99;
    expect = "layout version 99";
  }
  SECTION("size mismatch") {
    h.payload_bytes = 1 << 20;
    expect = "header says";
  }
  write_raw_segment(name, &h, sizeof(h), 64);
  auto s = SharedSegment::attach(name, true, in_ms(1000));
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.status().code() == StatusCode::corruption);
  CHECK(contains(s.status().message(), name));
  CHECK(contains(s.status().message(), expect));
}

TEST_CASE("shm segment: the creator unlinks on destruction unless released", "[shm]") {
  const std::string name = unique_name("dtor");
  ScopedUnlink cleanup({name});
  {
    auto seg = SharedSegment::create(name, 64);
    REQUIRE(seg.is_ok());
    CHECK(segment_exists(name));
    SharedSegment moved = std::move(seg).value();  // ownership moves with the object
    CHECK(moved.is_owner());
    CHECK(segment_exists(name));
  }
  CHECK_FALSE(segment_exists(name));
  {
    auto seg = SharedSegment::create(name, 64);
    REQUIRE(seg.is_ok());
    seg->release();
    CHECK_FALSE(seg->is_owner());
  }
  CHECK(segment_exists(name));
}

TEST_CASE("shm segment: a full /dev/shm is resource_exhausted at create", "[shm]") {
  struct statvfs vfs {};
  REQUIRE(::statvfs("/dev/shm", &vfs) == 0);
  if (vfs.f_blocks == 0) {
    WARN("/dev/shm has no size limit; skipping");
    return;
  }
  const size_t too_big = static_cast<size_t>(vfs.f_blocks) * vfs.f_frsize + (size_t{1} << 30);
  const std::string name = unique_name("full");
  ScopedUnlink cleanup({name});
  auto seg = SharedSegment::create(name, too_big);
  REQUIRE_FALSE(seg.is_ok());
  CHECK(seg.status().code() == StatusCode::resource_exhausted);
  CHECK(contains(seg.status().message(), "/dev/shm"));
  CHECK(contains(seg.status().message(), std::to_string(too_big + kSegmentHeaderBytes)));
  CHECK_FALSE(segment_exists(name));
}

TEST_CASE("shm names: validation and sanitising", "[shm]") {
  CHECK(validate_segment_name("/ok.name-1_x").is_ok());
  CHECK_FALSE(validate_segment_name("no-slash").is_ok());
  CHECK_FALSE(validate_segment_name("/a/b").is_ok());
  CHECK_FALSE(validate_segment_name("/").is_ok());
  CHECK_FALSE(validate_segment_name("/..").is_ok());
  CHECK_FALSE(validate_segment_name("/" + std::string(255, 'a')).is_ok());
  CHECK(validate_segment_name("/" + std::string(254, 'a')).is_ok());
  CHECK(SharedSegment::create("bad/name", 8).status().code() == StatusCode::invalid_argument);

  CHECK(segment_name("job1", 0, "graph") == "/dgld.job1.m0.graph");
  CHECK(segment_name("job1", 3, "node_feat.feat-0") == "/dgld.job1.m3.node_feat.feat-0");

  const std::string a = segment_name("job 1", 0, "_N/feat");
  const std::string b = segment_name("job 1", 0, "_N:feat");
  const std::string c = segment_name("job_1", 0, "_N_feat");
  for (const auto& n : {a, b, c}) CHECK(validate_segment_name(n).is_ok());
  CHECK(a.rfind("/dgld.job_1.m0._N_feat-", 0) == 0);
  CHECK(a != b);
  CHECK(a != c);
  CHECK(c == "/dgld.job_1.m0._N_feat");

  const std::string long1 = segment_name("job", 1, std::string(400, 'x') + "1");
  const std::string long2 = segment_name("job", 1, std::string(400, 'x') + "2");
  CHECK(long1.size() <= kMaxSegmentNameLength);
  CHECK(validate_segment_name(long1).is_ok());
  CHECK(long1 != long2);

  // A sanitised name really works as a segment name.
  const std::string odd = segment_name("test" + std::to_string(::getpid()), 0, "feat/ü ?*");
  ScopedUnlink cleanup({odd});
  CHECK(SharedSegment::create(odd, 8).is_ok());
}
