#include "launcher/launch/restarts.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "launcher/launch/subprocess.h"  // describe_exit

namespace dgld::launch {

namespace {

const char* kind_name(FailureCause::Kind k) {
  switch (k) {
    case FailureCause::Kind::none: return "none";
    case FailureCause::Kind::process: return "process";
    case FailureCause::Kind::lost_agent: return "lost_agent";
    case FailureCause::Kind::agent_start: return "agent_start";
    case FailureCause::Kind::phase: return "phase";
    case FailureCause::Kind::other: return "other";
  }
  return "?";
}

std::string short_cause(const FailureCause& c) {
  const std::string where = c.machine >= 0 ? fmt::format("host {} (machine {})", c.host, c.machine) : "the job";
  switch (c.kind) {
    case FailureCause::Kind::process:
      return fmt::format("{}: {} {} {}", where, c.role, c.rank, describe_exit(c.status));
    case FailureCause::Kind::lost_agent:
      return where + ": lost the connection to its agent";
    case FailureCause::Kind::agent_start:
      return where + ": its agent could not be started";
    default:
      return c.message;
  }
}

}  // namespace

std::string FailureCause::key() const {
  std::string k = fmt::format("{}|{}|{}", kind_name(kind), machine, host);
  if (kind == Kind::process) k += fmt::format("|{}|{}|{}", role, rank, status);
  if (kind == Kind::phase || kind == Kind::other) k += "|" + message;
  return k;
}

bool FailureCause::machine_suspect() const {
  return machine >= 0 && (kind == Kind::lost_agent || kind == Kind::agent_start || kind == Kind::phase);
}

RestartDecision decide_restart(int restarts_done, int max_restarts, const FailureCause& cause,
                               const std::optional<FailureCause>& previous, bool progressed, bool started_any) {
  if (restarts_done >= max_restarts) {
    return {false, max_restarts == 0 ? std::string()
                                     : fmt::format("the limit of {} restart(s) (--max-restarts) is reached",
                                                   max_restarts)};
  }
  if (cause.kind == FailureCause::Kind::other || cause.kind == FailureCause::Kind::none) {
    return {false, "a restart cannot change this failure"};
  }
  if (!started_any && !cause.machine_suspect()) {
    return {false, "it failed before anything started, as it would again"};
  }
  if (previous && previous->key() == cause.key() && !progressed) {
    return {false, "it failed the same way twice in a row without a new checkpoint in between"};
  }
  return {true, ""};
}

double backoff_seconds(int restart_number, double first_s) {
  const double s = first_s * std::pow(2.0, std::max(0, restart_number - 1));
  return std::min(s, 60.0);
}

std::string describe(const RestartRecord& r) {
  std::string s = fmt::format("restart {} at +{:.1f} s after {}", r.number, r.failed_at_s, short_cause(r.cause));
  if (!r.replaced.empty()) s += "; " + r.replaced;
  s += fmt::format("; teardown {:.1f} s, back-off {:.1f} s", r.teardown_s, r.backoff_s);
  if (r.resumed_at) {
    s += fmt::format(", trainers resumed at {} {:.1f} s after the failure", r.resumed_at->str(), r.restart_s);
  } else if (r.restart_s >= 0) {
    s += fmt::format(", trainers started again {:.1f} s after the failure (from the beginning)", r.restart_s);
  } else {
    s += ", the trainers never resumed";
  }
  s += fmt::format("; {:.1f} s of training redone (since {})", r.lost_work_s,
                   r.last_checkpoint ? "the checkpoint of " + r.last_checkpoint->str() : "the attempt started");
  return s;
}

nlohmann::json restarts_json(const std::vector<RestartRecord>& records) {
  auto pos = [](const std::optional<CheckpointPosition>& p) {
    return p ? nlohmann::json{{"epoch", p->epoch}, {"step", p->step}} : nlohmann::json();
  };
  nlohmann::json out = nlohmann::json::array();
  for (const RestartRecord& r : records) {
    out.push_back({{"restart", r.number},
                   {"cause", {{"kind", kind_name(r.cause.kind)},
                              {"machine", r.cause.machine},
                              {"host", r.cause.host},
                              {"role", r.cause.role},
                              {"rank", r.cause.rank},
                              {"message", r.cause.message}}},
                   {"failed_at_s", r.failed_at_s},
                   {"teardown_s", r.teardown_s},
                   {"backoff_s", r.backoff_s},
                   {"replaced", r.replaced},
                   {"last_checkpoint", pos(r.last_checkpoint)},
                   {"lost_work_s", r.lost_work_s},
                   {"resumed_at", pos(r.resumed_at)},
                   {"restart_s", r.restart_s}});
  }
  return out;
}

std::vector<std::string> with_ip_config(const std::vector<std::string>& command, const std::string& path) {
  std::vector<std::string> out = command;
  for (size_t i = 1; i < out.size(); ++i) {
    for (const std::string flag : {"--ip-config", "--ip_config"}) {
      if (out[i] == flag && i + 1 < out.size()) {
        out[i + 1] = path;
      } else if (out[i].rfind(flag + "=", 0) == 0) {
        out[i] = flag + "=" + path;
      }
    }
  }
  return out;
}

}  // namespace dgld::launch
