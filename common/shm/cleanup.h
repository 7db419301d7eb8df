#pragma once
// The process-wide registry of shared-memory segments this process created, so that
// every exit path unlinks them: destruction of the SharedSegment, exit()/return from
// main (atexit), termination signals and fatal signals.
//
// Names live in a fixed, preallocated table; the signal-time path only reads it and
// calls unlink("/dev/shm/<name>"), so it is async-signal-safe. Each entry records the
// pid that registered it: a forked child never unlinks its parent's segments.
// SharedSegment::create registers and unregisters by itself; daemons only call
// install_shm_cleanup_handlers() once at start and, if they like,
// unlink_all_registered_segments() on their own shutdown path.

#include <cstddef>
#include <string_view>

namespace dgld::shm {

inline constexpr size_t kMaxRegisteredSegments = 4096;

// Installs the signal handlers (the atexit hook is installed by the first registration).
// Always: SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL: unlink, then the previous
// disposition (normally the default: core dump) runs.
// handle_term_signals = true: also SIGTERM, SIGINT, SIGHUP: unlink, then the previous
// disposition (normally: terminate). Use it in programs without their own handlers.
// handle_term_signals = false: SIGTERM and SIGINT are left alone, for daemons that stop
// through an asio::signal_set and unlink on their shutdown path; SIGHUP is taken only
// if nobody handles it yet (default disposition).
// A signal the process ignores (SIG_IGN) stays ignored. Calling again is harmless.
void install_shm_cleanup_handlers(bool handle_term_signals);

// Unlinks every segment this process registered and empties the registry. Returns how
// many were registered. Async-signal-safe.
size_t unlink_all_registered_segments();

// Adds a segment this process just created. False when the table is full or the name
// is too long; the caller must then not rely on the registry.
bool register_segment(std::string_view name);

// Unlinks the segment if this process registered it, and forgets it. False (and no
// unlink) when it was not registered, e.g. already unlinked by a signal or by
// unlink_all_registered_segments().
bool unlink_registered_segment(std::string_view name);

// Forgets a segment without unlinking it (SharedSegment::release). False if absent.
bool unregister_segment(std::string_view name);

// How many segments this process has registered now.
size_t registered_segment_count();

}  // namespace dgld::shm
