#pragma once
// The machine agent: `dgl-launch --machine-agent`, one per machine of a job,
// started by the launcher over one ssh session (or as a local child with
// --local). It prepares and checks the workspace, starts the machine's
// graph-servers and trainers each in its own process group, streams their
// output (and keeps a log file per process in <workspace>/dgld-logs/<job>/),
// records their PIDs there (machine-<m>.json), and stops everything it
// started, by process group, then by the job id in the processes'
// environment, and removes the job's shared memory on this machine, when told
// to stop, on SIGTERM/SIGINT/SIGHUP, or when its stdin ends (the launcher or
// the connection died). Protocol: protocol.h.

#include <string>

#include "common/logging.h"

namespace dgld::launch {

// Runs until stopped; the exit code (0 after a clean stop). `silence_timeout_s`:
// stop when nothing (not even a ping) came from the launcher for this long.
int run_machine_agent(const std::string& job_id, int machine, int silence_timeout_s, const LogOptions& log);

// `dgl-launch --machine-agent --cleanup`: what the launcher runs on a machine
// whose agent vanished. Kills the job's processes there (found by DGLD_JOB_ID
// and DGLD_MACHINE_ID in their environment; SIGTERM, SIGKILL after
// `grace_ms`), removes its shared memory unless `keep_shm` (servers not
// started by the launcher own it), prints one `cleaned` line.
int run_agent_cleanup(const std::string& job_id, int machine, int grace_ms, bool keep_shm, const LogOptions& log);

}  // namespace dgld::launch
