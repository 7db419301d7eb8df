#pragma once
// Time and process memory figures for dgl-partition's progress lines and
// stats (PartitionStats): whole-run and per-phase peak resident memory.

#include <chrono>
#include <cstdint>
#include <string>

namespace dgld {

using PartitionClock = std::chrono::steady_clock;
double seconds_since(PartitionClock::time_point t);

// Peak resident memory of the whole run (getrusage).
int64_t peak_rss_bytes();
// Peak resident memory since the last reset_peak_rss() (VmHWM), or since the
// start when the kernel does not let us reset it.
int64_t phase_peak_rss_bytes();
void reset_peak_rss();
// "rss 123 MiB, phase peak 456 MiB" for progress lines.
std::string memory_note();

}  // namespace dgld
