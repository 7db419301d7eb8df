#include "common/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace dgld {

void tune_allocator_for_large_buffers() {
  // 32 MiB is glibc's largest mmap threshold: smaller blocks come from the heap.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Larger ones would still be fresh mmaps (a mini-batch's input features on
  // a million-node graph are ~100 MB): with mmap off they come from the heap
  // too and are reused instead of page-faulted and zeroed for every batch
  // (measured: standalone GraphSAGE epoch on 1 M nodes, fetch 46 s -> see
  // docs/performance.md).
  mallopt(M_MMAP_MAX, 0);
  // Do not hand freed heap memory back to the kernel after every large free.
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
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
