#include "partition/rank/rank_job.h"

#include <algorithm>
#include <numeric>

#include "common/random.h"

namespace dgld::rank {

// Size-constrained label propagation over the whole graph after PT-Scotch's
// cut of a sample (docs/distributed-partitioning.md, "Refinement"). Each
// round every rank learns its boundary neighbours' parts from their owners,
// the part sizes are summed over the ranks, and half of the nodes (by a hash
// of id and round, so that two ends of an edge rarely move at once) may move
// to the part most of their neighbours are in when that beats their own. A
// part takes at most (1 + imbalance) N / P nodes; each rank gets a share of a
// part's room in proportion to its candidates for it, best gains first, so
// the ranks never overfill a part together.
Status RankJob::refine() {
  cut_before_refine_ = -1;
  if (P_ == 1 || o_.refine_rounds <= 0) return Status::ok();
  const int64_t base = starts_[static_cast<size_t>(me_)];
  const int64_t n = n_local_;
  // The edge records wait on disk until the move steps; the adjacency is
  // built from the spill files in two passes, so the records and the
  // adjacency are never in memory together.
  or_fatal(spill_edges());  // this step has collectives below: a failure here cannot be agreed on
  auto remote = [&](int64_t v) { return v < base || v >= base + n; };
  // Each local node's neighbours (both directions), counted, and the remote
  // ones (ghosts), sorted so that they come grouped by owner.
  std::vector<int64_t> start(static_cast<size_t>(n) + 1, 0);
  std::vector<int32_t> ghosts;
  or_fatal(for_each_spilled("in", spilled_in_, [&](const EdgeRec& e) {
    if (e.u == e.v) return;
    ++start[static_cast<size_t>(e.v - base) + 1];
    if (remote(e.u)) ghosts.push_back(e.u);
  }));
  or_fatal(for_each_spilled("out", spilled_out_, [&](const EdgeRec& e) {
    if (e.u == e.v) return;
    ++start[static_cast<size_t>(e.u - base) + 1];
    if (remote(e.v)) ghosts.push_back(e.v);
  }));
  std::sort(ghosts.begin(), ghosts.end());
  ghosts.erase(std::unique(ghosts.begin(), ghosts.end()), ghosts.end());
  ghosts.shrink_to_fit();
  // Neighbours as slots: local nodes 0..n-1, then the ghosts.
  auto slot = [&](int64_t v) -> int32_t {
    if (!remote(v)) return static_cast<int32_t>(v - base);
    return static_cast<int32_t>(n + (std::lower_bound(ghosts.begin(), ghosts.end(), static_cast<int32_t>(v)) - ghosts.begin()));
  };
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int32_t> adj(static_cast<size_t>(start.back()));
  {
    std::vector<int64_t> at(start.begin(), start.end() - 1);
    or_fatal(for_each_spilled("in", spilled_in_, [&](const EdgeRec& e) {
      if (e.u != e.v) adj[static_cast<size_t>(at[static_cast<size_t>(e.v - base)]++)] = slot(e.u);
    }));
    or_fatal(for_each_spilled("out", spilled_out_, [&](const EdgeRec& e) {
      if (e.u != e.v) adj[static_cast<size_t>(at[static_cast<size_t>(e.u - base)]++)] = slot(e.v);
    }));
  }

  // Who asks this rank for which of its nodes' parts (fixed for every round).
  std::vector<int64_t> ask(static_cast<size_t>(P_), 0);
  for (int32_t g : ghosts) ++ask[static_cast<size_t>(owner_of_orig(g))];
  std::vector<int64_t> asked_n(static_cast<size_t>(P_), 0);
  MPI_Alltoall(ask.data(), 1, MPI_INT64_T, asked_n.data(), 1, MPI_INT64_T, comm_.get());
  const std::vector<int32_t> asked = comm_.route_from(std::span<const int32_t>(ghosts), ask);
  std::vector<int32_t> slot_part(static_cast<size_t>(n) + ghosts.size());
  // Every slot's part: the local nodes' own, the ghosts' from their owners.
  auto refresh_parts = [&] {
    std::vector<int32_t> answer(asked.size());
    for (size_t i = 0; i < asked.size(); ++i) answer[i] = part_[static_cast<size_t>(asked[i] - base)];
    const std::vector<int32_t> got = comm_.route_from(std::span<const int32_t>(answer), asked_n);
    std::copy(got.begin(), got.end(), slot_part.begin() + n);
    std::copy(part_.begin(), part_.end(), slot_part.begin());
  };

  const auto P = static_cast<size_t>(P_);
  const int64_t N = g_.num_nodes();
  const auto cap = static_cast<int64_t>((1.0 + o_.imbalance) * static_cast<double>(N) / static_cast<double>(P_)) + 1;
  // Adjacency entries whose ends are in different parts: each edge crossing
  // parts is two of them over all ranks (one at each end).
  auto local_cut_twice = [&] {
    int64_t c = 0;
    for (int64_t v = 0; v < n; ++v) {
      for (int64_t k = start[static_cast<size_t>(v)]; k < start[static_cast<size_t>(v) + 1]; ++k) {
        c += slot_part[static_cast<size_t>(adj[static_cast<size_t>(k)])] != slot_part[static_cast<size_t>(v)];
      }
    }
    return c;
  };
  struct Move {
    int32_t gain, node, to;
  };
  std::vector<int64_t> count(P, 0), sizes(P), mine(P), total(P);
  std::vector<Move> candidates;
  int64_t moved_total = 0;
  int rounds = 0;
  for (int round = 0; round < o_.refine_rounds; ++round) {
    refresh_parts();
    if (round == 0) cut_before_refine_ = comm_.sum(local_cut_twice()) / 2;
    // Part sizes over every rank.
    std::fill(mine.begin(), mine.end(), 0);
    for (int32_t p : part_) ++mine[static_cast<size_t>(p)];
    MPI_Allreduce(mine.data(), sizes.data(), P_, MPI_INT64_T, MPI_SUM, comm_.get());
    // This round's candidates: the best other part by neighbour count.
    candidates.clear();
    for (int64_t v = 0; v < n; ++v) {
      if ((mix64(static_cast<uint64_t>(base + v) ^ (static_cast<uint64_t>(round) * 0x9e3779b97f4a7c15ULL ^ o_.seed)) & 1) != 0) {
        continue;
      }
      const int32_t own = part_[static_cast<size_t>(v)];
      for (int64_t k = start[static_cast<size_t>(v)]; k < start[static_cast<size_t>(v) + 1]; ++k) {
        ++count[static_cast<size_t>(slot_part[static_cast<size_t>(adj[static_cast<size_t>(k)])])];
      }
      int32_t best = own;
      for (size_t p = 0; p < P; ++p) {
        if (count[p] > count[static_cast<size_t>(best)]) best = static_cast<int32_t>(p);
      }
      if (best != own) {
        candidates.push_back({static_cast<int32_t>(count[static_cast<size_t>(best)] - count[static_cast<size_t>(own)]),
                              static_cast<int32_t>(v), best});
      }
      for (int64_t k = start[static_cast<size_t>(v)]; k < start[static_cast<size_t>(v) + 1]; ++k) {
        count[static_cast<size_t>(slot_part[static_cast<size_t>(adj[static_cast<size_t>(k)])])] = 0;
      }
    }
    // Each rank's share of every part's room, by its candidates for it.
    std::fill(mine.begin(), mine.end(), 0);
    for (const Move& m : candidates) ++mine[static_cast<size_t>(m.to)];
    MPI_Allreduce(mine.data(), total.data(), P_, MPI_INT64_T, MPI_SUM, comm_.get());
    std::vector<int64_t> quota(P, 0);
    for (size_t p = 0; p < P; ++p) {
      const int64_t room = std::max<int64_t>(0, cap - sizes[p]);
      quota[p] = total[p] == 0 ? 0 : static_cast<int64_t>(static_cast<double>(room) * static_cast<double>(mine[p]) /
                                                          static_cast<double>(total[p]));
    }
    std::stable_sort(candidates.begin(), candidates.end(), [](const Move& a, const Move& b) { return a.gain > b.gain; });
    int64_t moved = 0;
    for (const Move& m : candidates) {
      if (quota[static_cast<size_t>(m.to)] <= 0) continue;
      --quota[static_cast<size_t>(m.to)];
      part_[static_cast<size_t>(m.node)] = m.to;
      ++moved;
    }
    moved = comm_.sum(moved);
    moved_total += moved;
    rounds = round + 1;
    if (moved * 1000 < N) break;  // under 0.1 % of the nodes: done
  }
  refresh_parts();  // the final cut, on the final parts
  cut_after_refine_ = comm_.sum(local_cut_twice()) / 2;
  refine_rounds_ = rounds;
  refine_moved_ = moved_total;
  if (me_ == 0) {
    logger("partition")->info("refinement: edge cut {} -> {} ({} round(s), {} node moves)", cut_before_refine_,
                              cut_after_refine_, rounds, moved_total);
  }
  std::vector<int32_t>().swap(adj);
  return unspill_edges();  // after the step's last collective
}

}  // namespace dgld::rank
