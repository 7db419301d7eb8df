#pragma once
// Where the model step's time goes, by operator: trainer-host
// --profile-steps N runs LibTorch's profiler on the training thread over N
// steps of one epoch (forward, loss, backward, optimiser steps; the autograd
// engine runs a CPU backward on the calling thread, so its operators are
// recorded too) and sums each operator's self time (its time minus the
// operators it called), grouped into the categories of docs/performance.md
// ("The model step by operator"): dense products, aggregation, gathers,
// elementwise, dropout, allocation, optimiser, other.
//
// Torch-free header; the profiler is in step_profile.cpp.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dgld::trainer {

struct OpTime {
  std::string name;  // LibTorch's record name ("aten::mm", "dgld::copy_u_reduce", "MmBackward0")
  std::string category;  // op_category(name)
  int64_t calls = 0;
  double self_s = 0;   // time in the operator itself, not in the operators it called
  double total_s = 0;  // time of its outermost calls, with what they called
};

struct StepProfile {
  int steps = 0;
  double wall_s = 0;        // the profiled steps' wall time on the training thread
  std::vector<OpTime> ops;  // by self time, largest first
  std::vector<std::pair<std::string, double>> categories;  // self time per category, largest first
};

// The category of an operator by its name (the rules of step_profile.cpp).
std::string op_category(std::string_view name);

// Records every LibTorch operator the calling thread runs between each
// start() and the pause() after it (the model steps, not the waits between
// them). One profiler per thread at a time.
class StepProfiler {
 public:
  StepProfiler();
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void start();
  void pause();
  bool running() const { return running_; }
  // What was recorded, over `steps` steps that took `wall_s` seconds in all
  // while recorded.
  StepProfile result(int steps, double wall_s);

 private:
  bool running_ = false;
  std::map<std::string, OpTime> by_name_;
};

// A table for the log: the categories, then the `top` operators by self
// time, each per step and as a share of the steps' wall time.
std::string format_step_profile(const StepProfile& p, int top = 15);

}  // namespace dgld::trainer
