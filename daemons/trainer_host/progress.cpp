#include "daemons/trainer_host/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "common/logging.h"

namespace dgld::trainer {

ProgressBar::ProgressBar(bool enabled, int epoch, int64_t total_steps, bool plain_lines)
    : shown_(enabled && ::isatty(STDERR_FILENO) == 1), plain_(enabled && plain_lines && !shown_), epoch_(epoch),
      total_(total_steps) {}

ProgressBar::~ProgressBar() { clear(); }

std::string ProgressBar::render(int epoch, int64_t done, int64_t total, double loss, double seeds_per_s,
                                int width) {
  const int64_t t = std::max<int64_t>(total, 1);
  const int filled = static_cast<int>(std::clamp<int64_t>(done * width / t, 0, width));
  return fmt::format("epoch {} [{}{}] {:>{}}/{}  loss {:.4f}  {:.0f} seeds/s", epoch, std::string(filled, '#'),
                     std::string(width - filled, '.'), done, std::to_string(total).size(), total, loss, seeds_per_s);
}

void ProgressBar::update(int64_t steps_done, double loss, double seeds_per_s) {
  if (plain_ && total_ >= 4) {
    const int quarter = static_cast<int>(steps_done * 4 / total_);
    if (quarter > quarters_logged_ && quarter < 4) {  // the epoch's own line reports 100%
      quarters_logged_ = quarter;
      logger("trainer")->info("epoch {}: {}% ({}/{} steps), loss {:.4f}, {:.0f} seeds/s", epoch_, quarter * 25,
                              steps_done, total_, loss, seeds_per_s);
    }
  }
  if (!shown_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && steps_done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const std::string line = render(epoch_, steps_done, total_, loss, seeds_per_s, 30);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace dgld::trainer
