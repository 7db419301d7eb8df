#include "partition/progress.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

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
  int64_t kib = -1;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f)) {
      if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    }
    std::fclose(f);
  }
  return kib < 0 ? peak_rss_bytes() : kib * 1024;
}

void reset_peak_rss() {
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

std::string memory_note() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  const double mib = 1 << 20;
  return fmt::format("rss {:.0f} MiB, phase peak {:.0f} MiB", static_cast<double>(resident) * ::sysconf(_SC_PAGESIZE) / mib,
                     static_cast<double>(phase_peak_rss_bytes()) / mib);
}

}  // namespace dgld
