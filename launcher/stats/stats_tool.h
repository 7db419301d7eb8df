#pragma once
// dgld-stats: asks every graph-server of an ip_config for its Stats and
// prints them (a table, or the servers' JSON): uptime, memory, connections,
// registered clients, bytes in/out, refused connections, backpressure pauses,
// per request kind the count, errors and p50/p99 latency, the frames
// exchanged with each client machine, and the bytes between every pair of
// machines over dgld connections. With --metrics, instead: the per-epoch
// traffic of a trainer's metrics.json (bytes per seed, remote share of
// feature rows, round trips per batch, bytes per link).

namespace dgld::stats {

// The whole tool; returns the exit code (0: every server answered).
int run_stats_tool(int argc, const char* const argv[]);

}  // namespace dgld::stats
