// dgl-partition-rank: one rank of dgl-partition --distributed (dist_partition.h).
#include "partition/dist_partition.h"

int main(int argc, char** argv) { return dgld::run_partition_rank(argc, argv); }
