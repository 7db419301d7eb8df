#include "partition/rank/rank_job.h"

#include <cstdlib>
#include <iostream>

namespace dgld::rank {

Status RankJob::run() {
  const auto t0 = Clock::now();
  DGLD_RETURN_IF_ERROR(step("reading its chunks", [&] { return read_share(); }));
  DGLD_RETURN_IF_ERROR(step("exchanging edges", [&] { return shuffle_edges(); }));
  DGLD_RETURN_IF_ERROR(step("building its adjacency", [&] { return adjacency(); }));
  DGLD_RETURN_IF_ERROR(step("PT-Scotch", [&] { return cut(); }));
  const auto t_refine = Clock::now();
  DGLD_RETURN_IF_ERROR(step("refining the cut", [&] { return refine(); }));
  refine_s_ = seconds_since(t_refine);
  DGLD_RETURN_IF_ERROR(step("relabelling", [&] { return relabel(); }));
  DGLD_RETURN_IF_ERROR(step("moving edges to their partition", [&] { return move_edges(); }));
  DGLD_RETURN_IF_ERROR(step("reading its node data", [&] { return read_node_data(); }));
  DGLD_RETURN_IF_ERROR(step("moving nodes to their partition and writing their data", [&] { return move_nodes(); }));
  DGLD_RETURN_IF_ERROR(step("writing its partition", [&] { return write_partition(); }));
  DGLD_RETURN_IF_ERROR(step("putting its partition in place", [&] { return commit_partition(); }));
  total_s_ = seconds_since(t0);
  // Every rank writes the config (the same bytes, atomically), so that every
  // machine holds its partition and the config, ready for dgl-launch
  // --no-copy. (MPI's processor name cannot tell machines apart: hosts in
  // network namespaces share the host name.)
  return step("writing the partition config", [&] { return write_config(); });
}

void RankJob::or_fatal(const Status& st) const {
  if (st.is_ok()) return;
  std::cerr << "dgl-partition-rank: rank " << me_ << ": " << st.message() << "\n";
  MPI_Abort(comm_.get(), 3);
  std::abort();
}

[[noreturn]] void RankJob::fatal(const std::string& what) const {
  std::cerr << "dgl-partition-rank: rank " << me_ << ": internal error: " << what << "\n";
  MPI_Abort(comm_.get(), 3);
  std::abort();
}

}  // namespace dgld::rank
