#pragma once
// One log format for every dgld program:
//   2026-12-02 17:03:04.123 graph-server[server/0] info net: message
// Named loggers per area ("net", "graph", "sampler", "trainer", "launcher",
// "partition", "kvstore") share the sinks set up by setup_logging().

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "common/status.h"

namespace boost::program_options {
class options_description;
}

namespace dgld {

struct LogOptions {
  std::string program;        // e.g. "graph-server"
  std::string role;           // e.g. "server/0", "trainer/3"; may be empty
  std::string level = "info"; // trace|debug|info|warn|error|critical|off
  std::string file;           // also log to this file when non-empty
};

// Adds --log-level and --log-file to a command's options, bound to `opts`.
void add_log_options(boost::program_options::options_description& desc, LogOptions& opts);

// Installs the sinks and pattern. Safe to call again (e.g. once the rank is known).
Status setup_logging(const LogOptions& opts);

// Changes the role shown in every line (e.g. after rank assignment).
void set_log_role(const std::string& role);

// The logger for an area; created on first use with the shared sinks.
std::shared_ptr<spdlog::logger> logger(std::string_view area);

}  // namespace dgld
