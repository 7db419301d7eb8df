// PartitionWriter (part_writer.h): the partition's edge feature file and
// its link split's held-out edges.
#include "partition/part_writer_impl.h"

namespace dgld {
namespace fs = std::filesystem;

Status PartitionWriter::Impl::write_typed_edge_feats(const fs::path& path) {
  const GraphTypes& ty = g_.types;
  std::vector<ArraySpec> specs;
  std::vector<int> featured;
  for (int t = 0; t < static_cast<int>(ty.edge_feat_dim.size()); ++t) {
    if (ty.edge_feat_dim[t] > 0 && !ty.edge_features[ty.edge_feat_of[t]].empty()) {
      featured.push_back(t);
      specs.push_back({ty.etypes[t].name() + "/features", DType::float32,
                       {L_.etype_map[t][p_].size(), ty.edge_feat_dim[t]}});
    }
  }
  const bool trainers = o_.num_trainers_per_machine > 1;  // DGL's "<etype>/trainer_id": its destination's
  for (int t = 0; trainers && t < ty.num_etypes(); ++t) {
    specs.push_back({ty.etypes[t].name() + "/trainer_id", DType::int64, {L_.etype_map[t][p_].size()}});
  }
  for (const NamedTensor& x : g_.edge_tensors) {
    specs.push_back(named_spec(ty.etypes[x.type].name() + "/", x, L_.etype_map[x.type][p_].size()));
  }
  const bool empty = specs.empty();
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::edge_features, std::move(specs)));
  if (empty) return w->finish();
  // Original CSC position and destination of each inner edge, by edge id.
  const IdRange er = L_.edge_map[p_];
  std::vector<int64_t> by_eid(static_cast<size_t>(er.size()));
  std::vector<int32_t> dst_of(static_cast<size_t>(er.size()));
  for (int64_t v = range_.start; v < range_.end; ++v) {
    const int32_t o = L_.new2orig[v];
    for (int64_t k = g_.indptr[o]; k < g_.indptr[o + 1]; ++k) {
      by_eid[L_.new_eid(o, k) - er.start] = k;
      dst_of[L_.new_eid(o, k) - er.start] = o;
    }
  }
  for (int t : featured) {
    Appender<float> a(*w);
    const int64_t d = ty.edge_feat_dim[t];
    const std::vector<float>& rows = ty.edge_features[ty.edge_feat_of[t]];
    const IdRange tr = L_.etype_map[t][p_];
    for (int64_t e = tr.start; e < tr.end; ++e) {
      const int64_t row = g_.orig_edge_id(by_eid[e - er.start]) - ty.etype_first_orig[t];
      a.push(rows.data() + row * d, static_cast<size_t>(d));
    }
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  for (int t = 0; trainers && t < ty.num_etypes(); ++t) {
    Appender<int64_t> a(*w);
    for (int64_t e = L_.etype_map[t][p_].start; e < L_.etype_map[t][p_].end; ++e) a.push(L_.piece[dst_of[e - er.start]]);
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  for (const NamedTensor& x : g_.edge_tensors) {
    DGLD_RETURN_IF_ERROR(write_named_rows(*w, x, [&](auto&& row) {
      const IdRange tr = L_.etype_map[x.type][p_];
      for (int64_t e = tr.start; e < tr.end; ++e) {
        row(g_.orig_edge_id(by_eid[e - er.start]) - ty.etype_first_orig[x.type]);
      }
    }));
  }
  return w->finish();
}

Status PartitionWriter::Impl::write_edge_feats(const fs::path& path) {
  if (g_.types.present()) return write_typed_edge_feats(path);
  const int64_t e_inner = L_.edge_map[p_].size();
  const std::string et = PartitionConfig{}.etype + "/";
  std::vector<ArraySpec> specs;
  const bool mask = link_.present;
  if (mask) specs.push_back({link_train_mask_name(PartitionConfig{}), DType::uint8, {e_inner}});
  const bool trainers = o_.num_trainers_per_machine > 1;  // DGL's: each edge's destination's trainer
  if (trainers) specs.push_back({et + "trainer_id", DType::int64, {e_inner}});
  for (const NamedTensor& t : g_.edge_tensors) specs.push_back(named_spec(et, t, e_inner));
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::edge_features, std::move(specs)));
  if (mask) {
    Appender<uint8_t> a(*w);
    for_each_inner_edge([&](int64_t k) { a.push(g_.edge_train_mask[k]); });
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  if (trainers) {
    Appender<int64_t> a(*w);
    for_each_inner_edge_at([&](int32_t o, int64_t) { a.push(L_.piece[o]); });
    DGLD_RETURN_IF_ERROR(a.finish());
  }
  for (const NamedTensor& t : g_.edge_tensors) {
    DGLD_RETURN_IF_ERROR(write_named_rows(*w, t, [&](auto&& row) {
      for_each_inner_edge([&](int64_t k) { row(g_.orig_edge_id(k)); });
    }));
  }
  return w->finish();
}

ArraySpec PartitionWriter::Impl::named_spec(const std::string& prefix, const NamedTensor& t, int64_t rows) {
  std::vector<int64_t> shape = t.shape;
  shape[0] = rows;
  return {prefix + t.name, t.dtype, std::move(shape)};
}

Status PartitionWriter::Impl::write_link_split(const fs::path& path) {
  namespace la = link_arrays;
  const int64_t k = link_.num_negatives;
  const HeldOutEdges* sets[2] = {&link_.valid, &link_.test};
  std::vector<ArraySpec> specs = {{la::kMeta, DType::int64, {la::kMetaSize}}};
  for (int s = 0; s < 2; ++s) {
    const int64_t n = static_cast<int64_t>(buckets_[p_][s].size());
    const std::string set = std::string(la::kSets[s]) + "/";
    for (const char* name : {la::kSrc, la::kDst, la::kOrigSrc, la::kOrigDst}) {
      specs.push_back({set + name, DType::int64, {n}});
    }
    if (k > 0) specs.push_back({set + la::kNegDst, DType::int64, {n, k}});
  }
  DGLD_ASSIGN_OR_RETURN(auto w, ArrayFileWriter::create(path, ArrayFileKind::link_split, std::move(specs)));
  std::vector<int64_t> meta(la::kMetaSize, 0);
  meta[la::kMetaPartId] = p_;
  meta[la::kMetaNumParts] = L_.num_parts;
  meta[la::kMetaNumNegatives] = k;
  DGLD_RETURN_IF_ERROR(w->write_array(std::span<const int64_t>(meta)));
  for (int s = 0; s < 2; ++s) {
    const HeldOutEdges& e = *sets[s];
    const std::vector<int64_t>& idx = buckets_[p_][s];
    auto column = [&](auto&& value) -> Status {
      Appender<int64_t> a(*w);
      for (int64_t i : idx) a.push(value(i));
      return a.finish();
    };
    DGLD_RETURN_IF_ERROR(column([&](int64_t i) -> int64_t { return L_.orig2new[e.src[i]]; }));
    DGLD_RETURN_IF_ERROR(column([&](int64_t i) -> int64_t { return L_.orig2new[e.dst[i]]; }));
    DGLD_RETURN_IF_ERROR(column([&](int64_t i) -> int64_t { return e.src[i]; }));
    DGLD_RETURN_IF_ERROR(column([&](int64_t i) -> int64_t { return e.dst[i]; }));
    if (k > 0) {
      Appender<int64_t> a(*w);
      for (int64_t i : idx) {
        for (int64_t j = 0; j < k; ++j) a.push(L_.orig2new[e.neg[i * k + j]]);
      }
      DGLD_RETURN_IF_ERROR(a.finish());
    }
  }
  return w->finish();
}

}  // namespace dgld
