#pragma once
// Shared pieces of the fault-injection tests (tests/fault/): the training
// flags of a long or short run, waiting with a deadline, and reading what a
// trainer-host reported (per-epoch seeds from its metrics, its loader's
// batch counts).

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/process.h"

namespace dgld::testing {

// Waits up to `timeout` until `done()`; true if it became so.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);

// Seconds since `t0`, for messages.
double seconds_since(std::chrono::steady_clock::time_point t0);

// The training seeds of every trainer in each epoch of a metrics JSON
// (seeds_per_s * time_s, rounded: exact for the seed counts of a test graph).
std::vector<int64_t> seeds_per_epoch(const nlohmann::json& metrics);

// "batches made by sampler-workers: X, by this trainer: Y, re-issued after a
// worker failed: Z" from a trainer-host log.
struct LoaderCounts {
  int64_t by_workers = 0, by_trainer = 0, reissued = 0;
};
std::optional<LoaderCounts> loader_counts(const std::string& trainer_log);

// The number before `suffix` in the first line of `log` that has it (e.g.
// "training seeds" in "... 2400 training seeds, ..."); nullopt if none.
std::optional<int64_t> number_before(const std::string& log, const std::string& suffix);

// The lines of `log` that contain `text`, joined.
std::string lines_with(const std::string& log, const std::string& text);
// The last error a trainer-host logged (the one it exits with; its
// sampler-workers' lines, in the same log, left out); empty if none.
std::string trainer_exit_error(const std::string& log);

}  // namespace dgld::testing
