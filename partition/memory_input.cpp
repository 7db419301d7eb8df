#include "partition/memory_input.h"

#include <algorithm>
#include <climits>

namespace dgld {
namespace {

// Whether every edge s -> d of the row-sorted CSC has its reverse d -> s.
bool symmetric(const GraphData& g) {
  for (int64_t d = 0; d < g.num_nodes; ++d) {
    for (int64_t k = g.indptr[d]; k < g.indptr[d + 1]; ++k) {
      const int32_t s = g.src[k];
      const auto b = g.src.begin() + g.indptr[s], e = g.src.begin() + g.indptr[s + 1];
      if (!std::binary_search(b, e, static_cast<int32_t>(d))) return false;
    }
  }
  return true;
}

class MemorySource final : public GraphSource {
 public:
  explicit MemorySource(MemoryGraph m) : m_(std::move(m)) {}
  std::string describe() const override { return m_.name; }

  Status load_structure(GraphData* g) override {
    const int64_t n = m_.num_nodes;
    if (n < 1) return invalid_argument(m_.name + ": empty graph (no nodes)");
    if (n > INT32_MAX) return invalid_argument(m_.name + ": more than 2^31-1 nodes are not supported");
    if (m_.src.size() != m_.dst.size()) {
      return invalid_argument(m_.name + ": " + std::to_string(m_.src.size()) + " edge sources but " +
                              std::to_string(m_.dst.size()) + " destinations");
    }
    DGLD_RETURN_IF_ERROR(check_rows("features", m_.features.size(), n * m_.feat_dim));
    DGLD_RETURN_IF_ERROR(check_rows("labels", m_.labels.size(), n));
    DGLD_RETURN_IF_ERROR(check_rows("train_mask", m_.train_mask.size(), n));
    DGLD_RETURN_IF_ERROR(check_rows("val_mask", m_.val_mask.size(), n));
    DGLD_RETURN_IF_ERROR(check_rows("test_mask", m_.test_mask.size(), n));
    DGLD_RETURN_IF_ERROR(check_rows("balance types", m_.balance_type.size(), n));
    std::vector<int32_t> src(m_.src.size()), dst(m_.dst.size());
    for (size_t i = 0; i < src.size(); ++i) {
      if (m_.src[i] < 0 || m_.src[i] >= n || m_.dst[i] < 0 || m_.dst[i] >= n) {
        return invalid_argument(m_.name + ": edge " + std::to_string(i) + " (" + std::to_string(m_.src[i]) + " -> " +
                                std::to_string(m_.dst[i]) + ") names a node outside [0, " + std::to_string(n) + ")");
      }
      src[i] = static_cast<int32_t>(m_.src[i]);
      dst[i] = static_cast<int32_t>(m_.dst[i]);
    }
    if (!m_.ntypes.empty()) return load_typed(std::move(src), std::move(dst), g);
    build_csc(n, src, dst, g);
    if (sort_rows_check_simple(g) && symmetric(*g)) {
      g->symmetric_simple = true;
    } else {
      build_csc(n, src, dst, g);  // back to the input order within each row
    }
    g->labels.assign(m_.labels.begin(), m_.labels.end());
    g->train_mask.assign(m_.train_mask.begin(), m_.train_mask.end());
    g->val_mask.assign(m_.val_mask.begin(), m_.val_mask.end());
    g->test_mask.assign(m_.test_mask.begin(), m_.test_mask.end());
    g->balance_type.assign(m_.balance_type.begin(), m_.balance_type.end());
    g->num_balance_types = m_.num_balance_types;
    g->node_tensors = m_.node_tensors;
    g->edge_tensors = m_.edge_tensors;
    g->feat_dim = m_.features.empty() ? 0 : m_.feat_dim;
    return Status::ok();
  }

  // The typed graph's structure and types (memory_input.h); src and dst are
  // checked to lie in [0, num_nodes).
  Status load_typed(std::vector<int32_t> src, std::vector<int32_t> dst, GraphData* g) {
    const int64_t n = m_.num_nodes;
    const int nt = static_cast<int>(m_.ntypes.size()), et = static_cast<int>(m_.etypes.size());
    if (!m_.features.empty() || !m_.labels.empty() || !m_.train_mask.empty() || !m_.val_mask.empty() ||
        !m_.test_mask.empty() || !m_.balance_type.empty()) {
      return invalid_argument(m_.name + ": a typed graph's data are named tensors (no features, labels, masks or "
                              "balance types of its own)");
    }
    if (static_cast<int>(m_.ntype_offset.size()) != nt + 1 || m_.ntype_offset.front() != 0 ||
        m_.ntype_offset.back() != n || !std::is_sorted(m_.ntype_offset.begin(), m_.ntype_offset.end())) {
      return invalid_argument(m_.name + ": node type offsets must rise from 0 to the node count " +
                              std::to_string(n) + ", one more than the " + std::to_string(nt) + " node types");
    }
    if (et < 1 || m_.edge_type.size() != src.size()) {
      return invalid_argument(m_.name + ": " + std::to_string(m_.edge_type.size()) + " edge types for " +
                              std::to_string(src.size()) + " edges of " + std::to_string(et) + " edge types");
    }
    GraphTypes& ty = g->types;
    ty.ntypes = m_.ntypes;
    ty.ntype_offset = m_.ntype_offset;
    ty.etypes = m_.etypes;
    ty.feat_dim.assign(nt, 0);
    ty.type_features.assign(nt, {});
    ty.etype_first_orig.assign(et, static_cast<int64_t>(src.size()));
    std::vector<int32_t> etype(m_.edge_type.begin(), m_.edge_type.end());
    for (size_t i = 0; i < etype.size(); ++i) {
      const int32_t t = etype[i];
      if (t < 0 || t >= et || (i > 0 && t < etype[i - 1])) {
        return invalid_argument(m_.name + ": edge " + std::to_string(i) + " has edge type " + std::to_string(t) +
                                "; types must lie in [0, " + std::to_string(et) + ") and not decrease");
      }
      const CanonicalEtype& c = ty.etypes[t];
      if (ty.type_of(src[i]) != c.src_type || ty.type_of(dst[i]) != c.dst_type) {
        return invalid_argument(m_.name + ": edge " + std::to_string(i) + " (" + std::to_string(src[i]) + " -> " +
                                std::to_string(dst[i]) + ") does not join node types '" + c.src + "' and '" +
                                c.dst + "' of its edge type " + c.name());
      }
      if (i == 0 || t != etype[i - 1]) ty.etype_first_orig[t] = static_cast<int64_t>(i);
    }
    build_typed_csc(n, src, dst, etype, g);
    g->node_tensors = m_.node_tensors;
    g->edge_tensors = m_.edge_tensors;
    return Status::ok();
  }

  Status load_features(GraphData* g) override {
    g->features.assign(m_.features.begin(), m_.features.end());
    return Status::ok();
  }

 private:
  Status check_rows(const char* what, size_t have, int64_t want) const {
    if (have == 0 || static_cast<int64_t>(have) == want) return Status::ok();
    return invalid_argument(m_.name + ": " + what + " has " + std::to_string(have) + " values, expected " +
                            std::to_string(want));
  }

  MemoryGraph m_;
};

}  // namespace

std::unique_ptr<GraphSource> make_memory_source(MemoryGraph g) {
  return std::make_unique<MemorySource>(std::move(g));
}

}  // namespace dgld
