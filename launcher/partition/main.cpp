// dgl-partition: partitions a graph for dgld (see tool.h).
#include "launcher/partition/tool.h"

int main(int argc, char** argv) { return dgld::run_partition_tool(argc, argv); }
