#include "common/partition/partition.h"

#include <algorithm>

namespace dgld {
namespace {

std::vector<TensorView> tensors_of(const MappedArrayFile& f) {
  std::vector<TensorView> out;
  for (const auto& e : f.arrays()) out.push_back({e.name, e.dtype, e.shape, e.data, e.length});
  return out;
}

const TensorView* find_tensor(const std::vector<TensorView>& ts, std::string_view name) {
  for (const auto& t : ts) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// indptr starts at 0, never decreases, ends at nnz.
Status check_indptr(std::span<const int64_t> indptr, int64_t nnz, const std::string& where) {
  if (indptr.empty() || indptr[0] != 0 || indptr.back() != nnz) {
    return corruption(where + ": indptr must start at 0 and end at " + std::to_string(nnz));
  }
  for (size_t i = 1; i < indptr.size(); ++i) {
    if (indptr[i] < indptr[i - 1]) return corruption(where + ": indptr decreases at row " + std::to_string(i - 1));
  }
  return Status::ok();
}

Status check_indices(std::span<const int64_t> indices, int64_t bound, const std::string& where) {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= bound) {
      return corruption(where + ": index " + std::to_string(indices[i]) + " at position " + std::to_string(i) +
                        " is outside [0, " + std::to_string(bound) + ")");
    }
  }
  return Status::ok();
}

}  // namespace

int64_t TensorView::row_size() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

const TensorView* MappedPartition::node_tensor(std::string_view name) const {
  return find_tensor(node_tensors_, name);
}
const TensorView* MappedPartition::edge_tensor(std::string_view name) const {
  return find_tensor(edge_tensors_, name);
}

void MappedPartition::release_pages(const void* p, size_t n) const {
  for (const auto* f : {graph_.get(), node_feats_.get(), edge_feats_.get()}) {
    if (f != nullptr && f->release_pages(p, n)) return;
  }
}

Result<std::unique_ptr<MappedPartition>> open_partition(const PartitionConfig& config, int part_id,
                                                        bool verify_checksums) {
  namespace pa = part_arrays;
  if (part_id < 0 || part_id >= config.num_parts || static_cast<int>(config.parts.size()) != config.num_parts) {
    return invalid_argument("partition " + std::to_string(part_id) + " does not exist (num_parts=" +
                            std::to_string(config.num_parts) + ")");
  }
  const PartitionFiles& files = config.parts[part_id];
  std::unique_ptr<MappedPartition> p(new MappedPartition());
  DGLD_ASSIGN_OR_RETURN(p->graph_, MappedArrayFile::open(config.resolve(files.part_graph),
                                                         ArrayFileKind::partition_graph, verify_checksums));
  DGLD_ASSIGN_OR_RETURN(p->node_feats_, MappedArrayFile::open(config.resolve(files.node_feats),
                                                              ArrayFileKind::node_features, verify_checksums));
  DGLD_ASSIGN_OR_RETURN(p->edge_feats_, MappedArrayFile::open(config.resolve(files.edge_feats),
                                                              ArrayFileKind::edge_features, verify_checksums));
  const MappedArrayFile& g = *p->graph_;
  const std::string where = g.path().string();

  DGLD_ASSIGN_OR_RETURN(auto meta, g.get<int64_t>(pa::kMeta, pa::kMetaSize));
  const int64_t n_inner = meta[pa::kMetaNumInnerNodes], n_local = meta[pa::kMetaNumLocalNodes];
  const int64_t e_inner = meta[pa::kMetaNumInnerEdges], e_local = meta[pa::kMetaNumLocalEdges];
  const int64_t e_out = meta[pa::kMetaNumOutEdges];
  if (meta[pa::kMetaPartId] != part_id || meta[pa::kMetaNumParts] != config.num_parts) {
    return corruption(where + ": file is partition " + std::to_string(meta[pa::kMetaPartId]) + " of " +
                      std::to_string(meta[pa::kMetaNumParts]) + ", expected " + std::to_string(part_id) + " of " +
                      std::to_string(config.num_parts));
  }
  if (n_inner != config.node_map[part_id].size() || e_inner != config.edge_map[part_id].size()) {
    return corruption(where + ": inner node/edge counts " + std::to_string(n_inner) + "/" + std::to_string(e_inner) +
                      " do not match the config's node_map/edge_map ranges");
  }
  // Bounded so that n_local + 1 and the like cannot overflow (arrays of
  // these sizes must fit in the file anyway).
  constexpr int64_t kMaxCount = int64_t{1} << 56;
  if (n_local < n_inner || e_local < e_inner || e_out < 0 || n_local > kMaxCount || e_local > kMaxCount ||
      e_out > kMaxCount) {
    return corruption(where + ": meta counts are inconsistent");
  }
  p->part_id_ = part_id;
  p->num_parts_ = config.num_parts;
  p->halo_hops_ = static_cast<int>(meta[pa::kMetaHaloHops]);
  p->num_inner_nodes_ = n_inner;
  p->num_inner_edges_ = e_inner;
  DGLD_ASSIGN_OR_RETURN(p->node_global_id_, g.get<int64_t>(pa::kNodeGlobalId, n_local));
  DGLD_ASSIGN_OR_RETURN(p->node_inner_, g.get<uint8_t>(pa::kNodeInner, n_local));
  DGLD_ASSIGN_OR_RETURN(p->node_owner_, g.get<int32_t>(pa::kNodeOwner, n_local));
  DGLD_ASSIGN_OR_RETURN(p->orig_node_id_, g.get<int64_t>(pa::kNodeOrigId, n_inner));
  DGLD_ASSIGN_OR_RETURN(p->in_.indptr, g.get<int64_t>(pa::kInIndptr, n_local + 1));
  DGLD_ASSIGN_OR_RETURN(p->in_.indices, g.get<int64_t>(pa::kInIndices, e_local));
  DGLD_ASSIGN_OR_RETURN(p->in_.eids, g.get<int64_t>(pa::kInEids, e_local));
  DGLD_ASSIGN_OR_RETURN(p->edge_inner_, g.get<uint8_t>(pa::kEdgeInner, e_local));
  DGLD_ASSIGN_OR_RETURN(p->orig_edge_id_, g.get<int64_t>(pa::kEdgeOrigId, e_inner));
  DGLD_ASSIGN_OR_RETURN(p->out_.indptr, g.get<int64_t>(pa::kOutIndptr, n_inner + 1));
  DGLD_ASSIGN_OR_RETURN(p->out_.indices, g.get<int64_t>(pa::kOutIndices, e_out));
  DGLD_ASSIGN_OR_RETURN(p->out_.eids, g.get<int64_t>(pa::kOutEids, e_out));
  DGLD_RETURN_IF_ERROR(check_indptr(p->in_.indptr, e_local, where + ": " + pa::kInIndptr));
  DGLD_RETURN_IF_ERROR(check_indptr(p->out_.indptr, e_out, where + ": " + pa::kOutIndptr));
  if (p->in_.indptr[n_inner] != e_inner) {
    return corruption(where + ": the in-edges of inner nodes number " + std::to_string(p->in_.indptr[n_inner]) +
                      ", expected " + std::to_string(e_inner));
  }
  if (verify_checksums) {
    DGLD_RETURN_IF_ERROR(check_indices(p->in_.indices, n_local, where + ": " + pa::kInIndices));
    DGLD_RETURN_IF_ERROR(check_indices(p->out_.indices, n_local, where + ": " + pa::kOutIndices));
    DGLD_RETURN_IF_ERROR(check_indices(p->in_.eids, config.num_edges, where + ": " + pa::kInEids));
    DGLD_RETURN_IF_ERROR(check_indices(p->out_.eids, config.num_edges, where + ": " + pa::kOutEids));
  }

  p->node_tensors_ = tensors_of(*p->node_feats_);
  p->edge_tensors_ = tensors_of(*p->edge_feats_);
  for (const auto& t : p->node_tensors_) {
    const int64_t rows = node_tensor_range(config, part_id, t.name).size();
    if (t.num_rows() != rows) {
      const int type = node_tensor_type(config, t.name);
      return corruption(p->node_feats_->path().string() + ": tensor '" + t.name + "' has " +
                        std::to_string(t.num_rows()) + " rows, expected " + std::to_string(rows) +
                        (type < 0 ? " inner nodes" : " inner nodes of type '" + config.types.ntypes[type] + "'"));
    }
  }
  if (config.types.present()) {
    DGLD_ASSIGN_OR_RETURN(p->edge_type_, g.get<int32_t>(pa::kInEtype, e_local));
    const int32_t num_etypes = config.types.num_etypes();
    for (int64_t r = 0; r < n_local; ++r) {
      for (int64_t k = p->in_.indptr[r]; k < p->in_.indptr[r + 1]; ++k) {
        const int32_t e = p->edge_type_[k];
        if (e < 0 || e >= num_etypes || (k > p->in_.indptr[r] && e < p->edge_type_[k - 1])) {
          return corruption(where + ": " + pa::kInEtype + "[" + std::to_string(k) + "] = " + std::to_string(e) +
                            (e < 0 || e >= num_etypes ? " is not an edge type id (" + std::to_string(num_etypes) +
                                                            " types)"
                                                      : " is out of order (each node's in-edges are sorted by type)"));
        }
      }
    }
  }
  DGLD_RETURN_IF_ERROR(p->index_edges(config, where));
  for (const auto& t : p->edge_tensors_) {
    const int64_t rows = edge_tensor_range(config, part_id, t.name).size();
    if (t.num_rows() != rows) {
      const int type = edge_tensor_type(config, t.name);
      return corruption(p->edge_feats_->path().string() + ": tensor '" + t.name + "' has " +
                        std::to_string(t.num_rows()) + " rows, expected " + std::to_string(rows) +
                        (type < 0 ? " inner edges" : " inner edges of type '" + config.types.etypes[type] + "'"));
    }
  }
  const std::string trainer_name = config.ntype + "/trainer_id";
  if (const TensorView* t = p->node_tensor(trainer_name)) {
    p->trainer_id_ = t->as<int64_t>();
    if (p->trainer_id_.size() != static_cast<size_t>(n_inner)) {
      return corruption(p->node_feats_->path().string() + ": '" + trainer_name + "' must be int64 [" +
                        std::to_string(n_inner) + "]");
    }
  }
  return p;
}

std::pair<int64_t, int64_t> MappedPartition::inner_edge_ends(int64_t local_eid) const {
  const int64_t pos = inner_edge_slot(local_eid);
  const auto rows = in_.indptr.first(static_cast<size_t>(num_inner_nodes_ + 1));
  const int64_t row = std::upper_bound(rows.begin(), rows.end(), pos) - rows.begin() - 1;
  return {node_global_id_[in_.indices[pos]], node_global_id_[row]};
}

Result<std::span<const float>> MappedPartition::edge_weights(const std::string& name, DType dtype, const void* data,
                                                             int64_t rows, size_t row_bytes,
                                                             std::vector<float>* scratch) const {
  if (rows != num_inner_edges_ || dtype_size(dtype) == 0 || row_bytes != dtype_size(dtype)) {
    return invalid_argument("sample_neighbors prob '" + name + "' must be a numeric edge tensor with one value per "
                            "edge (of every type): " + std::to_string(num_inner_edges_) + " here");
  }
  if (dtype == DType::float32 && edge_slot_.empty()) {
    return std::span<const float>(static_cast<const float*>(data), static_cast<size_t>(rows));
  }
  scratch->resize(static_cast<size_t>(rows));
  auto fill = [&](const auto* v) {
    for (int64_t e = 0; e < rows; ++e) {
      (*scratch)[static_cast<size_t>(inner_edge_slot(e))] = static_cast<float>(v[e]);
    }
  };
  switch (dtype) {
    case DType::int8: fill(static_cast<const int8_t*>(data)); break;
    case DType::uint8: fill(static_cast<const uint8_t*>(data)); break;
    case DType::int32: fill(static_cast<const int32_t*>(data)); break;
    case DType::int64: fill(static_cast<const int64_t*>(data)); break;
    case DType::float32: fill(static_cast<const float*>(data)); break;
    case DType::float64: fill(static_cast<const double*>(data)); break;
  }
  return std::span<const float>(*scratch);
}

Status MappedPartition::index_edges(const PartitionConfig& config, const std::string& where) {
  const IdRange er = config.edge_map[part_id_];
  const bool typed = config.types.present();
  if (!typed) {
    // The usual homogeneous layout numbers inner edges in CSC order: no index.
    bool in_order = true;
    for (int64_t k = 0; k < num_inner_edges_ && in_order; ++k) in_order = in_.eids[k] == er.start + k;
    if (in_order) return Status::ok();
  }
  edge_slot_.assign(static_cast<size_t>(num_inner_edges_), -1);
  for (int64_t k = 0; k < num_inner_edges_; ++k) {
    const int64_t eid = in_.eids[k];
    const int32_t t = typed ? edge_type_[k] : 0;
    const IdRange tr = typed ? config.types.etype_map[t][part_id_] : er;
    if (eid < tr.start || eid >= tr.end || edge_slot_[eid - er.start] >= 0) {
      return corruption(where + ": " + part_arrays::kInEids + "[" + std::to_string(k) + "] = " + std::to_string(eid) +
                        (eid < tr.start || eid >= tr.end
                             ? " is outside the partition's range" +
                                   (typed ? " of type '" + config.types.etypes[t] + "'" : std::string()) + " [" +
                                   std::to_string(tr.start) + ", " + std::to_string(tr.end) + ")"
                             : " is repeated"));
    }
    edge_slot_[eid - er.start] = k;
  }
  return Status::ok();
}

}  // namespace dgld
