#pragma once
// What every fuzz target of tests/fuzz shares. A target defines
// LLVMFuzzerTestOneInput (and may define LLVMFuzzerInitialize); it is linked
// either with libFuzzer (-Dfuzz=true, clang: fuzz_<target>) or with
// replay_main.cpp (every build: fuzz_replay_<target>, run by meson test over
// the corpus plus deterministic mutations of it).
//
// A target calls FUZZ_CHECK for the invariants it checks beyond "no crash":
// a failed check prints the condition and aborts, which libFuzzer reports as
// a crash and the replay test as a failure.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define FUZZ_CHECK(cond, what)                                                                  \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   what);                                                                       \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

namespace dgld::fuzz {

// Silences every dgld logger (a fuzz run makes millions of bad requests).
void quiet_logging();

}  // namespace dgld::fuzz
