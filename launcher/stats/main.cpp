// dgld-stats: prints the Stats of every graph-server of a job (stats_tool.h).
#include "launcher/stats/stats_tool.h"

int main(int argc, char** argv) { return dgld::stats::run_stats_tool(argc, argv); }
