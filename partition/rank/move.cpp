#include "partition/rank/rank_job.h"

#include <algorithm>
#include <numeric>

#include "common/partition/partition.h"

namespace dgld::rank {

Status RankJob::relabel() {
  std::vector<int64_t> mine(static_cast<size_t>(P_), 0);
  for (int32_t p : part_) ++mine[static_cast<size_t>(p)];
  counts_.assign(static_cast<size_t>(P_) * P_, 0);  // [rank][part]
  MPI_Allgather(mine.data(), P_, MPI_INT64_T, counts_.data(), P_, MPI_INT64_T, comm_.get());
  part_start_.assign(static_cast<size_t>(P_) + 1, 0);
  for (int p = 0; p < P_; ++p) {
    int64_t n = 0;
    for (int r = 0; r < P_; ++r) n += counts_[static_cast<size_t>(r) * P_ + p];
    part_start_[static_cast<size_t>(p) + 1] = part_start_[static_cast<size_t>(p)] + n;
  }
  std::vector<int64_t> next(static_cast<size_t>(P_));
  for (int p = 0; p < P_; ++p) {
    next[static_cast<size_t>(p)] = part_start_[static_cast<size_t>(p)];
    for (int r = 0; r < me_; ++r) next[static_cast<size_t>(p)] += counts_[static_cast<size_t>(r) * P_ + p];
  }
  new_id_.resize(static_cast<size_t>(n_local_));
  for (int64_t i = 0; i < n_local_; ++i) new_id_[static_cast<size_t>(i)] = next[static_cast<size_t>(part_[static_cast<size_t>(i)])]++;
  // The new ids of the other ends of this rank's edges, asked of their
  // ranks: each node once, in increasing order (a bit per node of the graph
  // marks them; far less than a list of every edge's other end).
  std::vector<std::vector<int64_t>> ask(static_cast<size_t>(P_));
  {
    std::vector<uint64_t> wanted((static_cast<size_t>(g_.num_nodes()) + 63) / 64, 0);
    for (const EdgeRec& e : in_) wanted[static_cast<size_t>(e.u) >> 6] |= uint64_t{1} << (e.u & 63);
    for (const EdgeRec& e : out_) wanted[static_cast<size_t>(e.v) >> 6] |= uint64_t{1} << (e.v & 63);
    for (size_t w = 0; w < wanted.size(); ++w) {
      for (uint64_t bits = wanted[w]; bits != 0; bits &= bits - 1) {
        const auto v = static_cast<int64_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
        ask[static_cast<size_t>(owner_of_orig(v))].push_back(v);
      }
    }
  }
  auto asked = comm_.exchange(ask);
  std::vector<std::vector<int64_t>> asked_answers(asked.size());
  for (size_t r = 0; r < asked.size(); ++r) {
    asked_answers[r].reserve(asked[r].size());
    for (int64_t v : asked[r]) asked_answers[r].push_back(new_id_[static_cast<size_t>(v - starts_[me_])]);
  }
  std::vector<std::vector<int64_t>>().swap(asked);
  const auto answers = comm_.exchange(asked_answers);
  // ask[r] is sorted: the answer for v is at v's position in it (no hash
  // map: at 5 M edges per rank one would cost more than the edges).
  auto renew = [&](int64_t v) {
    const auto r = static_cast<size_t>(owner_of_orig(v));
    const auto it = std::lower_bound(ask[r].begin(), ask[r].end(), v);
    if (it == ask[r].end() || *it != v || answers[r].size() != ask[r].size()) {
      fatal(fmt::format("no new id came back for node {}", v));
    }
    return answers[r][static_cast<size_t>(it - ask[r].begin())];
  };
  for (EdgeRec& e : in_) {
    e.u = static_cast<int32_t>(renew(e.u));
    e.v = static_cast<int32_t>(new_id_[static_cast<size_t>(e.v - starts_[me_])]);
  }
  for (EdgeRec& e : out_) {
    e.u = static_cast<int32_t>(new_id_[static_cast<size_t>(e.u - starts_[me_])]);
    e.v = static_cast<int32_t>(renew(e.v));
  }
  return Status::ok();
}

Status RankJob::move_edges() {
  // One direction at a time: the other waits in the spill file meanwhile.
  std::vector<int64_t> counts;
  or_fatal(spill_edges(/*in=*/false, /*out=*/true));
  {
    auto send = group_by(in_, P_, [&](const EdgeRec& e) { return part_of_new(e.v); }, &counts);
    std::vector<EdgeRec>().swap(in_);
    in_ = comm_.route(std::move(send), counts);
  }
  or_fatal(spill_edges(/*in=*/true, /*out=*/false));
  or_fatal(unspill_edges(/*in=*/false, /*out=*/true));
  {
    auto send = group_by(out_, P_, [&](const EdgeRec& e) { return part_of_new(e.u); }, &counts);
    std::vector<EdgeRec>().swap(out_);
    out_ = comm_.route(std::move(send), counts);
  }
  or_fatal(unspill_edges(/*in=*/true, /*out=*/false));
  // In-edges in the single-process order: by destination, then input order.
  std::sort(in_.begin(), in_.end(), [](const EdgeRec& a, const EdgeRec& b) { return a.v != b.v ? a.v < b.v : a.eid < b.eid; });
  const auto edge_counts = comm_.allgather<int64_t>(static_cast<int64_t>(in_.size()));
  edge_counts_all_ = edge_counts;
  edge_start_ = std::accumulate(edge_counts.begin(), edge_counts.begin() + me_, int64_t{0});
  num_edges_ = std::accumulate(edge_counts.begin(), edge_counts.end(), int64_t{0});
  // Out-edges: their new ids come from their destination's partition,
  // which finds each (destination, original edge id) in its sorted in_.
  // The out-edges wait in their spill file and are read back a slice per
  // round (at most 32 MiB of queries from each rank; every rank takes the
  // same number of rounds).
  or_fatal(spill(out_, "out", spilled_out_));
  out_new_eid_.assign(spilled_out_, -1);  // after the spill: never beside both edge directions
  constexpr int64_t kRoundEdges = (int64_t{32} << 20) / static_cast<int64_t>(sizeof(EdgeRec));
  const auto n_out = static_cast<int64_t>(spilled_out_);
  const auto all_rounds = comm_.allgather<int64_t>(std::max<int64_t>(1, (n_out + kRoundEdges - 1) / kRoundEdges));
  const int64_t rounds = *std::max_element(all_rounds.begin(), all_rounds.end());
  std::FILE* f = std::fopen(spill_path("out").c_str(), "rb");
  if (f == nullptr) or_fatal(io_error(fmt::format("{}: cannot open: {}", spill_path("out").string(), std::strerror(errno))));
  std::vector<EdgeRec> slice;
  for (int64_t k = 0; k < rounds; ++k) {
    const int64_t lo = n_out * k / rounds, hi = n_out * (k + 1) / rounds;
    slice.resize(static_cast<size_t>(hi - lo));
    if (!slice.empty() && std::fread(slice.data(), sizeof(EdgeRec), slice.size(), f) != slice.size()) {
      std::fclose(f);
      or_fatal(io_error(fmt::format("{}: reading back out-edges {}..{} failed", spill_path("out").string(), lo, hi)));
    }
    std::vector<std::vector<EdgeRec>> ask(static_cast<size_t>(P_));
    for (const EdgeRec& e : slice) ask[static_cast<size_t>(part_of_new(e.v))].push_back(e);
    auto asked_edges = comm_.exchange(ask);
    std::vector<std::vector<EdgeRec>>().swap(ask);
    std::vector<std::vector<int64_t>> asked(asked_edges.size());
    for (size_t r = 0; r < asked_edges.size(); ++r) {
      asked[r].reserve(asked_edges[r].size());
      for (const EdgeRec& q : asked_edges[r]) {
        const auto it = std::lower_bound(in_.begin(), in_.end(), q, [](const EdgeRec& x, const EdgeRec& y) {
          return x.v != y.v ? x.v < y.v : x.eid < y.eid;
        });
        if (it == in_.end() || it->v != q.v || it->eid != q.eid) {
          fatal(fmt::format("edge {} is not an in-edge of partition {}", q.eid, me_));
        }
        asked[r].push_back(edge_start_ + (it - in_.begin()));
      }
      std::vector<EdgeRec>().swap(asked_edges[r]);
    }
    const auto answers = comm_.exchange(asked);
    std::vector<size_t> at(static_cast<size_t>(P_), 0);
    for (int64_t j = lo; j < hi; ++j) {
      const auto q = static_cast<size_t>(part_of_new(slice[static_cast<size_t>(j - lo)].v));
      out_new_eid_[static_cast<size_t>(j)] = answers[q][at[q]++];
    }
  }
  std::fclose(f);
  for (const EdgeRec& e : in_) cut_ += part_of_new(e.u) != me_;
  // After this step's last collective: the in-edges wait too (the
  // out-edges already do), and so do the out-edges' new ids.
  DGLD_RETURN_IF_ERROR(spill(out_new_eid_, "out-eids", spilled_out_eids_));
  return spill_edges(/*in=*/true, /*out=*/false);
}

Status RankJob::move_nodes() {
  // A node record: new id, original id, then each column's row. They go in
  // rounds of at most 32 MiB from each rank (the same round count on every
  // rank), straight into partition me_'s columns.
  size_t rec = 16;
  for (const Column& c : columns_) rec += static_cast<size_t>(c.cols) * dtype_size(c.dtype);
  const int64_t first = part_start_[me_], n = part_start_[me_ + 1] - first;
  orig_.assign(static_cast<size_t>(n), -1);
  std::vector<Column> mine;
  for (const Column& c : columns_) {
    mine.push_back({c.name, c.dtype, c.cols, {}});
    mine.back().data.assign(static_cast<size_t>(n) * static_cast<size_t>(c.cols) * dtype_size(c.dtype), std::byte{0});
  }
  constexpr int64_t kRoundBytes = int64_t{32} << 20;
  int64_t rounds = std::max<int64_t>(1, (n_local_ * static_cast<int64_t>(rec) + kRoundBytes - 1) / kRoundBytes);
  const auto all_rounds = comm_.allgather<int64_t>(rounds);
  rounds = *std::max_element(all_rounds.begin(), all_rounds.end());
  for (int64_t k = 0; k < rounds; ++k) {
    const int64_t lo = n_local_ * k / rounds, hi = n_local_ * (k + 1) / rounds;
    std::vector<int64_t> counts(static_cast<size_t>(P_), 0), at(static_cast<size_t>(P_), 0);
    for (int64_t i = lo; i < hi; ++i) counts[static_cast<size_t>(part_[static_cast<size_t>(i)])] += static_cast<int64_t>(rec);
    for (int p = 1; p < P_; ++p) at[static_cast<size_t>(p)] = at[static_cast<size_t>(p) - 1] + counts[static_cast<size_t>(p) - 1];
    std::vector<std::byte> send(static_cast<size_t>(hi - lo) * rec);
    for (int64_t i = lo; i < hi; ++i) {
      std::byte* p = send.data() + at[static_cast<size_t>(part_[static_cast<size_t>(i)])];
      at[static_cast<size_t>(part_[static_cast<size_t>(i)])] += static_cast<int64_t>(rec);
      const int64_t ids[2] = {new_id_[static_cast<size_t>(i)], starts_[me_] + i};
      std::memcpy(p, ids, 16);
      p += 16;
      for (const Column& c : columns_) {
        const size_t row = static_cast<size_t>(c.cols) * dtype_size(c.dtype);
        std::memcpy(p, c.data.data() + static_cast<size_t>(i) * row, row);
        p += row;
      }
    }
    const std::vector<std::byte> got = comm_.route(std::move(send), counts);
    for (size_t off = 0; off + rec <= got.size(); off += rec) {
      int64_t ids[2];
      std::memcpy(ids, got.data() + off, 16);
      const int64_t local = ids[0] - first;
      if (local < 0 || local >= n || orig_[static_cast<size_t>(local)] >= 0) {
        fatal(fmt::format("node {} (new id {}) arrived at the wrong partition or twice", ids[1], ids[0]));
      }
      orig_[static_cast<size_t>(local)] = ids[1];
      const std::byte* p = got.data() + off + 16;
      for (Column& c : mine) {
        const size_t row = static_cast<size_t>(c.cols) * dtype_size(c.dtype);
        std::memcpy(c.data.data() + static_cast<size_t>(local) * row, p, row);
        p += row;
      }
    }
  }
  columns_ = std::move(mine);  // this rank's rows go; partition me_'s stay
  for (int64_t v = 0; v < n; ++v) {
    if (orig_[static_cast<size_t>(v)] < 0) fatal(fmt::format("node {} of partition {} never arrived", first + v, me_));
  }
  // The last collective is behind: what follows may fail on its own.
  staging_ = o_.output / fmt::format(".part{}.partial-{}", me_, getpid());
  fs::remove_all(staging_);
  fs::create_directories(staging_);
  // Node data: "_N/<name>" per column, and every node's trainer (this machine's one).
  std::vector<ArraySpec> nspecs;
  for (const Column& c : columns_) {
    std::vector<int64_t> shape = {n};
    if (c.cols > 1 || c.name == "features") shape.push_back(c.cols);
    nspecs.push_back({"_N/" + c.name, c.dtype, shape});
  }
  nspecs.push_back({"_N/trainer_id", DType::int64, {n}});
  DGLD_ASSIGN_OR_RETURN(auto nw, ArrayFileWriter::create(staging_ / "node_feat.dgld", ArrayFileKind::node_features, nspecs));
  for (Column& c : columns_) {
    DGLD_RETURN_IF_ERROR(nw->append(c.data.data(), c.data.size()));
    std::vector<std::byte>().swap(c.data);
  }
  DGLD_RETURN_IF_ERROR(nw->write_array(std::span<const int64_t>(std::vector<int64_t>(static_cast<size_t>(n), me_))));
  DGLD_RETURN_IF_ERROR(nw->finish());
  return unspill_edges(/*in=*/true, /*out=*/false);  // the out-edges wait until step 8's second half
}

}  // namespace dgld::rank
