#include "common/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

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

void reexec_with_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  // --help and --version run no OpenMP: not worth loading the program twice.
  for (char** a = argv + 1; *a; ++a) {
    if (std::strcmp(*a, "--version") == 0 || std::strcmp(*a, "--help") == 0 || std::strcmp(*a, "-h") == 0) return;
  }
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);
  // execv failed (no /proc?): carry on with the default policy.
}

}  // namespace dgld
