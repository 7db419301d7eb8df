#pragma once
// What a process holds in memory, from /proc/self/status: resident set now and
// at its peak, split into anonymous memory (heap, libtorch's tensors),
// file-backed pages (code, memory-mapped partition files, shared with the
// graph-server that maps the same files) and shared memory (tensors and batch
// slots in /dev/shm). Bytes; -1 where the kernel does not say.

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace dgld {

struct ProcessMemory {
  int64_t rss = -1;       // VmRSS
  int64_t peak_rss = -1;  // VmHWM (since start, or since the last reset)
  int64_t anon = -1;      // RssAnon
  int64_t file = -1;      // RssFile
  int64_t shmem = -1;     // RssShmem
};

ProcessMemory read_process_memory();

// "peak RSS 512 MiB; now 480 MiB: anon 300, file 150, shmem 30".
std::string describe(const ProcessMemory& m);
// {"peak_rss_bytes", "rss_bytes", "anon_bytes", "file_bytes", "shmem_bytes"}.
nlohmann::json to_json(const ProcessMemory& m);

}  // namespace dgld
