#pragma once
// dgld-stats: asks every graph-server of an ip_config for its Stats and
// prints them (a table, or the servers' JSON): uptime, memory, connections,
// registered clients, bytes in/out, refused connections, backpressure pauses,
// and per request kind the count, errors and p50/p99 latency.

namespace dgld::stats {

// The whole tool; returns the exit code (0: every server answered).
int run_stats_tool(int argc, const char* const argv[]);

}  // namespace dgld::stats
