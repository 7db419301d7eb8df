#pragma once
// The dgl-partition command line: parses flags, runs the partitioner or --verify,
// prints the summary. main() is run_partition_tool(argc, argv).

namespace dgld {

// Returns the process exit status (0 on success).
int run_partition_tool(int argc, const char* const argv[]);

}  // namespace dgld
