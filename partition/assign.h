#pragma once
// dgl-partition's node assignment: each node's piece (0 .. num_parts x
// num_trainers_per_machine - 1) by METIS (k-way, edge cut) or by a seeded
// random shuffle cut into equal slices.

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "partition/graph_data.h"
#include "partition/partitioner.h"

namespace dgld {

// METIS over the symmetrised graph into num_parts x num_trainers_per_machine
// pieces, with constraint columns for --balance-train (or g's balance types)
// and --balance-edges; *metis_s is the METIS call's time.
Status metis_assign(GraphData& g, const PartitionOptions& o, std::vector<int32_t>* piece, double* metis_s);

// Balanced random assignment: a seeded shuffle cut into `pieces` equal slices.
void random_assign(int64_t n, int pieces, uint64_t seed, std::vector<int32_t>* piece);

}  // namespace dgld
