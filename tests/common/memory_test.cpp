// The allocator tuning every dgld process applies (common/memory.h): large
// blocks come from the heap and stay there for reuse when freed.
#include "common/memory.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>

#include "tests/support/sanitizers.h"

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

TEST_CASE("allocator tuning: the trim threshold is at least 256 MiB and at most a sixteenth of memory") {
  const int64_t floor = int64_t{256} << 20;
  const int64_t phys = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  const int64_t t = dgld::trim_threshold_bytes();
  CHECK(t >= floor);
  CHECK(t <= INT_MAX);
  CHECK(t <= std::max(phys / 16, floor));
}

TEST_CASE("allocator tuning: a large block freed stays in the heap and is not faulted in again") {
  if (dgld::testing::kAddressSanitizer) {
    WARN("not checked: AddressSanitizer's allocator ignores mallopt");
    return;
  }
  for (const char* env : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_"}) {
    if (std::getenv(env) != nullptr) {
      WARN("not checked: " << env << " is set, and the tuning leaves it to glibc");
      return;
    }
  }
  dgld::tune_allocator_for_large_buffers();
  // Bigger than glibc's mmap threshold (32 MiB at most) and, where the tuned
  // threshold allows, than its former 256 MiB; smaller than the threshold.
  const size_t bytes =
      std::min(static_cast<size_t>(dgld::trim_threshold_bytes()) / 4 * 3, static_cast<size_t>(768) << 20);
  char* a = static_cast<char*>(std::malloc(bytes));
  REQUIRE(a != nullptr);
  touch(a, bytes);
  std::free(a);
  // Kept: the heap's free bytes still hold it (handed back, they would not).
  CHECK(mallinfo2().fordblks >= bytes);
  const long before = minor_faults();
  char* b = static_cast<char*>(std::malloc(bytes));
  REQUIRE(b != nullptr);
  touch(b, bytes);
  const long faults = minor_faults() - before;
  std::free(b);
  INFO(bytes / 4096 << " pages, " << faults << " faulted again");
  CHECK(faults < static_cast<long>(bytes / 4096 / 10));
}
