#include "common/partition/link_split.h"

#include <filesystem>

#include "common/partition/array_file.h"

namespace dgld {
namespace {

namespace la = link_arrays;

Status read_set(const MappedArrayFile& f, const PartitionConfig& c, int part_id, const std::string& set,
                LinkEdges* out) {
  const std::string p = f.path().string();
  const std::string src_name = set + "/" + la::kSrc;
  const ArrayEntry* e = f.find(src_name);
  if (e == nullptr) return corruption(p + ": no array '" + src_name + "'");
  if (e->shape.size() != 1) return corruption(p + ": array '" + src_name + "' must be one-dimensional");
  const int64_t n = e->shape[0];
  const int64_t k = c.link_split.num_negatives;
  std::vector<int64_t>* cols[] = {&out->src, &out->dst, &out->orig_src, &out->orig_dst};
  const char* names[] = {la::kSrc, la::kDst, la::kOrigSrc, la::kOrigDst};
  for (int i = 0; i < 4; ++i) {
    DGLD_ASSIGN_OR_RETURN(auto a, f.get<int64_t>(set + "/" + names[i], n));
    cols[i]->assign(a.begin(), a.end());
  }
  const std::string neg_name = set + "/" + la::kNegDst;
  const ArrayEntry* neg = f.find(neg_name);
  if (k == 0) {
    if (neg != nullptr && neg->length != 0) {
      return corruption(p + ": array '" + neg_name + "' is present but the config has num_negatives 0");
    }
  } else {
    if (neg == nullptr) {
      return corruption(p + ": no array '" + neg_name + "' (the config has num_negatives " + std::to_string(k) + ")");
    }
    if (neg->shape != std::vector<int64_t>{n, k}) {
      std::string shape;
      for (int64_t d : neg->shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      return corruption(p + ": array '" + neg_name + "' has shape [" + shape + "], expected [" + std::to_string(n) +
                        ", " + std::to_string(k) + "]");
    }
    DGLD_ASSIGN_OR_RETURN(auto a, f.get<int64_t>(neg_name));
    out->neg_dst.assign(a.begin(), a.end());
  }
  out->num_negatives = k;
  const int64_t nodes = c.num_nodes;
  auto check_range = [&](const std::vector<int64_t>& v, const char* name) -> Status {
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] < 0 || v[i] >= nodes) {
        return corruption(p + ": " + set + "/" + name + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) +
                          " is outside [0, num_nodes=" + std::to_string(nodes) + ")");
      }
    }
    return Status::ok();
  };
  for (int i = 0; i < 4; ++i) DGLD_RETURN_IF_ERROR(check_range(*cols[i], names[i]));
  DGLD_RETURN_IF_ERROR(check_range(out->neg_dst, la::kNegDst));
  const IdRange own = c.node_map[part_id];
  for (size_t i = 0; i < out->dst.size(); ++i) {
    if (out->dst[i] < own.start || out->dst[i] >= own.end) {
      return corruption(p + ": " + set + "/dst[" + std::to_string(i) + "] = " + std::to_string(out->dst[i]) +
                        " is not owned by partition " + std::to_string(part_id) + " [" + std::to_string(own.start) +
                        ", " + std::to_string(own.end) + ")");
    }
  }
  return Status::ok();
}

}  // namespace

Result<LinkSplitPart> read_link_split(const PartitionConfig& c, int part_id) {
  if (part_id < 0 || part_id >= c.num_parts || static_cast<int>(c.parts.size()) != c.num_parts) {
    return invalid_argument("partition " + std::to_string(part_id) + " does not exist (num_parts=" +
                            std::to_string(c.num_parts) + ")");
  }
  const std::string& rel = c.parts[part_id].link_split;
  if (!c.link_split.present || rel.empty()) {
    return not_found("partition config of " + c.graph_name + " (" + c.base_dir.string() +
                     "): no link split file for partition " + std::to_string(part_id) +
                     " (partition with dgl-partition --link-split, or an OGB edge split)");
  }
  const std::filesystem::path path = c.resolve(rel);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return not_found("link split file " + path.string() + " does not exist");
  DGLD_ASSIGN_OR_RETURN(auto f, MappedArrayFile::open(path, ArrayFileKind::link_split, /*verify_checksums=*/true));
  DGLD_ASSIGN_OR_RETURN(auto meta, f->get<int64_t>(la::kMeta, la::kMetaSize));
  if (meta[la::kMetaPartId] != part_id || meta[la::kMetaNumParts] != c.num_parts ||
      meta[la::kMetaNumNegatives] != c.link_split.num_negatives) {
    return corruption(path.string() + ": file is partition " + std::to_string(meta[la::kMetaPartId]) + " of " +
                      std::to_string(meta[la::kMetaNumParts]) + " with " + std::to_string(meta[la::kMetaNumNegatives]) +
                      " negatives, expected " + std::to_string(part_id) + " of " + std::to_string(c.num_parts) +
                      " with " + std::to_string(c.link_split.num_negatives));
  }
  LinkSplitPart out;
  DGLD_RETURN_IF_ERROR(read_set(*f, c, part_id, la::kSets[0], &out.valid));
  DGLD_RETURN_IF_ERROR(read_set(*f, c, part_id, la::kSets[1], &out.test));
  return out;
}

}  // namespace dgld
