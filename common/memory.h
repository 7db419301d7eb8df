#pragma once
// Process-wide allocator tuning for the daemons: keep large buffers (pull
// replies, mini-batches) in the heap instead of fresh mmaps, so reusing them
// does not page-fault and zero-fill every time. Call once at the top of main().

namespace dgld {

void tune_allocator_for_large_buffers();

}  // namespace dgld
