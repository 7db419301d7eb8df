#pragma once
// dgl-launch --max-restarts (docs/reliability.md): what made an attempt of a
// job fail, whether to start the job again, and the report of its restarts.
// Pure; launcher_restarts.cpp acts on it (tear down, probe the machine, put a
// spare in its place, back off, start again).

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/checkpoint_store.h"

namespace dgld::launch {

struct FailureCause {
  enum class Kind {
    none,
    process,      // a server or trainer exited (role, rank, status)
    lost_agent,   // the connection to a machine's agent ended (ssh lost, machine down)
    agent_start,  // the agent could not be started there (ssh failed)
    phase,        // a machine failed a phase (check, start) or did not answer in time
    other,        // anything else (configuration, versions): a restart cannot help
  };
  Kind kind = Kind::none;
  int machine = -1;  // the machine it concerns; -1: none in particular
  std::string host;  // that machine's label at the time
  std::string role;  // Kind::process
  int rank = -1;
  int status = -1;   // Kind::process: the wait status
  std::string message;

  // Failures are "the same way" when their keys are equal: the kind, the
  // machine and host, and for a process its role, rank and exit status.
  std::string key() const;
  // The machine may be gone for good: its agent or ssh was lost, or its
  // processes could not start (then dgl-launch probes it with ssh).
  bool machine_suspect() const;
};

struct RestartDecision {
  bool restart = false;
  std::string why_not;  // when !restart
};

// After an attempt failed with `cause`: restart unless the limit is reached,
// or nothing started and the cause is not a machine (a configuration error
// fails the same way every time), or it failed exactly as the previous attempt
// did and no checkpoint was committed in between (`progressed`).
RestartDecision decide_restart(int restarts_done, int max_restarts, const FailureCause& cause,
                               const std::optional<FailureCause>& previous, bool progressed, bool started_any);

// The wait before restart n (1-based): first_s * 2^(n-1), at most 60 s.
double backoff_seconds(int restart_number, double first_s);

struct RestartRecord {
  int number = 0;               // 1, 2, ...
  FailureCause cause;
  double failed_at_s = 0;       // since the job started
  double teardown_s = 0;        // stopping every process of the failed attempt
  double backoff_s = 0;
  std::string replaced;         // "" or how a spare took a machine's place
  std::optional<CheckpointPosition> last_checkpoint;  // committed before the failure
  double lost_work_s = 0;       // training after that checkpoint (or the attempt's start), redone
  std::optional<CheckpointPosition> resumed_at;  // where the trainers resumed
  double restart_s = -1;        // from the failure until they resumed; -1: they never did
};

// One line per restart for the final report, and the JSON of all.
std::string describe(const RestartRecord& r);
nlohmann::json restarts_json(const std::vector<RestartRecord>& records);

// `command` with the value of its --ip-config / --ip_config flag (either
// spelling, "--flag value" or "--flag=value") replaced by `path`.
std::vector<std::string> with_ip_config(const std::vector<std::string>& command, const std::string& path);

}  // namespace dgld::launch
