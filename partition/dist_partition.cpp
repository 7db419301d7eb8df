#include "partition/dist_partition.h"

// The C API only (OpenMPI's C++ bindings warn under -Wextra).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
// PT-Scotch needs mpi.h first.
#include <scotch/ptscotch.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <numeric>
#include <span>
#include <cstdint>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/part_config.h"
#include "common/partition/array_file.h"
#include "common/partition/partition.h"
#include "partition/chunked.h"
#include "partition/dist_launch.h"
#include "common/random.h"

namespace dgld {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

// ---------------------------------------------------------------- MPI helpers

class Comm {
 public:
  explicit Comm(MPI_Comm c) : c_(c) {
    MPI_Comm_rank(c_, &rank_);
    MPI_Comm_size(c_, &size_);
  }
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm get() const { return c_; }

  // Every rank's status: ok when all are; otherwise the first failing rank's
  // message, on every rank, naming that rank.
  Status agree(const Status& mine, const std::string& step) const {
    int ok = mine.is_ok() ? 1 : 0;
    std::vector<int> all(static_cast<size_t>(size_));
    MPI_Allgather(&ok, 1, MPI_INT, all.data(), 1, MPI_INT, c_);
    const auto bad = std::find(all.begin(), all.end(), 0);
    if (bad == all.end()) return Status::ok();
    const int who = static_cast<int>(bad - all.begin());
    std::string msg = who == rank_ ? mine.message() : std::string();
    int len = static_cast<int>(msg.size());
    MPI_Bcast(&len, 1, MPI_INT, who, c_);
    msg.resize(static_cast<size_t>(len));
    MPI_Bcast(msg.data(), len, MPI_CHAR, who, c_);
    return invalid_argument(fmt::format("rank {} ({}): {}", who, step, msg));
  }

  template <typename T>
  std::vector<T> allgather(T v) const {
    std::vector<T> out(static_cast<size_t>(size_));
    MPI_Allgather(&v, sizeof(T), MPI_BYTE, out.data(), sizeof(T), MPI_BYTE, c_);
    return out;
  }

  int64_t sum(int64_t v) const {
    int64_t out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_INT64_T, MPI_SUM, c_);
    return out;
  }

  // `send` grouped by destination (counts[r] items for rank r) goes out in
  // one all-to-all straight from and into flat buffers; returns what every
  // rank sent here, by rank. Falls back to exchange() past MPI's int counts.
  template <typename T>
  std::vector<T> route(std::vector<T>&& send, const std::vector<int64_t>& counts) const {
    std::vector<T> out = route_from(std::span<const T>(send), counts);
    std::vector<T>().swap(send);
    return out;
  }

  // The same, sending from `send` without taking it.
  template <typename T>
  std::vector<T> route_from(std::span<const T> send, const std::vector<int64_t>& counts) const {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto P = static_cast<size_t>(size_);
    std::vector<int64_t> in_n(P);
    MPI_Alltoall(counts.data(), 1, MPI_INT64_T, in_n.data(), 1, MPI_INT64_T, c_);
    const int64_t out_total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    const int64_t in_total = std::accumulate(in_n.begin(), in_n.end(), int64_t{0});
    const int64_t limit = INT32_MAX / static_cast<int64_t>(sizeof(T));
    int big = out_total > limit || in_total > limit ? 1 : 0, any_big = 0;
    MPI_Allreduce(&big, &any_big, 1, MPI_INT, MPI_MAX, c_);
    if (any_big) {
      std::vector<std::vector<T>> parts(P);
      size_t at = 0;
      for (size_t r = 0; r < P; ++r) {
        parts[r].assign(send.begin() + static_cast<std::ptrdiff_t>(at), send.begin() + static_cast<std::ptrdiff_t>(at + counts[r]));
        at += static_cast<size_t>(counts[r]);
      }
      auto got = exchange(parts);
      std::vector<std::vector<T>>().swap(parts);
      std::vector<T> out;
      out.reserve(static_cast<size_t>(in_total));
      for (auto& g : got) {
        out.insert(out.end(), g.begin(), g.end());
        std::vector<T>().swap(g);
      }
      return out;
    }
    std::vector<int> sc(P), sd(P), rc(P), rd(P);
    int so = 0, ro = 0;
    for (size_t r = 0; r < P; ++r) {
      sc[r] = static_cast<int>(counts[r] * static_cast<int64_t>(sizeof(T)));
      rc[r] = static_cast<int>(in_n[r] * static_cast<int64_t>(sizeof(T)));
      sd[r] = so;
      rd[r] = ro;
      so += sc[r];
      ro += rc[r];
    }
    std::vector<T> out(static_cast<size_t>(in_total));
    MPI_Alltoallv(send.data(), sc.data(), sd.data(), MPI_BYTE, out.data(), rc.data(), rd.data(), MPI_BYTE, c_);
    return out;
  }

  // send[r] goes to rank r; returns what each rank sent here. Messages go in
  // pieces of at most 64 MiB / P per rank (at least 1 MiB), so the two
  // staging buffers stay small next to what is sent and received.
  template <typename T>
  std::vector<std::vector<T>> exchange(const std::vector<std::vector<T>>& send) const {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto P = static_cast<size_t>(size_);
    std::vector<int64_t> out_n(P), in_n(P);
    for (size_t r = 0; r < P; ++r) out_n[r] = static_cast<int64_t>(send[r].size());
    MPI_Alltoall(out_n.data(), 1, MPI_INT64_T, in_n.data(), 1, MPI_INT64_T, c_);
    std::vector<std::vector<T>> recv(P);
    for (size_t r = 0; r < P; ++r) recv[r].resize(static_cast<size_t>(in_n[r]));
    const int64_t kPiece =
        std::max<int64_t>(int64_t{1} << 20, (int64_t{64} << 20) / static_cast<int64_t>(P)) / static_cast<int64_t>(sizeof(T)) + 1;
    for (int64_t at = 0;; at += kPiece) {
      std::vector<int> sc(P), rc(P), sd(P), rd(P);
      std::vector<char> sbuf, rbuf;
      bool any = false;
      for (size_t r = 0; r < P; ++r) {
        const int64_t s = std::clamp<int64_t>(out_n[r] - at, 0, kPiece), q = std::clamp<int64_t>(in_n[r] - at, 0, kPiece);
        sc[r] = static_cast<int>(s * static_cast<int64_t>(sizeof(T)));
        rc[r] = static_cast<int>(q * static_cast<int64_t>(sizeof(T)));
        any = any || out_n[r] > at || in_n[r] > at;
      }
      int more = any ? 1 : 0, any_more = 0;
      MPI_Allreduce(&more, &any_more, 1, MPI_INT, MPI_MAX, c_);
      if (!any_more) break;
      size_t stot = 0, rtot = 0;
      for (size_t r = 0; r < P; ++r) {
        sd[r] = static_cast<int>(stot);
        rd[r] = static_cast<int>(rtot);
        stot += static_cast<size_t>(sc[r]);
        rtot += static_cast<size_t>(rc[r]);
      }
      sbuf.resize(stot);
      rbuf.resize(rtot);
      for (size_t r = 0; r < P; ++r) {
        if (sc[r]) std::memcpy(sbuf.data() + sd[r], send[r].data() + at, static_cast<size_t>(sc[r]));
      }
      MPI_Alltoallv(sbuf.data(), sc.data(), sd.data(), MPI_BYTE, rbuf.data(), rc.data(), rd.data(), MPI_BYTE, c_);
      for (size_t r = 0; r < P; ++r) {
        if (rc[r]) std::memcpy(recv[r].data() + at, rbuf.data() + rd[r], static_cast<size_t>(rc[r]));
      }
    }
    return recv;
  }

 private:
  MPI_Comm c_;
  int rank_ = 0, size_ = 1;
};

// ---------------------------------------------------------------- the job

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

  Status run() {
    const auto t0 = Clock::now();
    DGLD_RETURN_IF_ERROR(step("reading its chunks", [&] { return read_share(); }));
    DGLD_RETURN_IF_ERROR(step("exchanging edges", [&] { return shuffle_edges(); }));
    DGLD_RETURN_IF_ERROR(step("building its adjacency", [&] { return adjacency(); }));
    DGLD_RETURN_IF_ERROR(step("PT-Scotch", [&] { return cut(); }));
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

  Status read_share() {
    DGLD_ASSIGN_OR_RETURN(g_, read_chunked_metadata(o_.chunks));
    if (g_.num_nodes() > INT32_MAX) {
      return invalid_argument(fmt::format("{} nodes: PT-Scotch (32-bit SCOTCH_Num here) takes at most 2^31-1",
                                          g_.num_nodes()));
    }
    // Node ranges of every rank, from the chunk blocks.
    starts_.assign(static_cast<size_t>(P_) + 1, 0);
    for (int r = 0; r < P_; ++r) {
      const auto [b, e] = block(g_.num_node_chunks(), P_, r);
      starts_[static_cast<size_t>(r) + 1] = e < g_.num_node_chunks() ? g_.node_chunk_start(e) : g_.num_nodes();
      (void)b;
    }
    n_local_ = starts_[me_ + 1] - starts_[me_];
    // Node data is read when the nodes move (step 5), so that it does not
    // sit in memory through PT-Scotch; its headers are checked now.
    const auto [nb, ne] = block(g_.num_node_chunks(), P_, me_);
    for (const ChunkedNodeData& d : g_.node_data) {
      for (int c = nb; c < ne; ++c) {
        DGLD_ASSIGN_OR_RETURN(NpyHeader h, check_node_data_chunk(g_, d.name, c));
        feature_bytes_ += h.rows * h.cols * static_cast<int64_t>(dtype_size(h.dtype));
      }
    }
    const auto [eb, ee] = block(g_.num_edge_chunks(), P_, me_);
    for (int c = eb; c < ee; ++c) {
      // Straight into 16-byte records: no 64-bit copy of the chunk's ids.
      int64_t eid = g_.edge_chunk_start(c);
      read_.reserve(read_.size() + static_cast<size_t>(g_.edge_chunk_sizes[static_cast<size_t>(c)]));
      DGLD_RETURN_IF_ERROR(for_each_edge_in_chunk(g_, c, [&](int64_t u, int64_t v) {
        read_.push_back({static_cast<int32_t>(u), static_cast<int32_t>(v), eid++});
      }));
      share_edges_ += g_.edge_chunk_sizes[static_cast<size_t>(c)];
    }
    return Status::ok();
  }

  // This rank's rows of every node data array (its block of node chunks).
  Status read_node_data() {
    const auto [nb, ne] = block(g_.num_node_chunks(), P_, me_);
    for (const ChunkedNodeData& d : g_.node_data) {
      Column col;
      col.name = d.name;
      for (int c = nb; c < ne; ++c) {
        DGLD_ASSIGN_OR_RETURN(NodeDataChunk chunk, read_node_data_chunk(g_, d.name, c));
        col.dtype = chunk.dtype;
        col.cols = chunk.cols;
        if (col.data.empty()) {
          col.data = std::move(chunk.data);  // one chunk per rank (--to-chunks P): no copy
        } else {
          col.data.insert(col.data.end(), chunk.data.begin(), chunk.data.end());
        }
      }
      columns_.push_back(std::move(col));
    }
    return Status::ok();
  }

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

  Status spill_edges(bool in = true, bool out = true) {
    if (in) DGLD_RETURN_IF_ERROR(spill(in_, "in", spilled_in_));
    if (out) DGLD_RETURN_IF_ERROR(spill(out_, "out", spilled_out_));
    return Status::ok();
  }

  Status unspill_edges(bool in = true, bool out = true) {
    if (in) DGLD_RETURN_IF_ERROR(unspill(in_, "in", spilled_in_));
    if (out) DGLD_RETURN_IF_ERROR(unspill(out_, "out", spilled_out_));
    return Status::ok();
  }

  // Between two collectives a failure cannot be agreed on: it ends the job.
  void or_fatal(const Status& st) const {
    if (st.is_ok()) return;
    std::cerr << "dgl-partition-rank: rank " << me_ << ": " << st.message() << "\n";
    MPI_Abort(comm_.get(), 3);
    std::abort();
  }

  // A broken invariant in the middle of collectives: the whole job stops.
  [[noreturn]] void fatal(const std::string& what) const {
    std::cerr << "dgl-partition-rank: rank " << me_ << ": internal error: " << what << "\n";
    MPI_Abort(comm_.get(), 3);
    std::abort();
  }

  int owner_of_orig(int64_t v) const {
    return static_cast<int>(std::upper_bound(starts_.begin(), starts_.end(), v) - starts_.begin()) - 1;
  }

  // ---- 2. every edge to the rank of its destination (in-edges) and of its
  // source (out-edges, for the symmetric adjacency PT-Scotch wants).
  Status shuffle_edges() {
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
  Status adjacency() {
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

  Status cut() {
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

  // ---- 4. new ids: partition-major, within a partition by original id
  // (rank order, then the rank's order).
  Status relabel() {
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

  int part_of_new(int64_t v) const {
    return static_cast<int>(std::upper_bound(part_start_.begin(), part_start_.end(), v) - part_start_.begin()) - 1;
  }

  // ---- 5. in-edges to the partition of their destination, out-edges to
  // the partition of their source; then the edge records wait in the spill
  // file while the nodes move.
  Status move_edges() {
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

  // ---- 6. nodes with their rows to their partition; partition me_'s node
  // data file is written at once (under the hidden staging name), so the rows
  // are gone before the edge records come back.
  Status move_nodes() {
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

  // ---- 7. partition me_'s graph in the single-process format, under the
  // hidden name: each array computed, written and freed in turn (the edge
  // arrays streamed in pieces). The in-edge arrays are written with the
  // out-edges in their spill file (only the halo rows' edges are taken from
  // it); then the in-edges go and the out-edges come back for the out CSR.
  Status write_partition() {
    namespace pa = part_arrays;
    const int64_t first = part_start_[me_], n_inner = part_start_[me_ + 1] - first;
    auto inner = [&](int64_t v) { return v >= first && v < first + n_inner; };
    // The halo rows' edges: out-edges of inner nodes to nodes elsewhere, by
    // destination then original edge id, with their new edge ids.
    struct HaloEdge {
      int32_t v, u;
      int64_t eid, neid;
    };
    std::vector<HaloEdge> halo_edges;
    // Halo nodes: sources of in-edges and destinations of out-edges
    // elsewhere (a bit per node of the graph marks them).
    std::vector<uint64_t> is_halo((static_cast<size_t>(g_.num_nodes()) + 63) / 64, 0);
    auto mark = [&](int64_t v) { is_halo[static_cast<size_t>(v) >> 6] |= uint64_t{1} << (v & 63); };
    for (const EdgeRec& e : in_) if (!inner(e.u)) mark(e.u);
    DGLD_RETURN_IF_ERROR(for_each_spilled_out([&](const EdgeRec& e, int64_t neid) {
      if (!inner(e.v)) {
        mark(e.v);
        halo_edges.push_back({e.v, e.u, e.eid, neid});
      }
    }));
    std::sort(halo_edges.begin(), halo_edges.end(),
              [](const HaloEdge& a, const HaloEdge& b) { return a.v != b.v ? a.v < b.v : a.eid < b.eid; });
    std::vector<int64_t> halo;
    for (size_t w = 0; w < is_halo.size(); ++w) {
      for (uint64_t bits = is_halo[w]; bits != 0; bits &= bits - 1) {
        halo.push_back(static_cast<int64_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
      }
    }
    std::vector<uint64_t>().swap(is_halo);
    auto local = [&](int64_t v) -> int64_t {
      if (inner(v)) return v - first;
      return n_inner + (std::lower_bound(halo.begin(), halo.end(), v) - halo.begin());
    };
    const int64_t n_local = n_inner + static_cast<int64_t>(halo.size());
    const int64_t e_inner = static_cast<int64_t>(in_.size()), e_local = e_inner + static_cast<int64_t>(halo_edges.size());
    const auto n_out = static_cast<int64_t>(spilled_out_);
    std::vector<ArraySpec> specs = {
        {pa::kMeta, DType::int64, {pa::kMetaSize}},
        {pa::kNodeGlobalId, DType::int64, {n_local}},
        {pa::kNodeInner, DType::uint8, {n_local}},
        {pa::kNodeOwner, DType::int32, {n_local}},
        {pa::kNodeOrigId, DType::int64, {n_inner}},
        {pa::kInIndptr, DType::int64, {n_local + 1}},
        {pa::kInIndices, DType::int64, {e_local}},
        {pa::kInEids, DType::int64, {e_local}},
        {pa::kEdgeInner, DType::uint8, {e_local}},
        {pa::kEdgeOrigId, DType::int64, {e_inner}},
        {pa::kOutIndptr, DType::int64, {n_inner + 1}},
        {pa::kOutIndices, DType::int64, {n_out}},
        {pa::kOutEids, DType::int64, {n_out}},
    };
    DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(staging_ / "graph.dgld", ArrayFileKind::partition_graph, specs));
    std::vector<int64_t> meta(pa::kMetaSize, 0);
    meta[pa::kMetaPartId] = me_;
    meta[pa::kMetaNumParts] = P_;
    meta[pa::kMetaNumInnerNodes] = n_inner;
    meta[pa::kMetaNumLocalNodes] = n_local;
    meta[pa::kMetaNumInnerEdges] = e_inner;
    meta[pa::kMetaNumLocalEdges] = e_local;
    meta[pa::kMetaNumOutEdges] = n_out;
    meta[pa::kMetaHaloHops] = 1;
    DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(meta)));
    // Node arrays, one at a time.
    auto gid = [&](int64_t i) { return i < n_inner ? first + i : halo[static_cast<size_t>(i - n_inner)]; };
    DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, n_local, [&](int64_t i) { return gid(i); }));
    DGLD_RETURN_IF_ERROR(stream<uint8_t>(*w, n_local, [&](int64_t i) { return static_cast<uint8_t>(i < n_inner); }));
    DGLD_RETURN_IF_ERROR(stream<int32_t>(*w, n_local, [&](int64_t i) { return static_cast<int32_t>(part_of_new(gid(i))); }));
    DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(orig_)));
    std::vector<int64_t>().swap(orig_);
    {
      std::vector<int64_t> indptr(static_cast<size_t>(n_local) + 1, 0);
      for (const EdgeRec& e : in_) ++indptr[static_cast<size_t>(e.v - first) + 1];
      for (const HaloEdge& h : halo_edges) ++indptr[static_cast<size_t>(local(h.v)) + 1];
      std::partial_sum(indptr.begin(), indptr.end(), indptr.begin());
      DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(indptr)));
    }
    // In-edges (inner rows in order), then the halo rows' edges.
    DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, e_local, [&](int64_t k) {
      return k < e_inner ? local(in_[static_cast<size_t>(k)].u) : halo_edges[static_cast<size_t>(k - e_inner)].u - first;
    }));
    DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, e_local, [&](int64_t k) {
      return k < e_inner ? edge_start_ + k : halo_edges[static_cast<size_t>(k - e_inner)].neid;
    }));
    DGLD_RETURN_IF_ERROR(stream<uint8_t>(*w, e_local, [&](int64_t k) { return static_cast<uint8_t>(k < e_inner); }));
    DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, e_inner, [&](int64_t k) { return in_[static_cast<size_t>(k)].eid; }));
    std::vector<HaloEdge>().swap(halo_edges);
    std::vector<EdgeRec>().swap(in_);
    halo_nodes_ = static_cast<int64_t>(halo.size());
    // Out-edges of inner nodes (CSR), by source then new edge id.
    DGLD_RETURN_IF_ERROR(unspill(out_, "out", spilled_out_));
    DGLD_RETURN_IF_ERROR(unspill(out_new_eid_, "out-eids", spilled_out_eids_));
    if (out_.size() > UINT32_MAX) {
      return resource_exhausted(fmt::format("{} out-edges in partition {}: at most 2^32-1 per partition", out_.size(), me_));
    }
    {
      std::vector<int64_t> out_indptr(static_cast<size_t>(n_inner) + 1, 0);
      for (const EdgeRec& e : out_) ++out_indptr[static_cast<size_t>(e.u - first) + 1];
      std::partial_sum(out_indptr.begin(), out_indptr.end(), out_indptr.begin());
      DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(out_indptr)));
    }
    std::vector<uint32_t> order(out_.size());
    std::iota(order.begin(), order.end(), uint32_t{0});
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return out_[a].u != out_[b].u ? out_[a].u < out_[b].u : out_new_eid_[a] < out_new_eid_[b];
    });
    DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, n_out, [&](int64_t k) { return local(out_[order[static_cast<size_t>(k)]].v); }));
    DGLD_RETURN_IF_ERROR(stream<int64_t>(*w, n_out, [&](int64_t k) { return out_new_eid_[order[static_cast<size_t>(k)]]; }));
    DGLD_RETURN_IF_ERROR(w->finish());
    DGLD_ASSIGN_OR_RETURN(auto ew, ArrayFileWriter::create(staging_ / "edge_feat.dgld", ArrayFileKind::edge_features, {}));
    return ew->finish();
  }

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
  Status commit_partition() {
    const fs::path final_dir = o_.output / fmt::format("part{}", me_);
    std::error_code ec;
    if (fs::exists(final_dir)) {
      if (!o_.overwrite) {
        return invalid_argument(fmt::format("{} exists (give --overwrite to replace it)", final_dir.string()));
      }
      fs::remove_all(final_dir, ec);
    }
    fs::rename(staging_, final_dir, ec);
    if (ec) return io_error(fmt::format("renaming {} to {}: {}", staging_.string(), final_dir.string(), ec.message()));
    staging_.clear();
    return Status::ok();
  }

  Status write_config() {
    PartitionConfig c;
    c.graph_name = o_.graph_name.empty() ? g_.graph_name : o_.graph_name;
    c.num_nodes = g_.num_nodes();
    c.num_edges = num_edges_;
    c.part_method = "ptscotch";
    c.num_parts = P_;
    c.halo_hops = 1;
    const auto& edge_counts = edge_counts_all_;
    int64_t e = 0;
    for (int p = 0; p < P_; ++p) {
      c.node_map.push_back({part_start_[static_cast<size_t>(p)], part_start_[static_cast<size_t>(p) + 1]});
      c.edge_map.push_back({e, e + edge_counts[static_cast<size_t>(p)]});
      e += edge_counts[static_cast<size_t>(p)];
      const std::string dir = fmt::format("part{}", p);
      c.parts.push_back({dir + "/node_feat.dgld", dir + "/edge_feat.dgld", dir + "/graph.dgld", ""});
    }
    const std::string name = c.graph_name + ".json";
    DGLD_RETURN_IF_ERROR(validate_part_config(c, name));
    return write_file_atomic(o_.output / name, part_config_to_json(c));
  }

 public:
  // Figures for the summary and benchmarks: gathered on every rank (collective).
  // This rank's share of the input: an int64 CSR of its edges and its rows.
  int64_t share_bytes() const { return (n_local_ + 1) * 8 + share_edges_ * 8 + feature_bytes_; }

  nlohmann::json figures() {
    const int64_t share = share_bytes();
    const auto rss = comm_.allgather<int64_t>(peak_rss_bytes());
    const auto shares = comm_.allgather<int64_t>(share);
    const auto halos = comm_.allgather<int64_t>(halo_nodes_);
    const int64_t cut = comm_.sum(cut_);
    nlohmann::json j;
    j["num_parts"] = P_;
    j["num_nodes"] = g_.num_nodes();
    j["num_edges"] = num_edges_;
    j["edge_cut"] = cut;
    j["peak_rss_bytes"] = rss;
    j["share_bytes"] = shares;
    j["halo_nodes"] = halos;
    double worst = 0;
    for (int r = 0; r < P_; ++r) {
      worst = std::max(worst, static_cast<double>(rss[static_cast<size_t>(r)]) / static_cast<double>(std::max<int64_t>(1, shares[static_cast<size_t>(r)])));
    }
    j["max_rss_over_share"] = worst;
    j["scotch_s"] = scotch_s_;
    j["scotch_edge_fraction"] = scotch_fraction_;
    j["total_s"] = total_s_;
    return j;
  }

  // Run after a failure: a rank's hidden partial directory goes.
  void clean_up() {
    std::error_code ec;
    if (!staging_.empty()) fs::remove_all(staging_, ec);
    for (const char* which : {"in", "out", "out-eids"}) fs::remove(spill_path(which), ec);
  }

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
  double scotch_s_ = 0, total_s_ = 0, scotch_fraction_ = 1.0;
  fs::path staging_;
  size_t spilled_in_ = 0, spilled_out_ = 0, spilled_out_eids_ = 0;  // records in the spill files
};

}  // namespace

int run_partition_rank(int argc, const char* const argv[]) {
  namespace po = boost::program_options;
  DistPartitionOptions o;
  LogOptions log;
  log.program = "dgl-partition-rank";
  std::string chunks, output, stats_json, fraction;
  po::options_description desc("dgl-partition-rank options (started by dgl-partition --distributed through mpirun)");
  desc.add_options()("chunks", po::value(&chunks)->required(), "the chunked graph (metadata.json), on every machine")
      ("output", po::value(&output)->required(), "where this machine's part<rank> goes; rank 0 writes the config")
      ("graph-name", po::value(&o.graph_name), "name of the partitioned graph (default: the chunked graph's)")
      ("seed", po::value(&o.seed)->default_value(o.seed), "PT-Scotch's random seed")
      ("imbalance", po::value(&o.imbalance)->default_value(o.imbalance), "PT-Scotch's load imbalance ratio")
      ("scotch-edge-fraction", po::value(&fraction)->default_value("auto"),
       "the share of undirected edges PT-Scotch sees (a symmetric hash sample); 1: all; auto: see dist_partition.h")
      ("overwrite", po::bool_switch(&o.overwrite), "replace an existing part<rank> and config")
      ("stats-json", po::value(&stats_json), "rank 0 writes the run's figures here");
  add_log_options(desc, log);
  po::variables_map vm;
  if (auto r = parse_command_line(argc, argv, "dgl-partition-rank", "--chunks DIR --output DIR [options]", desc, vm);
      r != CliOutcome::run) {
    return r == CliOutcome::exit_ok ? 0 : 2;
  }
  o.chunks = chunks;
  o.output = output;
  o.stats_json = stats_json;
  if (auto f = parse_scotch_edge_fraction(fraction); f.is_ok()) {
    o.scotch_edge_fraction = *f;
  } else {
    std::cerr << "dgl-partition-rank: " << f.status().message() << "\n";
    return 2;
  }
  // PT-Scotch's own threads call MPI, which MPI_Init (MPI_THREAD_SINGLE) does
  // not allow: with them, 4 ranks on this 2-core machine hung in
  // SCOTCH_dgraphPart; with one thread per rank they finish in 0.15 s. Parallelism comes
  // from the ranks (one per machine). An explicit setting is kept.
  setenv("SCOTCH_PTHREAD_NUMBER", "1", /*overwrite=*/0);
  // Blocks of 1 MiB and more come straight from mmap and go back to the
  // system when freed. glibc's default threshold rises to 32 MiB after the
  // first large free, and the exchange buffers below it then stay in the
  // heap: the peak RSS of a 1 M-node rank grew by a third that way.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  int argc_mpi = 0;
  char** argv_mpi = nullptr;
  MPI_Init(&argc_mpi, &argv_mpi);
  int rc = 0;
  {
    Comm comm(MPI_COMM_WORLD);
    log.program = fmt::format("dgl-partition-rank[{}]", comm.rank());
    if (!setup_logging(log).is_ok()) {
      MPI_Abort(MPI_COMM_WORLD, 2);
      return 2;
    }
    std::error_code ec;
    fs::create_directories(o.output, ec);
    RankJob job(comm, o);
    Status st = job.run();
    if (st.is_ok()) {
      nlohmann::json j = job.figures();
      if (comm.rank() == 0) {
        std::cout << fmt::format("distributed partition: {} ranks, {} nodes, {} edges, edge cut {} ({:.2f}%), "
                                 "PT-Scotch on {:.1f}% of the edges {:.2f} s, total {:.2f} s, peak rss / share of the "
                                 "input at most {:.2f}x\n",
                                 j["num_parts"].get<int>(), j["num_nodes"].get<int64_t>(), j["num_edges"].get<int64_t>(),
                                 j["edge_cut"].get<int64_t>(),
                                 100.0 * static_cast<double>(j["edge_cut"].get<int64_t>()) /
                                     static_cast<double>(std::max<int64_t>(1, j["num_edges"].get<int64_t>())),
                                 100 * j["scotch_edge_fraction"].get<double>(), j["scotch_s"].get<double>(),
                                 j["total_s"].get<double>(),
                                 j["max_rss_over_share"].get<double>());
        if (!o.stats_json.empty()) st = write_file_atomic(o.stats_json, j.dump(2) + "\n");
      }
    }
    if (!st.is_ok()) {
      job.clean_up();
      std::cerr << "dgl-partition-rank: rank " << comm.rank() << ": " << st.message() << "\n";
      rc = 1;
    }
  }
  MPI_Finalize();
  return rc;
}

}  // namespace dgld
