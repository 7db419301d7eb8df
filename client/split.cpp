#include "client/split.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

namespace dgld::client {

std::vector<int64_t> even_offsets(int64_t n, int64_t k) {
  std::vector<int64_t> off(static_cast<size_t>(k) + 1, 0);
  if (k <= 0) return off;
  const int64_t per = n / k, extra = n - per * k;
  for (int64_t i = 0; i < k; ++i) off[i + 1] = off[i] + per + (i < extra ? 1 : 0);
  return off;
}

std::vector<int64_t> numpy_permutation(int64_t n, uint32_t seed) {
  // RandomState.seed(int) is MT19937's init_genrand; shuffle draws j in [0, i]
  // for i = n-1 .. 1 by masked rejection (numpy's random_interval).
  std::mt19937 gen(seed);
  std::vector<int64_t> a(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(a.begin(), a.end(), 0);
  for (int64_t i = n - 1; i >= 1; --i) {
    const auto max = static_cast<uint64_t>(i);
    uint64_t mask = max;
    for (int s = 1; s <= 32; s <<= 1) mask |= mask >> s;
    uint64_t j;
    if (max <= 0xffffffffull) {
      while ((j = (gen() & mask)) > max) {
      }
    } else {
      auto next64 = [&] {
        const uint64_t hi = gen();
        return (hi << 32) | gen();
      };
      while ((j = (next64() & mask)) > max) {
      }
    }
    std::swap(a[static_cast<size_t>(i)], a[static_cast<size_t>(j)]);
  }
  return a;
}

namespace {

// The slice `piece` of `v` cut by `off`.
std::vector<int64_t> slice(const std::vector<int64_t>& v, const std::vector<int64_t>& off,
                           int piece) {
  return {v.begin() + off[piece], v.begin() + off[piece + 1]};
}

Result<std::vector<int64_t>> split(const char* what, int64_t num,
                                   const std::vector<IdRange>& ranges,
                                   const std::function<bool(int64_t)>& mask, const SplitRank& who,
                                   const SplitOptions& opt) {
  const int parts = static_cast<int>(ranges.size());
  const std::string fn = std::string(what) + "_split";
  if (parts == 0) return invalid_argument(fn + ": the partition book has no partitions");
  if (who.part_id < 0 || who.part_id >= parts) {
    return invalid_argument(fn + ": partition " + std::to_string(who.part_id) + " is not in [0, " +
                            std::to_string(parts) + ")");
  }
  if (who.num_trainers <= 0 || who.num_trainers % parts != 0) {
    return invalid_argument(fn + ": " + std::to_string(who.num_trainers) +
                            " trainers is not a positive multiple of the " + std::to_string(parts) +
                            " partitions");
  }
  if (who.rank < 0 || who.rank >= who.num_trainers) {
    return invalid_argument(fn + ": rank " + std::to_string(who.rank) + " is not in [0, " +
                            std::to_string(who.num_trainers) + ")");
  }
  if (!opt.trainer_ids.empty() && static_cast<int64_t>(opt.trainer_ids.size()) != num) {
    return invalid_argument(fn + ": " + std::to_string(opt.trainer_ids.size()) +
                            " trainer ids for " + std::to_string(num) + " " + what + "s");
  }
  const int per_part = who.num_trainers / parts;
  const int client = who.rank % per_part;
  const int p = who.part_id;

  // Trainer ids scaled down as DGL does when partitioned for more trainers than run.
  std::vector<int64_t> tid;
  if (!opt.trainer_ids.empty()) {
    tid.assign(opt.trainer_ids.begin(), opt.trainer_ids.end());
    const int64_t max_tid = tid.empty() ? 0 : *std::max_element(tid.begin(), tid.end()) + 1;
    if (max_tid > who.num_trainers) {
      if (max_tid % who.num_trainers != 0) {
        return invalid_argument(fn + ": trainer ids go up to " + std::to_string(max_tid - 1) +
                                ", which is not a multiple of " + std::to_string(who.num_trainers) +
                                " trainers");
      }
      for (auto& t : tid) t /= max_tid / who.num_trainers;
    }
    for (int64_t t : tid) {
      if (t < 0) return invalid_argument(fn + ": negative trainer id " + std::to_string(t));
    }
  }

  if (!opt.force_even) {
    std::vector<int64_t> local;
    for (int64_t id = ranges[p].start; id < ranges[p].end; ++id) {
      if (mask(id)) local.push_back(id);
    }
    if (per_part == 1) return local;
    if (!tid.empty()) {
      std::vector<int64_t> mine;
      for (int64_t id : local) {
        if (tid[id] % per_part == client) mine.push_back(id);
      }
      return mine;
    }
    const int64_t size = static_cast<int64_t>(local.size()) / per_part;
    const auto begin = local.begin() + size * client;
    const auto end = client + 1 < per_part ? begin + size : local.end();
    return std::vector<int64_t>(begin, end);
  }

  std::vector<int64_t> nz;
  for (int64_t id = 0; id < num; ++id) {
    if (mask(id)) nz.push_back(id);
  }
  const auto off = even_offsets(static_cast<int64_t>(nz.size()), parts);
  std::vector<int64_t> part = slice(nz, off, p);
  if (per_part == 1) return part;

  if (tid.empty()) {
    // _split_random_within_part: the same permutation on every trainer of p.
    const auto off2 = even_offsets(static_cast<int64_t>(part.size()), per_part);
    auto perm = numpy_permutation(static_cast<int64_t>(part.size()), static_cast<uint32_t>(p));
    std::vector<int64_t> idx(perm.begin() + off2[client], perm.begin() + off2[client + 1]);
    std::sort(idx.begin(), idx.end());
    std::vector<int64_t> out;
    out.reserve(idx.size());
    for (int64_t i : idx) out.push_back(part[static_cast<size_t>(i)]);
    return out;
  }

  // _split_by_trainer_id: ids whose trainer is on this partition, grouped by
  // trainer (stable), then the others; each list cut evenly among the trainers.
  std::vector<int64_t> local, remote;
  for (int64_t id : part) (tid[id] / per_part == p ? local : remote).push_back(id);
  std::stable_sort(local.begin(), local.end(),
                   [&](int64_t a, int64_t b) { return tid[a] % per_part < tid[b] % per_part; });
  const auto loff = even_offsets(static_cast<int64_t>(local.size()), per_part);
  const auto roff = even_offsets(static_cast<int64_t>(remote.size()), per_part);
  std::vector<int64_t> out = slice(local, loff, client);
  const auto r = slice(remote, roff, client);
  out.insert(out.end(), r.begin(), r.end());
  return out;
}

std::function<bool(int64_t)> from_span(std::span<const uint8_t> mask) {
  return [mask](int64_t id) { return mask[static_cast<size_t>(id)] != 0; };
}

Status check_length(const char* what, std::span<const uint8_t> mask, int64_t num) {
  if (static_cast<int64_t>(mask.size()) == num) return Status::ok();
  return invalid_argument(std::string(what) + "_split: the mask has " +
                          std::to_string(mask.size()) + " entries but the graph has " +
                          std::to_string(num) + " " + what + "s");
}

}  // namespace

Result<std::vector<int64_t>> node_split(const std::function<bool(int64_t)>& mask,
                                        const RangePartitionBook& book, const SplitRank& who,
                                        const SplitOptions& options) {
  return split("node", book.num_nodes(), book.node_ranges(), mask, who, options);
}

Result<std::vector<int64_t>> node_split(std::span<const uint8_t> mask,
                                        const RangePartitionBook& book, const SplitRank& who,
                                        const SplitOptions& options) {
  DGLD_RETURN_IF_ERROR(check_length("node", mask, book.num_nodes()));
  return node_split(from_span(mask), book, who, options);
}

Result<std::vector<int64_t>> edge_split(const std::function<bool(int64_t)>& mask,
                                        const RangePartitionBook& book, const SplitRank& who,
                                        const SplitOptions& options) {
  return split("edge", book.num_edges(), book.edge_ranges(), mask, who, options);
}

Result<std::vector<int64_t>> edge_split(std::span<const uint8_t> mask,
                                        const RangePartitionBook& book, const SplitRank& who,
                                        const SplitOptions& options) {
  DGLD_RETURN_IF_ERROR(check_length("edge", mask, book.num_edges()));
  return edge_split(from_span(mask), book, who, options);
}

}  // namespace dgld::client
