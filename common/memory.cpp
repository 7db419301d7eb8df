#include "common/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>

namespace dgld {

void tune_allocator_for_large_buffers() {
  // 32 MiB is glibc's largest mmap threshold: smaller blocks come from the heap.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Do not hand freed heap memory back to the kernel after every large free.
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

}  // namespace dgld

namespace dgld {

void reexec_with_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);
  // execv failed (no /proc?): carry on with the default policy.
}

}  // namespace dgld
