#include "common/memory.h"

#include <malloc.h>

namespace dgld {

void tune_allocator_for_large_buffers() {
  // 32 MiB is glibc's largest mmap threshold: smaller blocks come from the heap.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Do not hand freed heap memory back to the kernel after every large free.
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

}  // namespace dgld
