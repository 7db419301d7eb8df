#pragma once
// dgl-launch: runs a job on every machine of an ip_config (docs/operations.md).
// Checks everything it can before any process starts (files here, then on
// every machine through its agent: workspace, files, programs and their
// versions, free ports), copies each machine only its own partition, starts
// the graph-servers, waits until they listen, starts the trainers, and stops
// every process on every machine when the trainers are done, when any process
// fails, when a machine's connection drops, or on SIGINT/SIGTERM.

#include "launcher/launch/plan.h"

namespace dgld::launch {

// Exit codes of run_job.
inline constexpr int kExitOk = 0;
inline constexpr int kExitJobFailed = 1;    // something failed after processes started
inline constexpr int kExitNotStarted = 2;   // bad input or a failed check: nothing was started
// Interrupted by a signal: 128 + its number (SIGINT 130, SIGTERM 143).

int run_job(LaunchOptions options);

// main() of dgl-launch: the launcher, or the agent with --machine-agent.
int run_launch_tool(int argc, const char* const argv[]);

}  // namespace dgld::launch
