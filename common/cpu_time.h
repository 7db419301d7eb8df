#pragma once
// CPU time as the kernel counts it (clock_gettime's thread and process CPU
// clocks), next to the wall times a stage reports: threads that share a few
// cores spend wall time waiting for one; their CPU time says where the cores
// went.

#include <chrono>
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

// Wall and CPU seconds of one stage at a time, since construction or the last
// lap (CPU: the clock of the thread that measures; use it on one thread).
class StageTimer {
 public:
  StageTimer() { restart(); }
  void restart() {
    wall0_ = std::chrono::steady_clock::now();
    cpu0_ = thread_cpu_seconds();
  }
  // Adds the stage's wall and CPU seconds to *wall_s and *cpu_s; the next stage starts.
  void lap(double* wall_s, double* cpu_s) {
    *wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
    *cpu_s += thread_cpu_seconds() - cpu0_;
    restart();
  }

 private:
  std::chrono::steady_clock::time_point wall0_;
  double cpu0_ = 0;
};

}  // namespace dgld
