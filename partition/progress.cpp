#include "partition/progress.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "common/process_memory.h"

namespace dgld {

double seconds_since(PartitionClock::time_point t) {
  return std::chrono::duration<double>(PartitionClock::now() - t).count();
}

int64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

// Peak resident memory since the last reset_peak_rss() (VmHWM), or since the start
// when the kernel does not let us reset it.
int64_t phase_peak_rss_bytes() {
  const int64_t hwm = read_process_memory().peak_rss;
  return hwm < 0 ? peak_rss_bytes() : hwm;
}

void reset_peak_rss() {
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

std::string memory_note() {
  const ProcessMemory m = read_process_memory();
  const double mib = 1 << 20;
  return fmt::format("rss {:.0f} MiB, phase peak {:.0f} MiB", static_cast<double>(std::max<int64_t>(m.rss, 0)) / mib,
                     static_cast<double>(m.peak_rss < 0 ? peak_rss_bytes() : m.peak_rss) / mib);
}

}  // namespace dgld
