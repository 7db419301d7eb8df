#pragma once
// A progress bar for one epoch on a terminal:
//   epoch 3 [##########..........]  52/100  loss 1.2345  4210 seeds/s
// redrawn in place at most ten times a second on stderr. When stderr is not
// a terminal (a launcher, a log file) and plain lines are asked for, a log
// line marks each quarter of the epoch instead:
//   epoch 3: 50% (50/100 steps), loss 1.2345, 4210 seeds/s
// Log lines written while a bar is shown are kept readable by calling
// clear() first.

#include <chrono>
#include <cstdint>
#include <string>

namespace dgld::trainer {

class ProgressBar {
 public:
  // enabled: the caller wants progress; a bar if stderr is a TTY, else
  // quarter lines when plain_lines.
  ProgressBar(bool enabled, int epoch, int64_t total_steps, bool plain_lines = false);
  ~ProgressBar();
  bool shown() const { return shown_; }
  void update(int64_t steps_done, double loss, double seeds_per_s);
  // Erases the bar's line (before a log line, and at the end).
  void clear();

  // The bar's text for a given state (for tests).
  static std::string render(int epoch, int64_t done, int64_t total, double loss, double seeds_per_s, int width);

 private:
  bool shown_ = false;
  bool drawn_ = false;
  bool plain_ = false;
  int quarters_logged_ = 0;
  int epoch_;
  int64_t total_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace dgld::trainer
