#pragma once
// Process-wide allocator tuning for the daemons: keep large buffers (pull
// replies, mini-batches) in the heap instead of fresh mmaps, so reusing them
// does not page-fault and zero-fill every time. Call once at the top of main()
// (the Python package calls it when dgld._C is imported).

#include <cstddef>
#include <cstdint>
#include <memory>

namespace dgld {

void tune_allocator_for_large_buffers();

// The heap-top size above which glibc hands freed memory back (M_TRIM_THRESHOLD):
// a sixteenth of the memory the process may use (physical memory, or its
// cgroup's limit when lower), at least 256 MiB, at most INT_MAX (mallopt's
// type, about 2 GiB). A setting given in glibc's own environment variable
// (MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_, MALLOC_MMAP_MAX_) wins.
int trim_threshold_bytes();

// Hands the heap's free memory back to the system (malloc_trim) after a
// phase whose buffers are gone (evaluation), so that the next phase's peak
// does not stand on them. Returns whether anything was released.
bool trim_heap();

// Maps every page of [p, p + bytes) in one call (MADV_POPULATE_WRITE, or
// _READ when !write) instead of one page fault per 4 KiB page on first touch.
// For memory about to be filled whole (a batch slot, a cache). Measured on
// this project's VMs: 0.6 us a page against 10-12 us for a demand fault
// (docs/performance.md, "The first epoch"). Best effort: pages partly
// outside the range are left alone, and a kernel without the advice
// (before Linux 5.14) faults them in later as before.
void populate_pages(void* p, size_t bytes, bool write);

// A byte array of `bytes` left uninitialised (no zero-fill), its pages mapped
// up front (populate_pages) when it is large: a buffer about to be
// overwritten whole, such as the rows of a pull.
std::unique_ptr<uint8_t[]> uninitialized_bytes(size_t bytes);

}  // namespace dgld

namespace dgld {

// OpenMP (used by LibTorch and OpenBLAS) reads its settings when the library
// loads, before main(). Its default is to spin idle threads for a long time,
// which on a small machine shared with servers and samplers burns the cores
// the work needs (measured: a GraphSAGE epoch 2.4x slower). When
// OMP_WAIT_POLICY is unset, this sets it to PASSIVE and re-executes the
// program with the same arguments; otherwise it returns at once. Call first
// thing in main() of programs that use torch.
void reexec_with_passive_openmp(char** argv);

// Programs that allocate and fill gigabytes once (dgl-partition, METIS inside
// it) spend much of their time in page faults, one per 4 KiB page. glibc can
// ask for transparent huge pages (2 MiB) on its large allocations
// (GLIBC_TUNABLES=glibc.malloc.hugetlb=1), but reads that setting before
// main(). When the kernel gives huge pages only on request ("madvise" mode)
// and the variable does not already mention the setting, this adds it and
// re-executes the program with the same arguments; otherwise it returns at
// once. Measured: partitioning a 2.45 M-node, 122 M-edge graph in 2 parts took
// 75-86 s instead of 149 s (docs/performance.md).
void reexec_with_huge_page_malloc(char** argv);

}  // namespace dgld
