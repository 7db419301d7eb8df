#include "common/process_memory.h"

#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dgld {

ProcessMemory read_process_memory() {
  ProcessMemory m;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  const std::pair<const char*, int64_t*> fields[] = {
      {"VmRSS:", &m.rss}, {"VmHWM:", &m.peak_rss}, {"RssAnon:", &m.anon}, {"RssFile:", &m.file}, {"RssShmem:", &m.shmem}};
  char line[256];
  while (std::fgets(line, sizeof(line), f)) {
    for (const auto& [key, out] : fields) {
      const size_t n = std::strlen(key);
      long long kib = 0;
      if (std::strncmp(line, key, n) == 0 && std::sscanf(line + n, "%lld", &kib) == 1) *out = kib * 1024;
    }
  }
  std::fclose(f);
  return m;
}

std::string describe(const ProcessMemory& m) {
  auto mib = [](int64_t b) { return b < 0 ? std::string("?") : fmt::format("{:.0f}", static_cast<double>(b) / (1 << 20)); };
  return fmt::format("peak RSS {} MiB; now {} MiB: anon {}, file-backed {}, shared memory {}", mib(m.peak_rss), mib(m.rss),
                     mib(m.anon), mib(m.file), mib(m.shmem));
}

nlohmann::json to_json(const ProcessMemory& m) {
  return {{"peak_rss_bytes", m.peak_rss}, {"rss_bytes", m.rss}, {"anon_bytes", m.anon},
          {"file_bytes", m.file},         {"shmem_bytes", m.shmem}};
}

}  // namespace dgld
