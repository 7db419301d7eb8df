#include "daemons/graph_server/tensor_table.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "common/logging.h"
#include "common/shm/naming.h"
#include "common/random.h"

namespace dgld::graph_server {
namespace {

double unit(uint64_t x) { return (mix64(x + 0x9e3779b97f4a7c15ull) >> 11) * 0x1.0p-53; }

// Value of element `e` of global row `row`: depends only on (seed, row, e), so
// every partitioning of the graph initialises the same global tensor.
double init_value(const TensorSpec& s, int64_t row, int64_t e, int64_t row_elems) {
  uint64_t key = s.seed * 0x100000001b3ull ^ static_cast<uint64_t>(row * row_elems + e);
  if (s.init == InitKind::uniform) return s.init_a + (s.init_b - s.init_a) * unit(key);
  double u1 = std::max(unit(key * 2 + 1), 1e-300), u2 = unit(key * 2 + 2);
  return s.init_a + s.init_b * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

}  // namespace

TensorTable::TensorTable(std::string job_id, int machine_id, bool owner, int64_t node_start,
                         int64_t num_owned_nodes, int64_t edge_start, int64_t num_owned_edges,
                         std::chrono::milliseconds attach_timeout)
    : job_id_(std::move(job_id)), machine_id_(machine_id), owner_(owner), node_start_(node_start),
      num_nodes_(num_owned_nodes), edge_start_(edge_start), num_edges_(num_owned_edges),
      attach_timeout_(attach_timeout) {}

Status TensorTable::init() {
  std::lock_guard lock(mu_);
  if (owner_) {
    DGLD_ASSIGN_OR_RETURN(auto g, shm::TensorGeneration::create(job_id_, machine_id_));
    generation_ = std::make_unique<shm::TensorGeneration>(std::move(g));
  } else {
    DGLD_ASSIGN_OR_RETURN(auto g, shm::TensorGeneration::attach(job_id_, machine_id_,
                                                                   shm::Deadline::clock::now() + attach_timeout_));
    generation_ = std::make_unique<shm::TensorGeneration>(std::move(g));
    cached_generation_ = generation_->load();
  }
  return Status::ok();
}

TensorTable::~TensorTable() = default;

std::string TensorTable::segment_for(const std::string& name, PartPolicy policy) const {
  return shm::tensor_segment(job_id_, machine_id_, name, policy == PartPolicy::edge);
}

Status TensorTable::add(const TensorSpec& spec, const void* rows, const CopiedFn& copied) {
  std::lock_guard lock(mu_);
  auto r = create_locked(spec, rows, copied);
  if (!r.is_ok()) return r.status();
  if (!*r) return invalid_argument("tensor '" + spec.name + "' is listed twice");
  return Status::ok();
}

IdRange TensorTable::rows_of(const std::string& name, PartPolicy policy) const {
  if (policy == PartPolicy::edge) return edge_rows_ ? edge_rows_(name) : IdRange{edge_start_, edge_start_ + num_edges_};
  return node_rows_ ? node_rows_(name) : IdRange{node_start_, node_start_ + num_nodes_};
}

Result<bool> TensorTable::create(const TensorSpec& spec) {
  std::lock_guard lock(mu_);
  return create_locked(spec, nullptr, {});
}

Result<bool> TensorTable::create_locked(const TensorSpec& spec, const void* rows, const CopiedFn& copied) {
  if (!owner_) return invalid_argument("tensors are created by the main server of a machine");
  if (spec.name.empty() || spec.name.size() > shm::kMaxTensorNameLength) {
    return invalid_argument("tensor name must be 1.." + std::to_string(shm::kMaxTensorNameLength) +
                            " characters, got '" + spec.name + "'");
  }
  if (dtype_size(spec.dtype) == 0) {
    return invalid_argument("tensor '" + spec.name + "': unknown dtype " +
                            std::to_string(static_cast<uint32_t>(spec.dtype)));
  }
  if (spec.shape.empty() || spec.shape.size() > shm::kMaxTensorDims) {
    return invalid_argument("tensor '" + spec.name + "': shape needs 1 to " + std::to_string(shm::kMaxTensorDims) +
                            " dimensions");
  }
  for (int64_t d : spec.shape) {
    if (d < 0) return invalid_argument("tensor '" + spec.name + "': negative dimension in its shape");
  }
  std::vector<int64_t> local_shape = spec.shape;
  const IdRange range = rows_of(spec.name, spec.policy);
  local_shape[0] = range.size();
  if (auto it = tensors_.find(spec.name); it != tensors_.end()) {
    const ServedTensor& t = *it->second;
    if (t.dtype() != spec.dtype || t.shape() != local_shape || t.policy != spec.policy) {
      return invalid_argument("tensor '" + spec.name + "' already exists with another dtype, shape or policy");
    }
    return false;
  }
  if (spec.init != InitKind::zeros && spec.dtype != DType::float32 && spec.dtype != DType::float64) {
    return invalid_argument("tensor '" + spec.name + "': uniform and normal initialisation need a float dtype");
  }
  auto st = shm::SharedTensor::create(segment_for(spec.name, spec.policy), spec.name, spec.dtype, local_shape);
  if (!st.is_ok()) return st.status().with_context("tensor '" + spec.name + "'");
  auto t = std::make_unique<ServedTensor>();
  t->name = spec.name;
  t->policy = spec.policy;
  t->persistent = spec.persistent;
  t->first_global_row = range.start;
  t->storage = std::make_unique<shm::SharedTensor>(std::move(*st));
  if (rows) {
    constexpr size_t kStretch = size_t{16} << 20;
    auto* to = static_cast<std::byte*>(t->storage->mutable_data());
    const auto* from = static_cast<const std::byte*>(rows);
    const size_t bytes = t->storage->data_bytes();
    for (size_t off = 0; off < bytes; off += kStretch) {
      const size_t n = std::min(kStretch, bytes - off);
      std::memcpy(to + off, from + off, n);
      if (copied) copied(from + off, n);
    }
  } else if (spec.init != InitKind::zeros) {
    const int64_t n = t->num_rows();
    const int64_t elems = static_cast<int64_t>(t->row_bytes() / dtype_size(spec.dtype));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t e = 0; e < elems; ++e) {
        double v = init_value(spec, t->first_global_row + r, e, elems);
        if (spec.dtype == DType::float32) static_cast<float*>(t->storage->mutable_row(r))[e] = static_cast<float>(v);
        else static_cast<double*>(t->storage->mutable_row(r))[e] = v;
      }
    }
  }
  DGLD_RETURN_IF_ERROR(t->storage->mark_ready());
  tensors_[spec.name] = std::move(t);
  return true;
}

Result<std::shared_ptr<ServedTensor>> TensorTable::find(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!owner_ && generation_) {
    // The main server deleted a tensor since: attachments may be stale.
    if (uint64_t now = generation_->load(); now != cached_generation_) {
      tensors_.clear();  // replies in flight keep their tensors alive
      cached_generation_ = now;
    }
  }
  if (auto it = tensors_.find(name); it != tensors_.end()) return it->second;
  if (owner_) return not_found("no tensor named '" + name + "' on machine " + std::to_string(machine_id_));
  // A backup server attaches to the main server's segment on first use.
  for (PartPolicy p : {PartPolicy::node, PartPolicy::edge}) {
    auto st = shm::SharedTensor::attach(segment_for(name, p), false, shm::Deadline::clock::now());
    if (!st.is_ok()) continue;
    auto t = std::make_unique<ServedTensor>();
    t->name = name;
    t->policy = p;
    t->first_global_row = rows_of(name, p).start;
    t->storage = std::make_unique<shm::SharedTensor>(std::move(*st));
    std::shared_ptr<ServedTensor> shared = std::move(t);
    tensors_[name] = shared;
    return shared;
  }
  return not_found("no tensor named '" + name + "' on machine " + std::to_string(machine_id_));
}

Status TensorTable::remove(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return not_found("no tensor named '" + name + "' to delete");
  tensors_.erase(it);  // the owner's SharedTensor unlinks the segment (when no reply holds it)
  if (generation_) generation_->bump();
  return Status::ok();
}

std::vector<std::shared_ptr<const ServedTensor>> TensorTable::list() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const ServedTensor>> out;
  for (const auto& [n, t] : tensors_) out.push_back(t);
  return out;
}

}  // namespace dgld::graph_server
