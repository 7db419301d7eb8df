#pragma once
// Non-owning views of compressed adjacency, the one shape every sampler,
// server and test reads. The arrays usually live in a memory-mapped partition
// file or in POSIX shared memory; whoever builds a view keeps them alive.
//
// CSC (in-edges): for row v, in-neighbours are indices[indptr[v] .. indptr[v+1])
// and eids[...] are the global ids of those edges. CSR (out-edges) uses the
// same struct with "neighbour" meaning destination.

#include <cstdint>
#include <span>

namespace dgld {

struct AdjacencyView {
  std::span<const int64_t> indptr;   // [num_rows + 1], indptr[0] == 0, non-decreasing
  std::span<const int64_t> indices;  // [nnz] neighbour ids (local to the view's id space)
  std::span<const int64_t> eids;     // [nnz] global edge ids, parallel to indices

  int64_t num_rows() const { return indptr.empty() ? 0 : static_cast<int64_t>(indptr.size()) - 1; }
  int64_t num_edges() const { return static_cast<int64_t>(indices.size()); }
  int64_t degree(int64_t row) const { return indptr[row + 1] - indptr[row]; }
};

}  // namespace dgld
