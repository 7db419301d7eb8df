#include "partition/rank/rank_job.h"

#include <algorithm>
#include <numeric>

#include "common/random.h"

namespace dgld::rank {

Status RankJob::shuffle_edges() {
  // read_ is sorted by destination rank in place and sent from there; the
  // in-edges wait in their spill file while the out-edges go.
  in_ = comm_.route_from(std::span<const EdgeRec>(read_),
                         group_in_place(read_, P_, [&](const EdgeRec& e) { return owner_of_orig(e.v); }));
  or_fatal(spill_edges(/*in=*/true, /*out=*/false));
  out_ = comm_.route_from(std::span<const EdgeRec>(read_),
                          group_in_place(read_, P_, [&](const EdgeRec& e) { return owner_of_orig(e.u); }));
  std::vector<EdgeRec>().swap(read_);
  return unspill_edges(/*in=*/true, /*out=*/false);  // after the step's last collective
}

Status RankJob::adjacency() {
  if (P_ == 1) return Status::ok();
  const int64_t base = starts_[me_];
  // The edge records wait in their spill files from here to the end of
  // PT-Scotch; the adjacency is built from them in pieces (two passes).
  or_fatal(spill_edges());  // this step has a collective below: a failure here cannot be agreed on
  std::vector<int64_t> deg(static_cast<size_t>(n_local_) + 1, 0);
  or_fatal(for_each_spilled("in", spilled_in_, [&](const EdgeRec& e) {
    if (e.u != e.v) ++deg[static_cast<size_t>(e.v - base) + 1];
  }));
  or_fatal(for_each_spilled("out", spilled_out_, [&](const EdgeRec& e) {
    if (e.u != e.v) ++deg[static_cast<size_t>(e.u - base) + 1];
  }));
  std::partial_sum(deg.begin(), deg.end(), deg.begin());
  std::vector<SCOTCH_Num> adj(static_cast<size_t>(deg.back()));
  {
    std::vector<int64_t> pos(deg.begin(), deg.end() - 1);
    or_fatal(for_each_spilled("in", spilled_in_, [&](const EdgeRec& e) {
      if (e.u != e.v) adj[static_cast<size_t>(pos[static_cast<size_t>(e.v - base)]++)] = static_cast<SCOTCH_Num>(e.u);
    }));
    or_fatal(for_each_spilled("out", spilled_out_, [&](const EdgeRec& e) {
      if (e.u != e.v) adj[static_cast<size_t>(pos[static_cast<size_t>(e.u - base)]++)] = static_cast<SCOTCH_Num>(e.v);
    }));
  }
  std::vector<SCOTCH_Num> vert(static_cast<size_t>(n_local_) + 1, 0);
  size_t out = 0;
  for (int64_t i = 0; i < n_local_; ++i) {
    auto b = adj.begin() + deg[static_cast<size_t>(i)], e = adj.begin() + deg[static_cast<size_t>(i) + 1];
    std::sort(b, e);
    const auto u = std::unique(b, e);
    vert[static_cast<size_t>(i)] = static_cast<SCOTCH_Num>(out);
    for (auto it = b; it != u; ++it) adj[out++] = *it;
  }
  vert[static_cast<size_t>(n_local_)] = static_cast<SCOTCH_Num>(out);
  std::vector<int64_t>().swap(deg);
  // The share of the edges PT-Scotch sees (the same on every rank).
  double fraction = o_.scotch_edge_fraction;
  if (fraction <= 0) {
    const double need = kScotchBytesPerEnd * static_cast<double>(out);
    const double budget = std::max(kScotchBudget * static_cast<double>(share_bytes()), kScotchFreeBytes);
    const double mine = need <= budget ? 1.0 : std::max(kScotchMinFraction, budget / need);
    MPI_Allreduce(&mine, &fraction, 1, MPI_DOUBLE, MPI_MIN, comm_.get());
  }
  scotch_fraction_ = fraction;
  if (me_ == 0) {
    logger("partition")->info("PT-Scotch cuts by {:.1f}% of the edges (--scotch-edge-fraction {})", 100 * fraction,
                              o_.scotch_edge_fraction > 0 ? fmt::format("{}", o_.scotch_edge_fraction) : "auto");
  }
  if (out > static_cast<size_t>(INT32_MAX)) {  // after the collective above
    return resource_exhausted(fmt::format("{} adjacency entries on this rank: PT-Scotch (32-bit) takes at most 2^31-1", out));
  }
  if (fraction < 1.0) {
    // An edge stays if the hash of its two ends says so: the same answer on
    // both ends' ranks, so the adjacency stays symmetric as PT-Scotch wants.
    const auto threshold = static_cast<uint64_t>(fraction * 18446744073709551615.0);
    const uint64_t salt = o_.seed * 0x9e3779b97f4a7c15ULL;
    size_t kept = 0;
    for (int64_t i = 0; i < n_local_; ++i) {
      const auto u = static_cast<uint64_t>(base + i);
      const size_t b = static_cast<size_t>(vert[static_cast<size_t>(i)]), e = static_cast<size_t>(vert[static_cast<size_t>(i) + 1]);
      vert[static_cast<size_t>(i)] = static_cast<SCOTCH_Num>(kept);
      for (size_t k = b; k < e; ++k) {
        const auto v = static_cast<uint64_t>(adj[k]);
        if (mix64((std::min(u, v) << 32 | std::max(u, v)) ^ salt) < threshold) adj[kept++] = adj[k];
      }
    }
    vert[static_cast<size_t>(n_local_)] = static_cast<SCOTCH_Num>(kept);
    out = kept;
  }
  adj.resize(out);
  adj.shrink_to_fit();
  vert_ = std::move(vert);
  adj_ = std::move(adj);
  return Status::ok();
}

Status RankJob::cut() {
  part_.assign(static_cast<size_t>(n_local_), 0);
  if (P_ == 1) return Status::ok();
  std::vector<SCOTCH_Num>& vert = vert_;
  std::vector<SCOTCH_Num>& adj = adj_;
  const size_t out = adj.size();
  std::vector<SCOTCH_Num> parts(static_cast<size_t>(std::max<int64_t>(n_local_, 1)));
  SCOTCH_Dgraph graph;
  SCOTCH_Strat strat;
  if (SCOTCH_dgraphInit(&graph, comm_.get()) != 0) return internal_error("SCOTCH_dgraphInit failed");
  SCOTCH_stratInit(&strat);
  SCOTCH_randomSeed(static_cast<SCOTCH_Num>(o_.seed & 0x7fffffff));
  int rc = SCOTCH_dgraphBuild(&graph, 0, static_cast<SCOTCH_Num>(n_local_), static_cast<SCOTCH_Num>(n_local_),
                              vert.data(), vert.data() + 1, nullptr, nullptr, static_cast<SCOTCH_Num>(out),
                              static_cast<SCOTCH_Num>(out), adj.empty() ? nullptr : adj.data(), nullptr, nullptr);
  const auto t = Clock::now();
  if (rc == 0) {
    rc = SCOTCH_stratDgraphMapBuild(&strat, SCOTCH_STRATDEFAULT, static_cast<SCOTCH_Num>(P_),
                                    static_cast<SCOTCH_Num>(P_), o_.imbalance);
  }
  if (rc == 0) rc = SCOTCH_dgraphPart(&graph, static_cast<SCOTCH_Num>(P_), &strat, parts.data());
  scotch_s_ = seconds_since(t);
  SCOTCH_stratExit(&strat);
  SCOTCH_dgraphExit(&graph);
  if (rc != 0) return internal_error(fmt::format("PT-Scotch failed (code {}); its message is above", rc));
  for (int64_t i = 0; i < n_local_; ++i) part_[static_cast<size_t>(i)] = static_cast<int32_t>(parts[static_cast<size_t>(i)]);
  std::vector<SCOTCH_Num>().swap(vert_);
  std::vector<SCOTCH_Num>().swap(adj_);
  return unspill_edges();  // after PT-Scotch's last collective
}

}  // namespace dgld::rank
