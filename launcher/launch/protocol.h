#pragma once
// The conversation between dgl-launch and a machine agent: one JSON object
// per line, over the agent's stdin/stdout (an ssh session, or pipes with
// --local). docs/operations.md lists every message.
//
// launcher -> agent ("op"):  prepare (the whole AgentSpec), check,
//   start {group: servers|trainers}, fetch {path}, stop {reason}, ping (every 2 s).
// agent -> launcher ("ev"):  hello {version, pid}, prepared {rsync, cores,
//   files: {path: {size, crc32}}}, checked, ready {group}, started {role, rank,
//   pid}, out {role, rank, line}, exit {role, rank, status}, file {path, data
//   (base64)}, fail {phase, message}, stopped {killed, shm_removed}, pong (to
//   each ping: the launcher takes an agent silent for 5 s at a stop for lost).
// End of the agent's stdin means "stop": the launcher or its connection died.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/launch/plan.h"

namespace dgld::launch {

// Everything an agent needs to run its machine's part of a job.
struct AgentSpec {
  std::string version;           // the launcher's; the agent refuses another
  std::string job_id;
  int machine = 0;
  std::string label;             // how the launcher names this machine
  std::string workspace;
  std::string log_dir;           // relative to the workspace
  std::string part_config;       // relative to the workspace (or absolute)
  std::string ip_config;
  int grace_ms = 3000;
  int start_timeout_ms = 120000;
  int omp_threads_auto_divisor = 0;  // >0: trainers without OMP_NUM_THREADS get cores / this
  bool hash_files = false;       // report size + crc32 of `files` in `prepared`
  bool external_servers = false; // the servers run already: server_ports must listen; their shared memory stays
  // The job's shared secret (net/auth.h), over the agent's own channel (ssh
  // or a pipe), never a command line: the agent writes it to a mode-0600
  // file in the job's log directory, gives every process DGLD_SECRET_FILE,
  // and removes the file when the job stops. Empty: no authentication.
  std::string secret;
  std::vector<std::string> files;
  std::vector<ProcessSpec> servers;
  std::vector<ProcessSpec> trainers;
  std::vector<Endpoint> server_ports;
  std::vector<Endpoint> other_ports;
};

nlohmann::json to_json(const AgentSpec& s);
Result<AgentSpec> agent_spec_from_json(const nlohmann::json& j);

// One line of the protocol (no trailing newline). Invalid UTF-8 in strings
// (a process's raw output) is replaced, never an error.
std::string encode_line(const nlohmann::json& j);
// Parses a line; an error for anything that is not a JSON object.
Result<nlohmann::json> decode_line(const std::string& line);

std::string base64_encode(std::string_view data);
Result<std::string> base64_decode(std::string_view text);

}  // namespace dgld::launch
