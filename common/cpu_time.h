#pragma once
// CPU time as the kernel counts it (clock_gettime's thread and process CPU
// clocks), next to the wall times a stage reports: threads that share a few
// cores spend wall time waiting for one; their CPU time says where the cores
// went.

#include <ctime>

namespace dgld {

inline double cpu_clock_seconds(clockid_t clock) {
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// CPU seconds the calling thread has used.
inline double thread_cpu_seconds() { return cpu_clock_seconds(CLOCK_THREAD_CPUTIME_ID); }
// CPU seconds every thread of this process has used.
inline double process_cpu_seconds() { return cpu_clock_seconds(CLOCK_PROCESS_CPUTIME_ID); }

// The calling thread's CPU seconds since construction (measured on the thread
// that made it).
class ThreadCpuTimer {
 public:
  ThreadCpuTimer() : start_(thread_cpu_seconds()) {}
  double seconds() const { return thread_cpu_seconds() - start_; }

 private:
  double start_;
};

}  // namespace dgld
