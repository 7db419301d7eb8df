// dgl-partition: partitions a graph for dgld (see tool.h).
#include "common/memory.h"
#include "partition/tool.h"

int main(int argc, char** argv) {
  dgld::reexec_with_huge_page_malloc(argv);
  return dgld::run_partition_tool(argc, argv);
}
