// The allocator tuning every dgld process applies (common/memory.h): large
// blocks come from the heap and stay there for reuse when freed.
#include "common/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// One write per 4 KiB page, through volatile so the stores (and with them
// the allocation) are not optimised away.
void touch(char* p, size_t n) {
  volatile char* v = p;
  for (size_t i = 0; i < n; i += 4096) v[i] = 1;
}

}  // namespace

TEST_CASE("allocator tuning: the trim threshold is a sixteenth of memory, at least 256 MiB") {
  const int64_t floor = int64_t{256} << 20;
  const int64_t phys = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  CHECK(dgld::trim_threshold_bytes() == std::min<int64_t>(std::max(phys / 16, floor), INT_MAX));
}

TEST_CASE("allocator tuning: a large block freed and taken again is not faulted in again") {
#if defined(__SANITIZE_ADDRESS__)
  WARN("not checked: AddressSanitizer's allocator ignores mallopt");
  return;
#endif
  dgld::tune_allocator_for_large_buffers();
  // Bigger than glibc's default trim threshold and mmap threshold, as a
  // training step's temporaries are; smaller than the tuned threshold.
  const size_t bytes = static_cast<size_t>(dgld::trim_threshold_bytes()) / 4 * 3;
  char* a = static_cast<char*>(std::malloc(bytes));
  REQUIRE(a != nullptr);
  touch(a, bytes);
  std::free(a);
  const long before = minor_faults();
  char* b = static_cast<char*>(std::malloc(bytes));
  REQUIRE(b != nullptr);
  touch(b, bytes);
  const long faults = minor_faults() - before;
  std::free(b);
  INFO(bytes / 4096 << " pages, " << faults << " faulted again");
  CHECK(faults < static_cast<long>(bytes / 4096 / 10));
}
