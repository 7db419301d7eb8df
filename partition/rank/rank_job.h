#pragma once
// The job of one rank of dgl-partition --distributed (dist_partition.h): its
// state and its steps, one file per phase:
//   rank_job.cpp  the run (steps in order, each agreed on by every rank)
//   read.cpp      1. this rank's share of the chunked input; spill files
//   cut.cpp       2-3. edges to their ranks, the symmetric adjacency, PT-Scotch
//   move.cpp      4-6. new ids, edges and nodes (with their rows) to their partition
//   write.cpp     7-8. partition files, put in place, the config, the figures
// Private to dgl-partition-rank.

#include "partition/rank/comm.h"
// PT-Scotch needs mpi.h first.
#include <scotch/ptscotch.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "common/partition/array_file.h"
#include "partition/chunked.h"
#include "partition/dist_partition.h"
#include "partition/progress.h"

namespace dgld::rank {
namespace fs = std::filesystem;

using Clock = PartitionClock;  // seconds_since() and peak_rss_bytes(): partition/progress.h

// An edge on its way: endpoints (original ids, later new ids; both below
// 2^31, which read_share checks) and its original edge id. 16 bytes.
struct EdgeRec {
  int32_t u, v;
  int64_t eid;
};

// --scotch-edge-fraction auto: the sample PT-Scotch sees is cut so that its
// estimated working memory, kScotchBytesPerEnd per edge end, stays within
// kScotchBudget times the rank's share of the input. Measured with 4 ranks:
// about 150 B per end at 1 M nodes, about 200 B at products scale (2.45 M
// nodes), so the budget leaves room for that growth: with 1.8 a products
// rank peaked at 2.55x its share, with 1.65 see docs/performance.md.
constexpr double kScotchBytesPerEnd = 150;
constexpr double kScotchBudget = 1.65;
// Below this estimate the whole graph goes to PT-Scotch whatever the share
// (small graphs, and graphs whose features are small beside their edges,
// keep the best cut), and a sample never keeps less than kScotchMinFraction.
constexpr double kScotchFreeBytes = 256.0 * (1 << 20);
constexpr double kScotchMinFraction = 0.15;


// `items` in the order of key(item) in [0, P) (stable), with the count per key.
template <typename T, typename Key>
std::vector<T> group_by(const std::vector<T>& items, int P, Key&& key, std::vector<int64_t>* counts) {
  counts->assign(static_cast<size_t>(P), 0);
  for (const T& x : items) ++(*counts)[static_cast<size_t>(key(x))];
  std::vector<int64_t> at(static_cast<size_t>(P), 0);
  for (int r = 1; r < P; ++r) at[static_cast<size_t>(r)] = at[static_cast<size_t>(r) - 1] + (*counts)[static_cast<size_t>(r) - 1];
  std::vector<T> out(items.size());
  for (const T& x : items) out[static_cast<size_t>(at[static_cast<size_t>(key(x))]++)] = x;
  return out;
}

// `items` reordered in place so that key(item) in [0, P) ascends (the order
// within a key is not kept); returns the count per key. No second buffer:
// each item is swapped straight into its key's next free place.
template <typename T, typename Key>
std::vector<int64_t> group_in_place(std::vector<T>& items, int P, Key&& key) {
  std::vector<int64_t> counts(static_cast<size_t>(P), 0);
  for (const T& x : items) ++counts[static_cast<size_t>(key(x))];
  std::vector<int64_t> next(static_cast<size_t>(P), 0), end(static_cast<size_t>(P), 0);
  for (int b = 0; b < P; ++b) {
    next[static_cast<size_t>(b)] = b == 0 ? 0 : end[static_cast<size_t>(b) - 1];
    end[static_cast<size_t>(b)] = next[static_cast<size_t>(b)] + counts[static_cast<size_t>(b)];
  }
  for (int b = 0; b < P; ++b) {
    while (next[static_cast<size_t>(b)] < end[static_cast<size_t>(b)]) {
      T x = items[static_cast<size_t>(next[static_cast<size_t>(b)])];
      for (int k = key(x); k != b; k = key(x)) std::swap(x, items[static_cast<size_t>(next[static_cast<size_t>(k)]++)]);
      items[static_cast<size_t>(next[static_cast<size_t>(b)]++)] = x;
    }
  }
  return counts;
}

class RankJob {
 public:
  RankJob(const Comm& comm, const DistPartitionOptions& o) : comm_(comm), o_(o), P_(comm.size()), me_(comm.rank()) {}

  Status run();

 private:
  // One step of the job; a step's error reaches every rank at its end. Steps
  // that call collectives midway fail only before the first one or after the
  // last; what could go wrong in between is a bug, and ends the job
  // (fatal()) rather than leaving the other ranks waiting.
  template <typename F>
  Status step(const std::string& what, F&& f) {
    const auto t = Clock::now();
    Status st;
    try {
      st = f();
    } catch (const std::exception& e) {
      st = internal_error(e.what());
    }
    DGLD_RETURN_IF_ERROR(comm_.agree(st, what));
    logger("partition")->info("rank {}: {} done in {:.2f} s (peak rss {:.0f} MiB)", me_, what, seconds_since(t),
                              static_cast<double>(peak_rss_bytes()) / (1 << 20));
    return Status::ok();
  }

  // ---- 1. this rank's chunks: a contiguous block of node chunks (so a
  // contiguous range of original node ids) and a block of edge chunks.
  static std::pair<int, int> block(int n, int P, int r) { return {static_cast<int>(int64_t{n} * r / P), static_cast<int>(int64_t{n} * (r + 1) / P)}; }

  Status read_share();

  // This rank's rows of every node data array (its block of node chunks).
  Status read_node_data();

  // Edge records wait in files next to the output while the memory is
  // needed for something else (PT-Scotch, the other direction's exchange,
  // the node rows), then come back. They are 16 bytes per edge and
  // direction; PT-Scotch needs about 110 per edge end it sees.
  fs::path spill_path(const char* which) const {
    return o_.output / fmt::format(".rank{}-{}.{}.spill", me_, getpid(), which);
  }

  template <typename T>
  Status spill(std::vector<T>& v, const char* which, size_t& count) const {
    const fs::path path = spill_path(which);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return io_error(fmt::format("{}: cannot create: {}", path.string(), std::strerror(errno)));
    bool ok = v.empty() || std::fwrite(v.data(), sizeof(T), v.size(), f) == v.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok) return io_error(fmt::format("{}: writing {} records failed: {}", path.string(), v.size(), std::strerror(errno)));
    count = v.size();
    std::vector<T>().swap(v);
    return Status::ok();
  }

  template <typename T>
  Status unspill(std::vector<T>& v, const char* which, size_t count) const {
    const fs::path path = spill_path(which);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return io_error(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
    v.resize(count);
    const bool ok = v.empty() || std::fread(v.data(), sizeof(T), v.size(), f) == v.size();
    std::fclose(f);
    if (!ok) return io_error(fmt::format("{}: reading back {} records failed", path.string(), count));
    std::error_code ec;
    fs::remove(path, ec);
    return Status::ok();
  }

  Status spill_edges(bool in = true, bool out = true);

  Status unspill_edges(bool in = true, bool out = true);

  // Between two collectives a failure cannot be agreed on: it ends the job.
  void or_fatal(const Status& st) const;

  // A broken invariant in the middle of collectives: the whole job stops.
  [[noreturn]] void fatal(const std::string& what) const;

  int owner_of_orig(int64_t v) const {
    return static_cast<int>(std::upper_bound(starts_.begin(), starts_.end(), v) - starts_.begin()) - 1;
  }

  // ---- 2. every edge to the rank of its destination (in-edges) and of its
  // source (out-edges, for the symmetric adjacency PT-Scotch wants).
  Status shuffle_edges();

  template <typename T>
  static std::vector<T> flatten(std::vector<std::vector<T>>&& parts) {
    std::vector<T> out;
    size_t n = 0;
    for (const auto& p : parts) n += p.size();
    out.reserve(n);
    for (auto& p : parts) {
      out.insert(out.end(), p.begin(), p.end());
      std::vector<T>().swap(p);
    }
    return out;
  }

  // ---- 3. PT-Scotch on the symmetrised graph (no self loops, no duplicates).
  Status adjacency();

  Status cut();

  // Refines part_ by label propagation over every edge (refine.cpp).
  Status refine();

  // ---- 4. new ids: partition-major, within a partition by original id
  // (rank order, then the rank's order).
  Status relabel();

  int part_of_new(int64_t v) const {
    return static_cast<int>(std::upper_bound(part_start_.begin(), part_start_.end(), v) - part_start_.begin()) - 1;
  }

  // ---- 5. in-edges to the partition of their destination, out-edges to
  // the partition of their source; then the edge records wait in the spill
  // file while the nodes move.
  Status move_edges();

  // ---- 6. nodes with their rows to their partition; partition me_'s node
  // data file is written at once (under the hidden staging name), so the rows
  // are gone before the edge records come back.
  Status move_nodes();

  // ---- 7. partition me_'s graph in the single-process format, under the
  // hidden name: each array computed, written and freed in turn (the edge
  // arrays streamed in pieces). The in-edge arrays are written with the
  // out-edges in their spill file (only the halo rows' edges are taken from
  // it); then the in-edges go and the out-edges come back for the out CSR.
  Status write_partition();

  // fn(record) for every edge record in spill file `which`, read in pieces.
  template <typename F>
  Status for_each_spilled(const char* which, size_t count, F&& fn) const {
    const fs::path path = spill_path(which);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return io_error(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
    constexpr size_t kPiece = size_t{1} << 20;
    std::vector<EdgeRec> piece;
    for (size_t at = 0; at < count; at += kPiece) {
      piece.resize(std::min(kPiece, count - at));
      if (std::fread(piece.data(), sizeof(EdgeRec), piece.size(), f) != piece.size()) {
        std::fclose(f);
        return io_error(fmt::format("{}: reading back records {}..{} failed", path.string(), at, at + piece.size()));
      }
      for (const EdgeRec& e : piece) fn(e);
    }
    std::fclose(f);
    return Status::ok();
  }

  // fn(out-edge, its new edge id) for every out-edge in its spill file, read
  // in pieces (the files stay for the out CSR).
  template <typename F>
  Status for_each_spilled_out(F&& fn) const {
    const fs::path edges = spill_path("out"), eids = spill_path("out-eids");
    std::FILE* fe = std::fopen(edges.c_str(), "rb");
    std::FILE* fi = std::fopen(eids.c_str(), "rb");
    auto close = [&] {
      if (fe) std::fclose(fe);
      if (fi) std::fclose(fi);
    };
    if (fe == nullptr || fi == nullptr) {
      close();
      return io_error(fmt::format("{}: cannot open: {}", (fe == nullptr ? edges : eids).string(), std::strerror(errno)));
    }
    constexpr size_t kPiece = size_t{1} << 20;
    std::vector<EdgeRec> e;
    std::vector<int64_t> n;
    for (size_t at = 0; at < spilled_out_; at += kPiece) {
      const size_t count = std::min(kPiece, spilled_out_ - at);
      e.resize(count);
      n.resize(count);
      if (std::fread(e.data(), sizeof(EdgeRec), count, fe) != count || std::fread(n.data(), sizeof(int64_t), count, fi) != count) {
        close();
        return io_error(fmt::format("{}: reading back out-edges {}..{} failed", edges.string(), at, at + count));
      }
      for (size_t k = 0; k < count; ++k) fn(e[k], n[k]);
    }
    close();
    return Status::ok();
  }

  // Writes the next array of `w`, n values value(0..n-1), in pieces.
  template <typename T, typename F>
  static Status stream(ArrayFileWriter& w, int64_t n, F&& value) {
    constexpr int64_t kPiece = 1 << 16;
    std::vector<T> piece;
    piece.reserve(static_cast<size_t>(std::min(n, kPiece)));
    for (int64_t i = 0; i < n; i += kPiece) {
      piece.clear();
      const int64_t end = std::min(n, i + kPiece);
      for (int64_t k = i; k < end; ++k) piece.push_back(value(k));
      DGLD_RETURN_IF_ERROR(w.append(std::span<const T>(piece)));
    }
    return Status::ok();
  }

  // ---- 8. every rank wrote its partition: each renames its own into place.
  Status commit_partition();

  Status write_config();

 public:
  // Figures for the summary and benchmarks: gathered on every rank (collective).
  // This rank's share of the input: an int64 CSR of its edges and its rows.
  int64_t share_bytes() const { return (n_local_ + 1) * 8 + share_edges_ * 8 + feature_bytes_; }

  nlohmann::json figures();

  // Run after a failure: a rank's hidden partial directory goes.
  void clean_up();

  std::vector<int64_t> edge_counts_all_;

 private:
  struct Column {
    std::string name;
    DType dtype = DType::float32;
    int64_t cols = 1;
    std::vector<std::byte> data;  // rows of this rank's nodes (then of its partition)
  };

  const Comm& comm_;
  const DistPartitionOptions& o_;
  const int P_, me_;
  ChunkedGraph g_;
  std::vector<int64_t> starts_;  // original node range of each rank
  int64_t n_local_ = 0, share_edges_ = 0, feature_bytes_ = 0;
  std::vector<Column> columns_;
  std::vector<EdgeRec> read_, in_, out_;
  std::vector<int32_t> part_;
  std::vector<SCOTCH_Num> vert_, adj_;  // this rank's rows of the symmetrised adjacency
  std::vector<int64_t> counts_, part_start_, new_id_, orig_, out_new_eid_;
  int64_t edge_start_ = 0, num_edges_ = 0, cut_ = 0, halo_nodes_ = 0;
  double scotch_s_ = 0, total_s_ = 0, scotch_fraction_ = 1.0, refine_s_ = 0;
  int64_t cut_before_refine_ = -1, cut_after_refine_ = -1, refine_moved_ = 0;  // edges crossing parts, node moves
  int refine_rounds_ = 0;
  fs::path staging_;
  size_t spilled_in_ = 0, spilled_out_ = 0, spilled_out_eids_ = 0;  // records in the spill files
};

}  // namespace dgld::rank
