#pragma once
// Invariants every block must satisfy, shared by the block and sampler tests.

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <tuple>
#include <vector>

#include "common/sampling/block.h"

namespace dgld::test {

// `b` is the block of `dst` over `edges`: src_nodes begins with dst and has no
// repeats, the CSR is valid, and its edges are exactly the given ones, in the
// given order within each destination.
inline void check_block(const Block& b, std::span<const int64_t> dst, const SampledEdges& edges) {
  REQUIRE(b.dst_nodes == std::vector<int64_t>(dst.begin(), dst.end()));
  REQUIRE(b.num_src() >= b.num_dst());
  REQUIRE(std::vector<int64_t>(b.src_nodes.begin(), b.src_nodes.begin() + b.num_dst()) ==
          b.dst_nodes);
  REQUIRE(std::set<int64_t>(b.src_nodes.begin(), b.src_nodes.end()).size() == b.src_nodes.size());

  REQUIRE(int64_t(b.indptr.size()) == b.num_dst() + 1);
  REQUIRE(b.indptr.front() == 0);
  REQUIRE(b.indptr.back() == b.num_edges());
  REQUIRE(b.indices.size() == b.eids.size());
  for (int64_t d = 0; d < b.num_dst(); ++d) REQUIRE(b.indptr[d] <= b.indptr[d + 1]);

  // Per destination, the (src, eid) sequence must equal the input's.
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> want, got;
  for (size_t i = 0; i < edges.size(); ++i) want[edges.dst[i]].emplace_back(edges.src[i], edges.eid[i]);
  std::set<int64_t> used_src(b.dst_nodes.begin(), b.dst_nodes.end());
  for (int64_t d = 0; d < b.num_dst(); ++d) {
    for (int64_t j = b.indptr[d]; j < b.indptr[d + 1]; ++j) {
      REQUIRE(b.indices[j] >= 0);
      REQUIRE(b.indices[j] < b.num_src());
      const int64_t s = b.src_nodes[b.indices[j]];
      got[b.dst_nodes[d]].emplace_back(s, b.eids[j]);
      used_src.insert(s);
    }
  }
  REQUIRE(got == want);
  REQUIRE(used_src.size() == b.src_nodes.size());  // no src node without an edge
}

}  // namespace dgld::test
