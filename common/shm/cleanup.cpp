#include "common/shm/cleanup.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace dgld::shm {
namespace {

// A slot's life: free -> writing (registering thread fills pid and name) -> used ->
// claimed_unlink / claimed_forget (the claiming thread unlinks or not) -> free.
// The name is only written in `writing`, so it is stable in every other state.
enum SlotState : int { free_slot = 0, writing = 1, used = 2, claimed_unlink = 3, claimed_forget = 4 };

constexpr size_t kNameCapacity = 256;  // 255 characters + NUL
constexpr char kShmDir[] = "/dev/shm";

struct Slot {
  std::atomic<int> state{free_slot};
  pid_t pid = 0;
  char name[kNameCapacity] = {};
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

Slot g_slots[kMaxRegisteredSegments];

std::once_flag g_atexit_once;
std::mutex g_install_mu;
struct sigaction g_previous[NSIG];

bool same_name(const char* a, std::string_view b) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return a[b.size()] == '\0';
}

// unlink("/dev/shm" + name): async-signal-safe, unlike building a std::string.
void unlink_shm_path(const char* name) {
  char path[sizeof(kShmDir) + kNameCapacity];
  size_t n = 0;
  for (const char* p = kShmDir; *p != '\0'; ++p) path[n++] = *p;
  for (const char* p = name; *p != '\0' && n + 1 < sizeof(path); ++p) path[n++] = *p;
  path[n] = '\0';
  ::unlink(path);
}

// Claims this process's used slot named `name`; nullptr when there is none.
Slot* claim(std::string_view name, SlotState how) {
  const pid_t self = ::getpid();
  for (Slot& s : g_slots) {
    int expected = used;
    if (s.state.load(std::memory_order_acquire) != used) continue;
    if (s.pid != self || !same_name(s.name, name)) continue;
    if (s.state.compare_exchange_strong(expected, how, std::memory_order_acq_rel)) return &s;
  }
  return nullptr;
}

bool is_fault_signal(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL;
}

void on_signal(int sig, siginfo_t* info, void* /*context*/) {
  const int saved_errno = errno;
  unlink_all_registered_segments();
  // Hand the signal to whoever had it before (normally the default action). A fault
  // raised by the kernel recurs when the faulting instruction re-runs; anything else
  // (kill, abort, raise) is sent again and arrives once this handler returns.
  ::sigaction(sig, &g_previous[sig], nullptr);
  const bool kernel_fault = info != nullptr && info->si_code > 0 && is_fault_signal(sig);
  if (!kernel_fault) ::raise(sig);
  errno = saved_errno;
}

enum class InstallRule { unless_ignored, only_if_default };

void install_one(int sig, InstallRule rule) {
  struct sigaction old {};
  if (::sigaction(sig, nullptr, &old) != 0) return;
  const bool has_handler = (old.sa_flags & SA_SIGINFO) != 0;
  if (has_handler && old.sa_sigaction == on_signal) return;  // installed already
  if (!has_handler && old.sa_handler == SIG_IGN) return;
  if (rule == InstallRule::only_if_default && (has_handler || old.sa_handler != SIG_DFL)) return;
  g_previous[sig] = old;
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigfillset(&sa.sa_mask);  // no second signal in the middle of the unlinks
  ::sigaction(sig, &sa, nullptr);
}

void ensure_atexit() {
  std::call_once(g_atexit_once, [] { std::atexit([] { unlink_all_registered_segments(); }); });
}

}  // namespace

void install_shm_cleanup_handlers(bool handle_term_signals) {
  ensure_atexit();
  std::lock_guard<std::mutex> lock(g_install_mu);
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) install_one(sig, InstallRule::unless_ignored);
  if (handle_term_signals) {
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) install_one(sig, InstallRule::unless_ignored);
  } else {
    install_one(SIGHUP, InstallRule::only_if_default);
  }
}

size_t unlink_all_registered_segments() {
  const pid_t self = ::getpid();
  size_t count = 0;
  for (Slot& s : g_slots) {
    int state = s.state.load(std::memory_order_acquire);
    if (state != used && state != claimed_unlink) continue;
    if (s.pid != self) continue;
    if (state == claimed_unlink) {
      // Another thread is unlinking it; a second unlink is harmless and covers the
      // case where this signal interrupted that thread before its unlink.
      unlink_shm_path(s.name);
      continue;
    }
    if (!s.state.compare_exchange_strong(state, claimed_unlink, std::memory_order_acq_rel)) continue;
    unlink_shm_path(s.name);
    s.state.store(free_slot, std::memory_order_release);
    ++count;
  }
  return count;
}

bool register_segment(std::string_view name) {
  if (name.empty() || name.size() >= kNameCapacity) return false;
  ensure_atexit();
  for (Slot& s : g_slots) {
    int expected = free_slot;
    if (s.state.load(std::memory_order_relaxed) != free_slot) continue;
    if (!s.state.compare_exchange_strong(expected, writing, std::memory_order_acq_rel)) continue;
    s.pid = ::getpid();
    std::memcpy(s.name, name.data(), name.size());
    s.name[name.size()] = '\0';
    s.state.store(used, std::memory_order_release);
    return true;
  }
  return false;
}

bool unlink_registered_segment(std::string_view name) {
  Slot* s = claim(name, claimed_unlink);
  if (s == nullptr) return false;
  ::shm_unlink(s->name);
  s->state.store(free_slot, std::memory_order_release);
  return true;
}

bool unregister_segment(std::string_view name) {
  Slot* s = claim(name, claimed_forget);
  if (s == nullptr) return false;
  s->state.store(free_slot, std::memory_order_release);
  return true;
}

size_t registered_segment_count() {
  const pid_t self = ::getpid();
  size_t count = 0;
  for (const Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) == used && s.pid == self) ++count;
  }
  return count;
}

}  // namespace dgld::shm
