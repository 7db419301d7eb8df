#pragma once
// MPI collectives for the ranks of dgl-partition --distributed: agreement on
// a step's status, all-gathers and sums, and the all-to-all exchanges that
// move edge records, node ids and feature rows between ranks.

// The C API only (OpenMPI's C++ bindings warn under -Wextra).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "common/status.h"

namespace dgld::rank {

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

}  // namespace dgld::rank
