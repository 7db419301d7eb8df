#include "common/shm/cleanup.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <vector>

#include "common/shm/shared_segment.h"
#include "tests/shm/shm_test_util.h"

using namespace dgld;
using namespace dgld::shm;
using namespace dgld::shm::testing;

namespace {

std::vector<std::string> names_for(const std::string& tag, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(unique_name(tag + "." + std::to_string(i)));
  return names;
}

// Segments a child keeps until it dies; never destroyed (but reachable, for LSan).
std::vector<SharedSegment>* g_kept = new std::vector<SharedSegment>;

// In a child: creates ready segments that no destructor will unlink, as in a crash;
// false if any create failed.
bool create_all(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    auto s = SharedSegment::create(n, 4096);
    if (!s.is_ok() || !s->mark_ready().is_ok()) return false;
    g_kept->push_back(std::move(s).value());
  }
  return true;
}

bool none_exist(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (segment_exists(n)) return false;
  }
  return true;
}

bool handler_installed(int sig) {
  struct sigaction sa {};
  ::sigaction(sig, nullptr, &sa);
  return (sa.sa_flags & SA_SIGINFO) != 0;
}

bool is_default(int sig) {
  struct sigaction sa {};
  ::sigaction(sig, nullptr, &sa);
  return (sa.sa_flags & SA_SIGINFO) == 0 && sa.sa_handler == SIG_DFL;
}

}  // namespace

TEST_CASE("shm cleanup: termination signals unlink everything (handle_term_signals=true)", "[shm]") {
  const int sig = GENERATE(SIGTERM, SIGINT, SIGHUP);
  const auto names = names_for("term" + std::to_string(sig), 3);
  ScopedUnlink cleanup(names);
  Pipe created;
  const pid_t child = fork_child([&] {
    install_shm_cleanup_handlers(true);
    if (!create_all(names)) return 2;
    created.signal();
    for (;;) ::pause();
  });
  REQUIRE(created.wait());
  CHECK_FALSE(none_exist(names));
  ::kill(child, sig);
  const int status = wait_child(child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == sig);  // the default action still ran
  CHECK(none_exist(names));
}

TEST_CASE("shm cleanup: fatal signals unlink, then the process dies of the signal", "[shm]") {
  const auto names = names_for("fatal", 2);
  ScopedUnlink cleanup(names);
  int expected_signal = 0;
  std::function<void()> crash;
  SECTION("a real segfault: writing to a read-only mapping") {
    expected_signal = SIGSEGV;
    crash = [&] {
      auto ro = SharedSegment::attach(names[0], true, in_ms(0));
      if (!ro.is_ok()) ::_exit(3);
      *const_cast<volatile char*>(static_cast<const volatile char*>(ro->data())) = 1;
    };
  }
  SECTION("abort()") {
    expected_signal = SIGABRT;
    crash = [] { std::abort(); };
  }
  SECTION("SIGBUS sent by kill") {
    expected_signal = SIGBUS;
    crash = [] { ::kill(::getpid(), SIGBUS); };
  }
  const int status = run_in_child([&] {
    install_shm_cleanup_handlers(false);
    if (!create_all(names)) return 2;
    crash();
    return 4;
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == expected_signal);
  CHECK(none_exist(names));
}

TEST_CASE("shm cleanup: exit() unlinks through atexit", "[shm]") {
  const auto names = names_for("exit", 2);
  ScopedUnlink cleanup(names);
  const int status = run_in_child([&] {
    if (!create_all(names)) return 2;
    std::exit(0);
  });
  CHECK(exited_with(status, 0));
  CHECK(none_exist(names));
}

TEST_CASE("shm cleanup: a forked child never unlinks its parent's segments", "[shm]") {
  const std::string name = unique_name("parent-owned");
  ScopedUnlink cleanup({name});
  auto seg = SharedSegment::create(name, 64);
  REQUIRE(seg.is_ok());
  const int status = run_in_child([&]() -> int {
    unlink_all_registered_segments();
    std::exit(0);  // atexit, and static destructors, in the child
  });
  CHECK(exited_with(status, 0));
  CHECK(segment_exists(name));
}

TEST_CASE("shm cleanup: handle_term_signals=false leaves SIGTERM and SIGINT alone", "[shm]") {
  const int status = run_in_child([] {
    install_shm_cleanup_handlers(false);
    if (!is_default(SIGTERM) || !is_default(SIGINT)) return 2;
    if (!handler_installed(SIGHUP) || !handler_installed(SIGSEGV) || !handler_installed(SIGABRT)) return 3;
    install_shm_cleanup_handlers(false);  // again: harmless
    return handler_installed(SIGBUS) ? 0 : 4;
  });
  CHECK(exited_with(status, 0));

  const int ignored = run_in_child([] {
    ::signal(SIGINT, SIG_IGN);  // as for a background job
    install_shm_cleanup_handlers(true);
    struct sigaction sa {};
    ::sigaction(SIGINT, nullptr, &sa);
    if ((sa.sa_flags & SA_SIGINFO) != 0 || sa.sa_handler != SIG_IGN) return 2;
    return handler_installed(SIGTERM) ? 0 : 3;
  });
  CHECK(exited_with(ignored, 0));
}

TEST_CASE("shm cleanup: the registry follows create, release and unlink_all", "[shm]") {
  const auto names = names_for("registry", 3);
  ScopedUnlink cleanup(names);
  const size_t before = registered_segment_count();
  auto a = SharedSegment::create(names[0], 64);
  auto b = SharedSegment::create(names[1], 64);
  auto c = SharedSegment::create(names[2], 64);
  REQUIRE((a.is_ok() && b.is_ok() && c.is_ok()));
  CHECK(registered_segment_count() == before + 3);
  c->release();
  CHECK(registered_segment_count() == before + 2);
  CHECK(unlink_all_registered_segments() == before + 2);
  CHECK(registered_segment_count() == 0);
  CHECK_FALSE(segment_exists(names[0]));
  CHECK_FALSE(segment_exists(names[1]));
  CHECK(segment_exists(names[2]));
  // The mappings stay usable after the unlink, and the destructors do not unlink again:
  // a new segment of the same name survives the old object.
  static_cast<char*>(a->mutable_data())[0] = 1;
  {
    auto again = SharedSegment::create(names[0], 64);
    REQUIRE(again.is_ok());
    again->release();
  }
  a = Status(StatusCode::internal, "dropped");  // destroys the old segment object
  CHECK(segment_exists(names[0]));
}
