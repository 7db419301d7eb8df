#include "common/logging.h"

#include <mutex>
#include <vector>

#include <boost/program_options.hpp>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace dgld {
namespace {

struct LogState {
  std::mutex mu;
  std::vector<spdlog::sink_ptr> sinks;
  spdlog::level::level_enum level = spdlog::level::info;
  std::string program = "dgld";
  std::string role;
};

LogState& state() {
  static LogState s;
  return s;
}

std::string pattern_for(const LogState& s) {
  std::string who = s.program;
  if (!s.role.empty()) who += "[" + s.role + "]";
  // spdlog pattern: escape '%' in names.
  std::string escaped;
  for (char c : who) {
    if (c == '%') escaped += "%%";
    else escaped += c;
  }
  return "%Y-%m-%d %H:%M:%S.%e " + escaped + " %l %n: %v";
}

void apply_locked(LogState& s) {
  const std::string pattern = pattern_for(s);
  for (auto& sink : s.sinks) sink->set_pattern(pattern);
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) {
    l->sinks() = s.sinks;
    l->set_level(s.level);
  });
}

}  // namespace

void add_log_options(boost::program_options::options_description& desc, LogOptions& opts) {
  namespace po = boost::program_options;
  desc.add_options()
      ("log-level", po::value(&opts.level)->default_value(opts.level),
       "log level: trace, debug, info, warn, error, critical, off")
      ("log-file", po::value(&opts.file)->default_value(opts.file),
       "also append log lines to this file");
}

Status setup_logging(const LogOptions& opts) {
  auto level = spdlog::level::from_str(opts.level);
  if (level == spdlog::level::off && opts.level != "off") {
    return invalid_argument("--log-level: expected one of trace, debug, info, warn, error, "
                            "critical, off; got '" + opts.level + "'");
  }
  LogState& s = state();
  std::lock_guard lock(s.mu);
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (!opts.file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(opts.file));
    } catch (const spdlog::spdlog_ex& e) {
      return io_error("--log-file " + opts.file + ": " + e.what());
    }
  }
  s.sinks = std::move(sinks);
  s.level = level;
  s.program = opts.program.empty() ? "dgld" : opts.program;
  s.role = opts.role;
  apply_locked(s);
  return Status::ok();
}

void set_log_role(const std::string& role) {
  LogState& s = state();
  std::lock_guard lock(s.mu);
  s.role = role;
  apply_locked(s);
}

std::shared_ptr<spdlog::logger> logger(std::string_view area) {
  LogState& s = state();
  std::lock_guard lock(s.mu);
  std::string name(area);
  if (auto existing = spdlog::get(name)) return existing;
  if (s.sinks.empty()) {
    s.sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
    s.sinks.back()->set_pattern(pattern_for(s));
  }
  auto l = std::make_shared<spdlog::logger>(name, s.sinks.begin(), s.sinks.end());
  l->set_level(s.level);
  l->flush_on(spdlog::level::warn);
  spdlog::register_logger(l);
  return l;
}

}  // namespace dgld
