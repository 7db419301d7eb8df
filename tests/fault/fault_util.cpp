#include "tests/fault/fault_util.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

namespace dgld::testing {

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int64_t> seeds_per_epoch(const nlohmann::json& metrics) {
  std::vector<int64_t> out;
  for (const auto& e : metrics.at("epochs")) {
    out.push_back(std::llround(e.at("seeds_per_s").get<double>() * e.at("time_s").get<double>()));
  }
  return out;
}

std::optional<LoaderCounts> loader_counts(const std::string& log) {
  const std::string key = "batches made by sampler-workers: ";
  const auto at = log.find(key);
  if (at == std::string::npos) return std::nullopt;
  long w = 0, t = 0, r = 0;
  if (std::sscanf(log.c_str() + at + key.size(), "%ld, by this trainer: %ld, re-issued after a worker failed: %ld", &w,
                  &t, &r) != 3) {
    return std::nullopt;
  }
  return LoaderCounts{w, t, r};
}

std::optional<int64_t> number_before(const std::string& log, const std::string& suffix) {
  const auto at = log.find(" " + suffix);
  if (at == std::string::npos) return std::nullopt;
  auto start = at;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(log[start - 1]))) --start;
  if (start == at) return std::nullopt;
  return std::stoll(log.substr(start, at - start));
}

std::string lines_with(const std::string& log, const std::string& text) {
  std::istringstream in(log);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find(text) != std::string::npos) out += line + "\n";
  }
  return out;
}

std::string trainer_exit_error(const std::string& log) {
  std::istringstream in(log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find("trainer-host[") != std::string::npos && line.find("] error ") != std::string::npos) last = line;
  }
  return last;
}

}  // namespace dgld::testing
