#include "common/memory.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

namespace dgld {

namespace {

// A setting the user gave glibc through its environment variable
// (MALLOC_TRIM_THRESHOLD_ and the like) is theirs: it is left alone.
void set_unless_given(int param, int value, const char* env) {
  if (std::getenv(env) == nullptr) mallopt(param, value);
}

// The memory this process may use: physical memory, or the cgroup's limit
// (v2 memory.max, v1 memory.limit_in_bytes) when that is lower. 0: unknown.
int64_t usable_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  for (const char* limit_file : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(limit_file);
    int64_t limit = 0;
    if (f >> limit && limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;  // "max" fails to parse
  }
  return bytes;
}

}  // namespace

void tune_allocator_for_large_buffers() {
  // 32 MiB is glibc's largest mmap threshold: smaller blocks come from the heap.
  set_unless_given(M_MMAP_THRESHOLD, 32 << 20, "MALLOC_MMAP_THRESHOLD_");
  // Larger ones would still be fresh mmaps (a mini-batch's input features on
  // a million-node graph are ~100 MB): with mmap off they come from the heap
  // too and are reused instead of page-faulted and zeroed for every batch
  // (measured: standalone GraphSAGE epoch on 1 M nodes, fetch 46 s -> see
  // docs/performance.md).
  set_unless_given(M_MMAP_MAX, 0, "MALLOC_MMAP_MAX_");
  // Do not hand freed heap memory back to the kernel after every large free:
  // a step that frees more than the threshold at the heap's top gives it back,
  // and the next step faults it in again. At 256 MiB a Python GatedMean step
  // (tests/bench/udf_bench.py) faulted ~1 GB a step and took 1.6 s with UDFs
  // instead of 0.26 s (built-ins 0.25-0.85 s instead of 0.09 s).
  set_unless_given(M_TRIM_THRESHOLD, trim_threshold_bytes(), "MALLOC_TRIM_THRESHOLD_");
}

void populate_pages(void* p, size_t bytes, bool write) {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22, MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGE_SIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
  if (first < last) {
    (void)::madvise(reinterpret_cast<void*>(first), last - first, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
  }
}

std::unique_ptr<uint8_t[]> uninitialized_bytes(size_t bytes) {
  auto p = std::make_unique_for_overwrite<uint8_t[]>(bytes);
  if (bytes >= (size_t{256} << 10)) populate_pages(p.get(), bytes, true);
  return p;
}

bool trim_heap() { return ::malloc_trim(0) != 0; }

int trim_threshold_bytes() {
  constexpr int64_t kFloor = int64_t{256} << 20;
  const int64_t bytes = std::max(usable_memory_bytes() / 16, kFloor);
  return static_cast<int>(std::min<int64_t>(bytes, std::numeric_limits<int>::max()));
}

}  // namespace dgld

namespace dgld {

namespace {

bool asks_for_help_only(char** argv) {
  for (char** a = argv + 1; *a; ++a) {
    if (std::strcmp(*a, "--version") == 0 || std::strcmp(*a, "--help") == 0 || std::strcmp(*a, "-h") == 0) return true;
  }
  return false;
}

// Runs the program again with the same arguments (and the environment as it
// is now). Returns only when that is impossible (no /proc).
void reexec(char** argv) { ::execv("/proc/self/exe", argv); }

// The kernel's transparent huge page mode: the word in [brackets].
std::string transparent_huge_page_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  const auto b = line.find('['), e = line.find(']');
  return b == std::string::npos || e == std::string::npos || e < b ? "" : line.substr(b + 1, e - b - 1);
}

}  // namespace

void reexec_with_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  // --help and --version run no OpenMP: not worth loading the program twice.
  if (asks_for_help_only(argv)) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  reexec(argv);
  // execv failed: carry on with the default policy.
}

void reexec_with_huge_page_malloc(char** argv) {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const std::string current = tunables ? tunables : "";
  // Already set (by us, or by the user either way): leave it as it is.
  if (current.find("glibc.malloc.hugetlb") != std::string::npos) return;
  if (asks_for_help_only(argv)) return;
  // With "always" every large mapping gets huge pages anyway; with "never" none can.
  if (transparent_huge_page_mode() != "madvise") return;
  const std::string value = current.empty() ? "glibc.malloc.hugetlb=1" : current + ":glibc.malloc.hugetlb=1";
  ::setenv("GLIBC_TUNABLES", value.c_str(), 1);
  reexec(argv);
}

}  // namespace dgld
