#include "partition/verify.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "common/part_config.h"
#include "common/partition/link_split.h"
#include "common/partition/partition.h"
#include "common/partition/partition_book.h"

namespace dgld {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

class Verifier {
 public:
  Verifier(const PartitionConfig& c, const RangePartitionBook& book,
           const std::vector<std::unique_ptr<MappedPartition>>& parts)
      : c_(c), book_(book), parts_(parts) {}

  Status run(VerifyReport* report);

 private:
  static std::string where(const MappedPartition& p) { return "partition " + S(p.part_id()); }

  Status check_nodes(const MappedPartition& p, std::vector<uint8_t>* seen);

  // Heterogeneous graphs: every local edge's type joins its ends' node types,
  // a halo edge has its owner's type, and the types' edge counts match the config.
  Status check_edge_types(const MappedPartition& p);

  // Finds the inner edge `eid` at its owner: (global dst, global src).
  Status lookup_edge(int64_t eid, int64_t* dst, int64_t* src) const;

  Status check_in_edges(const MappedPartition& p, std::vector<uint8_t>* seen, std::vector<int32_t>* out_degree);

  Status check_out_edges(const MappedPartition& p, const std::vector<int32_t>& out_degree, std::vector<uint8_t>* seen);

  Status check_node_data(const MappedPartition& p);

  // ---------------------------------------------------------------- link split

  const MappedPartition& owner_of(int64_t gid) const { return *parts_[book_.node_partition(gid)]; }
  int64_t orig_node(int64_t gid) const {
    const MappedPartition& o = owner_of(gid);
    return o.orig_node_ids()[gid - c_.node_map[o.part_id()].start];
  }
  // Whether s -> d is an edge of the partitioned graph (looked up at d's owner).
  bool has_edge(int64_t s, int64_t d) const;

  // The train mask: one 0/1 value per edge, num_train marked; after a random split
  // of a symmetric graph, exactly the direction with the smaller original source.
  Status check_train_mask();

  Status check_link_split(VerifyReport* report);

  const PartitionConfig& c_;
  const RangePartitionBook& book_;
  const std::vector<std::unique_ptr<MappedPartition>>& parts_;
  std::vector<int64_t> type_offset_;  // heterogeneous: first original homogeneous id of each type
  std::vector<int64_t> etype_seen_;   // heterogeneous: inner edges of each type
  std::vector<int64_t> orig_eids_;  // with a link split: every inner edge's orig id
};

Status Verifier::run(VerifyReport* report) {
  std::vector<uint8_t> seen_node(c_.num_nodes, 0), seen_edge(c_.num_edges, 0);
  std::vector<int32_t> out_degree(c_.num_nodes, 0);
  if (c_.types.present()) {
    type_offset_.assign(1, 0);
    for (int64_t n : c_.types.ntype_count) type_offset_.push_back(type_offset_.back() + n);
    etype_seen_.assign(static_cast<size_t>(c_.types.num_etypes()), 0);
  }
  for (const auto& p : parts_) {
    DGLD_RETURN_IF_ERROR(check_nodes(*p, &seen_node));
    if (c_.types.present()) DGLD_RETURN_IF_ERROR(check_edge_types(*p));
    DGLD_RETURN_IF_ERROR(check_in_edges(*p, &seen_edge, &out_degree));
    DGLD_RETURN_IF_ERROR(check_node_data(*p));
    report->halo_nodes += p->num_local_nodes() - p->num_inner_nodes();
    report->halo_edges += p->num_local_edges() - p->num_inner_edges();
  }
  for (int64_t v = 0; v < c_.num_nodes; ++v) {
    if (!seen_node[v]) return corruption("orig node ids are not a permutation: " + S(v) + " is missing");
  }
  if (!c_.link_split.present) {
    for (int64_t e = 0; e < c_.num_edges; ++e) {
      if (!seen_edge[e]) return corruption("orig edge ids are not a permutation: " + S(e) + " is missing");
    }
  } else {
    // Held-out edges left the graph, the rest kept their input ids: distinct ids.
    std::sort(orig_eids_.begin(), orig_eids_.end());
    for (size_t i = 0; i < orig_eids_.size(); ++i) {
      if (orig_eids_[i] < 0 || (i > 0 && orig_eids_[i] == orig_eids_[i - 1])) {
        return corruption("orig edge id " + S(orig_eids_[i]) + " is negative or repeated");
      }
    }
    std::vector<int64_t>().swap(orig_eids_);
  }
  for (size_t e = 0; e < etype_seen_.size(); ++e) {
    if (etype_seen_[e] != c_.types.etype_count[e]) {
      return corruption("edge type '" + c_.types.etypes[e] + "' has " + S(etype_seen_[e]) +
                        " edges in the partitions, the config says " + S(c_.types.etype_count[e]));
    }
  }
  std::vector<uint8_t> seen_out(c_.num_edges, 0);
  for (const auto& p : parts_) DGLD_RETURN_IF_ERROR(check_out_edges(*p, out_degree, &seen_out));
  if (c_.link_split.present) DGLD_RETURN_IF_ERROR(check_link_split(report));
  report->num_parts = c_.num_parts;
  report->num_nodes = c_.num_nodes;
  report->num_edges = c_.num_edges;
  return Status::ok();
}

Status Verifier::check_nodes(const MappedPartition& p, std::vector<uint8_t>* seen) {
  const std::string w = where(p);
  const IdRange r = c_.node_map[p.part_id()];
  auto gid = p.node_global_ids();
  if (p.halo_hops() != c_.halo_hops) {
    return corruption(w + ": halo_hops " + S(p.halo_hops()) + " differs from the config's " + S(c_.halo_hops));
  }
  for (int64_t i = 0; i < p.num_local_nodes(); ++i) {
    const bool inner = i < p.num_inner_nodes();
    if (inner && gid[i] != r.start + i) {
      return corruption(w + ": inner node " + S(i) + " has global id " + S(gid[i]) + ", expected " + S(r.start + i));
    }
    if (!inner) {
      if (gid[i] < 0 || gid[i] >= c_.num_nodes || (gid[i] >= r.start && gid[i] < r.end)) {
        return corruption(w + ": halo node " + S(i) + " has global id " + S(gid[i]) + ", outside [0, num_nodes) or owned");
      }
      if (i > p.num_inner_nodes() && gid[i] <= gid[i - 1]) {
        return corruption(w + ": halo nodes are not sorted unique at local id " + S(i));
      }
    }
    if (p.inner_node()[i] != (inner ? 1 : 0)) return corruption(w + ": inner_node flag of local node " + S(i) + " is wrong");
    if (p.node_owner()[i] != book_.node_partition(gid[i])) {
      return corruption(w + ": local node " + S(i) + " (global " + S(gid[i]) + ") has owner " + S(p.node_owner()[i]) +
                        ", the partition book says " + S(book_.node_partition(gid[i])));
    }
  }
  const GraphTypeInfo& ty = c_.types;
  for (int64_t i = 0; i < p.num_inner_nodes(); ++i) {
    int64_t orig = p.orig_node_ids()[i];
    if (ty.present()) {
      // Per-type original ids: each type's ids over all partitions are a
      // permutation of [0, count); the input's homogeneous id adds the
      // counts of the types before it.
      const int t = book_.node_type(gid[i]);
      if (t < 0) return corruption(w + ": inner node " + S(gid[i]) + " has no node type in node_map");
      if (orig < 0 || orig >= ty.ntype_count[t]) {
        return corruption(w + ": node " + S(gid[i]) + " of type '" + ty.ntypes[t] + "' has original id " + S(orig) +
                          ", outside [0, " + S(ty.ntype_count[t]) + ")");
      }
      orig += type_offset_[t];
    }
    if (orig < 0 || orig >= c_.num_nodes || (*seen)[orig]) {
      return corruption(w + ": orig node id " + S(orig) + " is out of range or repeated (not a permutation)");
    }
    (*seen)[orig] = 1;
  }
  return Status::ok();
}

Status Verifier::check_edge_types(const MappedPartition& p) {
  const GraphTypeInfo& ty = c_.types;
  const std::string w = where(p);
  const auto& in = p.in_edges();
  const auto et = p.edge_types();
  auto gid = p.node_global_ids();
  for (int64_t r = 0; r < p.num_local_nodes(); ++r) {
    const int dt = book_.node_type(gid[r]);
    for (int64_t k = in.indptr[r]; k < in.indptr[r + 1]; ++k) {
      const int32_t e = et[k];
      const int st = book_.node_type(gid[in.indices[k]]);
      if (ty.etype_src[e] != st || ty.etype_dst[e] != dt) {
        return corruption(w + ": edge " + S(in.eids[k]) + " has type '" + ty.etypes[e] + "' but joins a '" +
                          ty.ntypes[st] + "' node to a '" + ty.ntypes[dt] + "' node");
      }
      if (r < p.num_inner_nodes()) {
        ++etype_seen_[e];
      } else {
        const int q = book_.edge_partition(in.eids[k]);
        const int64_t j = parts_[q]->inner_edge_slot(in.eids[k] - c_.edge_map[q].start);
        if (parts_[q]->edge_types()[j] != e) {
          return corruption(w + ": halo edge " + S(in.eids[k]) + " has type " + S(e) + ", its owner says " +
                            S(parts_[q]->edge_types()[j]));
        }
      }
    }
  }
  return Status::ok();
}

Status Verifier::lookup_edge(int64_t eid, int64_t* dst, int64_t* src) const {
  const int q = book_.edge_partition(eid);
  if (q < 0) return corruption("edge id " + S(eid) + " is outside [0, num_edges)");
  const MappedPartition& o = *parts_[q];
  const int64_t j = o.inner_edge_slot(eid - c_.edge_map[q].start);
  const auto& in = o.in_edges();
  const auto row = std::upper_bound(in.indptr.begin(), in.indptr.begin() + o.num_inner_nodes() + 1, j) -
                   in.indptr.begin() - 1;
  *dst = o.node_global_ids()[row];
  *src = o.node_global_ids()[in.indices[j]];
  return Status::ok();
}

Status Verifier::check_in_edges(const MappedPartition& p, std::vector<uint8_t>* seen, std::vector<int32_t>* out_degree) {
  const std::string w = where(p);
  const IdRange er = c_.edge_map[p.part_id()];
  const auto& in = p.in_edges();
  auto gid = p.node_global_ids();
  std::vector<uint8_t> used(p.num_local_nodes(), 0);
  int64_t halo_rows_inner_src = 0;
  for (int64_t r = 0; r < p.num_local_nodes(); ++r) {
    const bool inner_row = r < p.num_inner_nodes();
    if (!inner_row && in.degree(r) > 0) used[r] = 1;
    for (int64_t k = in.indptr[r]; k < in.indptr[r + 1]; ++k) {
      const int64_t s = in.indices[k], e = in.eids[k];
      used[s] = 1;
      if (p.inner_edge()[k] != (inner_row ? 1 : 0)) return corruption(w + ": inner_edge flag of local edge " + S(k) + " is wrong");
      if (inner_row) {
        // Opening the partition checked each lies in the range (its type's) once.
        if (e < er.start || e >= er.end || p.inner_edge_slot(e - er.start) != k) {
          return corruption(w + ": inner edge " + S(k) + " has global id " + S(e) + ", expected " +
                            (c_.types.present() ? "its type's range, each id once" : "the partition's range, each id once"));
        }
        ++(*out_degree)[gid[s]];
        continue;
      }
      if (s < p.num_inner_nodes()) ++halo_rows_inner_src;
      if (book_.edge_partition(e) != p.node_owner()[r]) {
        return corruption(w + ": halo edge " + S(k) + " (global " + S(e) + ") is not owned by its destination's partition " +
                          S(p.node_owner()[r]));
      }
      int64_t dst = 0, src = 0;
      DGLD_RETURN_IF_ERROR(lookup_edge(e, &dst, &src));
      if (dst != gid[r] || src != gid[s]) {
        return corruption(w + ": halo edge " + S(k) + " (global " + S(e) + ") is " + S(gid[s]) + "->" + S(gid[r]) +
                          " but its owner has " + S(src) + "->" + S(dst));
      }
      const MappedPartition& owner = *parts_[p.node_owner()[r]];
      const int64_t owner_local = gid[r] - c_.node_map[owner.part_id()].start;
      if (in.degree(r) > owner.in_edges().degree(owner_local)) {
        return corruption(w + ": halo node " + S(gid[r]) + " has more in-edges than at its owner");
      }
    }
  }
  // Out-edges of inner nodes to halo nodes also appear in the halo rows.
  int64_t out_to_halo = 0;
  for (int64_t dst : p.out_edges().indices) {
    used[dst] = 1;
    out_to_halo += dst >= p.num_inner_nodes();
  }
  if (out_to_halo != halo_rows_inner_src) {
    return corruption(w + ": " + S(out_to_halo) + " out-edges of inner nodes go to halo nodes, but halo rows hold " +
                      S(halo_rows_inner_src) + " in-edges from inner nodes");
  }
  for (int64_t h = p.num_inner_nodes(); h < p.num_local_nodes(); ++h) {
    if (!used[h]) return corruption(w + ": halo node " + S(gid[h]) + " is not an end of any local edge");
  }
  if (c_.link_split.present) {
    orig_eids_.insert(orig_eids_.end(), p.orig_edge_ids().begin(), p.orig_edge_ids().end());
    return Status::ok();
  }
  for (int64_t orig : p.orig_edge_ids()) {
    if (orig < 0 || orig >= c_.num_edges || (*seen)[orig]) {
      return corruption(w + ": orig edge id " + S(orig) + " is out of range or repeated (not a permutation)");
    }
    (*seen)[orig] = 1;
  }
  return Status::ok();
}

Status Verifier::check_out_edges(const MappedPartition& p, const std::vector<int32_t>& out_degree, std::vector<uint8_t>* seen) {
  const std::string w = where(p);
  const auto& out = p.out_edges();
  auto gid = p.node_global_ids();
  for (int64_t v = 0; v < p.num_inner_nodes(); ++v) {
    if (out.degree(v) != out_degree[gid[v]]) {
      return corruption(w + ": inner node " + S(gid[v]) + " has " + S(out.degree(v)) + " out-edges, the graph has " +
                        S(out_degree[gid[v]]));
    }
    for (int64_t k = out.indptr[v]; k < out.indptr[v + 1]; ++k) {
      const int64_t e = out.eids[k];
      if ((*seen)[e]) return corruption(w + ": out-edge " + S(e) + " appears twice");
      (*seen)[e] = 1;
      int64_t dst = 0, src = 0;
      DGLD_RETURN_IF_ERROR(lookup_edge(e, &dst, &src));
      if (src != gid[v] || dst != gid[out.indices[k]]) {
        return corruption(w + ": out-edge " + S(e) + " is " + S(gid[v]) + "->" + S(gid[out.indices[k]]) +
                          " but its owner has " + S(src) + "->" + S(dst));
      }
    }
  }
  return Status::ok();
}

Status Verifier::check_node_data(const MappedPartition& p) {
  const std::string w = where(p);
  const int64_t T = c_.num_trainers_per_machine;
  for (int64_t t : p.trainer_ids()) {
    if (t < p.part_id() * T || t >= (p.part_id() + 1) * T) {
      return corruption(w + ": trainer id " + S(t) + " does not belong to machine " + S(p.part_id()));
    }
  }
  const std::string prefix = c_.types.target_ntype.empty() ? c_.ntype : c_.types.target_ntype;
  for (const char* m : {"train_mask", "val_mask", "test_mask"}) {
    const TensorView* t = p.node_tensor(prefix + "/" + m);
    if (t == nullptr) continue;
    for (uint8_t x : t->as<uint8_t>()) {
      if (x > 1) return corruption(w + ": " + t->name + " holds a value other than 0/1");
    }
  }
  return Status::ok();
}

bool Verifier::has_edge(int64_t s, int64_t d) const {
  const MappedPartition& o = owner_of(d);
  const auto& in = o.in_edges();
  const int64_t r = d - c_.node_map[o.part_id()].start;
  for (int64_t k = in.indptr[r]; k < in.indptr[r + 1]; ++k) {
    if (o.node_global_ids()[in.indices[k]] == s) return true;
  }
  return false;
}

Status Verifier::check_train_mask() {
  const LinkSplitInfo& l = c_.link_split;
  const std::string name = link_train_mask_name(c_);
  const bool one_per_pair = l.source == "random" && l.symmetric;
  int64_t marked = 0;
  for (const auto& pp : parts_) {
    const MappedPartition& p = *pp;
    const std::string w = where(p);
    const TensorView* t = p.edge_tensor(name);
    if (t == nullptr) return corruption(w + ": edge tensor '" + name + "' is missing (the config has a link split)");
    if (t->dtype != DType::uint8 || t->shape != std::vector<int64_t>{p.num_inner_edges()}) {
      return corruption(w + ": edge tensor '" + name + "' must be uint8 [" + S(p.num_inner_edges()) +
                        "], one value per inner edge");
    }
    const auto mask = t->as<uint8_t>();
    const auto& in = p.in_edges();
    auto gid = p.node_global_ids();
    for (int64_t r = 0; r < p.num_inner_nodes(); ++r) {
      for (int64_t k = in.indptr[r]; k < in.indptr[r + 1]; ++k) {
        if (mask[k] > 1) return corruption(w + ": " + name + " holds a value other than 0/1 at edge " + S(k));
        marked += mask[k];
        if (!one_per_pair) continue;
        const int64_t os = orig_node(gid[in.indices[k]]), od = p.orig_node_ids()[r];
        if ((mask[k] == 1) != (os < od)) {
          return corruption(w + ": " + name + " of edge " + S(in.eids[k]) + " (original " + S(os) + " -> " + S(od) +
                            ") is " + S(mask[k]) + "; a random split of a symmetric graph marks each undirected "
                            "edge once, as its direction from the smaller original id");
        }
      }
    }
  }
  if (marked != l.num_train) {
    return corruption(name + " marks " + S(marked) + " edges, the config's num_train is " + S(l.num_train));
  }
  return Status::ok();
}

Status Verifier::check_link_split(VerifyReport* report) {
  const LinkSplitInfo& l = c_.link_split;
  DGLD_RETURN_IF_ERROR(check_train_mask());
  struct Held {
    int64_t u, v;
    const int64_t* neg;
    int part;
    const char* set;
    int64_t index;
  };
  std::vector<LinkSplitPart> files;
  files.reserve(parts_.size());
  std::vector<Held> held;
  std::vector<std::pair<int64_t, int64_t>> partners;  // (a, b): a held-out edge a -> b (and b -> a if symmetric)
  int64_t totals[2] = {0, 0};
  for (const auto& pp : parts_) {
    const MappedPartition& p = *pp;
    const std::string w = where(p);
    DGLD_ASSIGN_OR_RETURN(LinkSplitPart f, read_link_split(c_, p.part_id()));
    files.push_back(std::move(f));
    const LinkEdges* sets[2] = {&files.back().valid, &files.back().test};
    for (int s = 0; s < 2; ++s) {
      const LinkEdges& e = *sets[s];
      const char* set = link_arrays::kSets[s];
      totals[s] += static_cast<int64_t>(e.src.size());
      for (size_t i = 0; i < e.src.size(); ++i) {
        const int64_t u = e.src[i], v = e.dst[i];
        const std::string what = w + ": " + set + " edge " + S(static_cast<int64_t>(i)) + " (" + S(u) + " -> " +
                                 S(v) + ")";
        if (orig_node(u) != e.orig_src[i] || orig_node(v) != e.orig_dst[i]) {
          return corruption(what + ": original ids " + S(e.orig_src[i]) + " -> " + S(e.orig_dst[i]) +
                            " do not match the nodes' original ids " + S(orig_node(u)) + " -> " + S(orig_node(v)));
        }
        if (has_edge(u, v)) return corruption(what + " is held out but still an edge of the graph");
        if (l.symmetric && has_edge(v, u)) {
          return corruption(what + " is held out but its reverse is still an edge of the (symmetric) graph");
        }
        held.push_back({u, v, e.neg_dst.data() + i * static_cast<size_t>(e.num_negatives), p.part_id(), set,
                        static_cast<int64_t>(i)});
        partners.emplace_back(u, v);
        if (l.symmetric) partners.emplace_back(v, u);
      }
    }
  }
  if (totals[0] != l.num_valid || totals[1] != l.num_test) {
    return corruption("the link split files hold " + S(totals[0]) + " valid and " + S(totals[1]) +
                      " test edges, the config says " + S(l.num_valid) + " and " + S(l.num_test));
  }
  // Negatives: never the source, an edge of the graph (either direction on a
  // symmetric graph) or a held-out edge. Checked per source node.
  std::sort(partners.begin(), partners.end());
  std::sort(held.begin(), held.end(), [](const Held& a, const Held& b) { return a.u < b.u; });
  const int64_t k = l.num_negatives;
  std::vector<int64_t> forbidden;
  for (size_t b = 0; b < held.size();) {
    const int64_t u = held[b].u;
    size_t e = b;
    while (e < held.size() && held[e].u == u) ++e;
    forbidden.assign(1, u);
    const MappedPartition& o = owner_of(u);
    const int64_t r = u - c_.node_map[o.part_id()].start;
    for (int64_t x = o.out_edges().indptr[r]; x < o.out_edges().indptr[r + 1]; ++x) {
      forbidden.push_back(o.node_global_ids()[o.out_edges().indices[x]]);
    }
    if (l.symmetric) {
      for (int64_t x = o.in_edges().indptr[r]; x < o.in_edges().indptr[r + 1]; ++x) {
        forbidden.push_back(o.node_global_ids()[o.in_edges().indices[x]]);
      }
    }
    for (auto it = std::lower_bound(partners.begin(), partners.end(), std::make_pair(u, int64_t{-1}));
         it != partners.end() && it->first == u; ++it) {
      forbidden.push_back(it->second);
    }
    std::sort(forbidden.begin(), forbidden.end());
    for (size_t i = b; i < e; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t x = held[i].neg[j];
        if (std::binary_search(forbidden.begin(), forbidden.end(), x)) {
          return corruption("partition " + S(held[i].part) + ": " + held[i].set + " edge " + S(held[i].index) +
                            " (" + S(u) + " -> " + S(held[i].v) + "): negative " + S(x) +
                            (x == u ? " is the edge's own source"
                                    : " is a positive (an edge of the graph or a held-out edge)"));
        }
      }
    }
    b = e;
  }
  report->link_split = true;
  report->link_valid = totals[0];
  report->link_test = totals[1];
  report->link_train = l.num_train;
  return Status::ok();
}

}  // namespace

Status verify_partitions(const std::filesystem::path& config_json, VerifyReport* report) {
  DGLD_ASSIGN_OR_RETURN(PartitionConfig c, load_part_config(config_json));
  DGLD_ASSIGN_OR_RETURN(RangePartitionBook book, RangePartitionBook::from_config(c));
  std::vector<std::unique_ptr<MappedPartition>> parts;
  for (int i = 0; i < c.num_parts; ++i) {
    DGLD_ASSIGN_OR_RETURN(auto p, open_partition(c, i, /*verify_checksums=*/true));
    parts.push_back(std::move(p));
  }
  *report = {};
  Status st = Verifier(c, book, parts).run(report);
  return st.is_ok() ? st : st.with_context(config_json.string());
}

}  // namespace dgld
