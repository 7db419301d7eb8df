#pragma once
// Prometheus' text exposition format (version 0.0.4) of dgld's counters: the
// one place that turns a daemon's stats JSON into `# HELP` / `# TYPE` /
// `name{labels} value` lines, for the --metrics-port endpoints
// (net/metrics_http.h) of graph-server and trainer-host. docs/operations.md,
// "Metrics", lists the names.

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dgld::prom {

inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

using Labels = std::vector<std::pair<std::string, std::string>>;

// Metric families in the order first added; every sample of a family is
// written together under its HELP and TYPE lines, as the format requires.
class Exposition {
 public:
  // type: "counter" | "gauge". A family's help and type are the first given.
  void add(const std::string& name, const char* type, const std::string& help, const Labels& labels, double value);
  // An integer sample (byte and request counts beyond 2^53 stay exact).
  void add_int(const std::string& name, const char* type, const std::string& help, const Labels& labels,
               long long value);
  std::string text() const;
  size_t num_samples() const;

 private:
  struct Family {
    std::string name, type, help;
    std::vector<std::string> samples;  // "name{...} value"
  };
  Family& family(const std::string& name, const char* type, const std::string& help);
  std::vector<Family> families_;
};

// A sample value as the format writes it: integers without an exponent,
// NaN, +Inf, -Inf.
std::string format_value(double v);
// A label value with \, " and newline escaped.
std::string escape_label_value(const std::string& v);
// `name{a="x",b="y"}` (just `name` without labels).
std::string sample_name(const std::string& name, const Labels& labels);

// A graph-server's stats (GraphServer::stats_json; what dgld-stats prints)
// as dgld_server_* families. `base` labels go on every sample (machine, server).
std::string graph_server_text(const nlohmann::json& stats, const Labels& base);

// A training trainer-host's live figures (trainer::LiveMetrics::snapshot) as
// dgld_trainer_* families. `base` labels go on every sample (machine, rank).
std::string trainer_text(const nlohmann::json& live, const Labels& base);

}  // namespace dgld::prom
