#include "client/dist_tensor.h"

#include "client/row_cache.h"

#include <algorithm>
#include <cstring>

#include "client/cluster.h"
#include "common/memory.h"
#include "common/net/rpc_client.h"
#include "common/partition/partition_book.h"
#include "common/sampling/id_map.h"
#include "client/local_partition.h"
#include "common/shm/shared_tensor.h"

namespace dgld::client {

namespace {

std::vector<int> all_machines_but(const Cluster& c, int skip) {
  std::vector<int> out;
  for (int m = 0; m < c.num_machines(); ++m) {
    if (m != skip) out.push_back(m);
  }
  return out;
}

}  // namespace

Result<DistTensor> DistTensor::open(Cluster& cluster, const std::string& name) {
  const int me = cluster.machine_id();
  auto& main = cluster.main_server(me);
  DGLD_ASSIGN_OR_RETURN(auto infos, main.list_tensors());
  const auto it =
      std::find_if(infos.begin(), infos.end(), [&](const TensorInfo& t) { return t.name == name; });
  if (it == infos.end()) {
    std::string names;
    for (const auto& t : infos) names += (names.empty() ? "" : ", ") + t.name;
    return not_found("DistTensor '" + name + "' does not exist on machine " + std::to_string(me) +
                     " (" + main.peer() + " has: " + (names.empty() ? "none" : names) + ")");
  }
  DistTensor t;
  t.cluster_ = &cluster;
  t.name_ = name;
  t.dtype_ = it->dtype;
  t.policy_ = it->policy;
  t.shape_ = it->shape;
  if (t.shape_.empty())
    return protocol_error(main.peer() + ": tensor '" + name + "' has no dimensions");
  const bool edge = it->policy == Policy::edge;
  // A heterogeneous graph's "<ntype>/..." tensor has rows for that type's nodes
  // only, still addressed by homogeneous id (node_tensor_range).
  // An "<etype>/..." edge tensor likewise has rows for that type's edges only.
  const PartitionConfig& pc = cluster.config();
  t.ntype_ = edge ? -1 : node_tensor_type(pc, name);
  t.etype_ = edge ? edge_tensor_type(pc, name) : -1;
  t.shape_[0] = edge ? (t.etype_ < 0 ? pc.num_edges : pc.types.etype_count[t.etype_])
                     : (t.ntype_ < 0 ? pc.num_nodes : pc.types.ntype_count[t.ntype_]);
  t.first_row_ = edge ? edge_tensor_range(pc, me, name).start : node_tensor_range(pc, me, name).start;
  t.row_bytes_ = dtype_size(t.dtype_);
  for (size_t d = 1; d < t.shape_.size(); ++d) t.row_bytes_ *= static_cast<size_t>(t.shape_[d]);
  // The machine's mapping of the segment when the process has one (the
  // loaders read the same tensors); else a mapping of its own.
  Result<std::shared_ptr<shm::SharedTensor>> shared = not_found("no local partition");
  if (cluster.has_local()) shared = cluster.local().shared_tensor(name, it->shm_name);
  if (shared.is_ok()) {
    t.local_ = std::move(*shared);
  } else {
    auto seg = shm::SharedTensor::attach(it->shm_name, false,
                                         shm::Deadline::clock::now() + std::chrono::seconds(10));
    if (!seg.is_ok())
      return seg.status().with_context("DistTensor '" + name + "' on machine " + std::to_string(me));
    t.local_ = std::make_shared<shm::SharedTensor>(std::move(*seg));
  }
  if (t.local_->row_bytes() != t.row_bytes_ || t.local_->dtype() != t.dtype_) {
    return corruption("DistTensor '" + name + "': shared memory " + it->shm_name + " holds " +
                      std::to_string(t.local_->row_bytes()) + "-byte rows, the server lists " +
                      std::to_string(t.row_bytes_));
  }
  return t;
}

Result<DistTensor> DistTensor::create(Cluster& cluster, const CreateTensor& spec,
                                      std::chrono::milliseconds timeout) {
  if (cluster.role() != Role::trainer) {
    return invalid_argument("DistTensor '" + spec.name +
                            "': only trainers create tensors (samplers open them)");
  }
  const int me = cluster.machine_id();
  auto create_on = [&](int m) -> Status {
    auto r = cluster.main_server(m).create_tensor(spec);
    return r.status().with_context("create DistTensor '" + spec.name + "' on machine " +
                                   std::to_string(m));
  };
  DGLD_RETURN_IF_ERROR(create_on(me));
  // Rank 0 covers machines that run no trainer; the servers create once.
  if (cluster.rank() == 0)
    DGLD_RETURN_IF_ERROR(cluster.for_each_machine(all_machines_but(cluster, me), create_on));
  DGLD_RETURN_IF_ERROR(cluster.barrier("dgld.create." + spec.name, timeout));
  return open(cluster, spec.name);
}

Status DistTensor::destroy(std::chrono::milliseconds timeout) {
  Cluster& c = *cluster_;
  DGLD_RETURN_IF_ERROR(c.barrier("dgld.destroy." + name_, timeout));
  local_.reset();
  if (c.rank() == 0) {
    std::vector<int> all = all_machines_but(c, -1);
    DGLD_RETURN_IF_ERROR(c.for_each_machine(all, [&](int m) {
      return c.main_server(m).delete_tensor(name_).with_context(
          "delete DistTensor '" + name_ + "' on machine " + std::to_string(m));
    }));
  }
  return c.barrier("dgld.destroyed." + name_, timeout);
}

int64_t DistTensor::id_limit() const {
  const auto& book = cluster_->partition_book();
  return policy_ == Policy::edge ? book.num_edges() : book.num_nodes();
}

int DistTensor::owner(int64_t id) const {
  const auto& book = cluster_->partition_book();
  return policy_ == Policy::edge ? book.edge_partition(id) : book.node_partition(id);
}

Status DistTensor::pull_into(std::span<const int64_t> ids, void* out) const {
  if (!local_) return invalid_argument("DistTensor '" + name_ + "' was destroyed");
  UniqueInverse uniq = unique_with_inverse(ids);
  // unique is in order of first appearance: with nothing repeated it is ids.
  if (uniq.unique.size() == ids.size()) return pull_distinct(ids, static_cast<uint8_t*>(out));
  const size_t rb = row_bytes_;
  auto rows = uninitialized_bytes(uniq.unique.size() * rb);
  DGLD_RETURN_IF_ERROR(pull_distinct(uniq.unique, rows.get()));
  auto* dst = static_cast<uint8_t*>(out);
  for (size_t k = 0; k < ids.size(); ++k) {
    std::memcpy(dst + k * rb, rows.get() + static_cast<size_t>(uniq.inverse[k]) * rb, rb);
  }
  return Status::ok();
}

Status DistTensor::pull_unique_into(std::span<const int64_t> ids, void* out, PullRows* where) const {
  if (!local_) return invalid_argument("DistTensor '" + name_ + "' was destroyed");
  return pull_distinct(ids, static_cast<uint8_t*>(out), where);
}

Status DistTensor::pull_distinct(std::span<const int64_t> ids, uint8_t* out, PullRows* where) const {
  Cluster& c = *cluster_;
  const int me = c.machine_id();
  const int P = c.num_machines();
  const size_t rb = row_bytes_;
  const int64_t local_rows = local_->num_rows();
  // Rows of this machine and cached rows are copied straight to their place;
  // the others are requested from their machines, one buffer per machine.
  struct Direct {
    size_t at;
    const void* src;
  };
  std::vector<Direct> direct;
  direct.reserve(ids.size());
  int64_t n_local = 0;
  std::vector<std::vector<int64_t>> remote_ids(static_cast<size_t>(P));
  std::vector<std::vector<size_t>> remote_at(static_cast<size_t>(P));
  for (size_t k = 0; k < ids.size(); ++k) {
    const int64_t id = ids[k];
    const int m = owner(id);
    if (m < 0) {
      return invalid_argument("pull '" + name_ + "': id " + std::to_string(id) + " is not in [0, " +
                              std::to_string(id_limit()) + ")");
    }
    if (m == me) {
      const int64_t row = id - first_row_;
      if (row < 0 || row >= local_rows) {
        return internal_error("pull '" + name_ + "': id " + std::to_string(id) + " maps to row " +
                              std::to_string(row) + " of " + std::to_string(local_rows) + " on machine " +
                              std::to_string(me));
      }
      direct.push_back({k, local_->row(row)});
      ++n_local;
    } else if (const uint8_t* cached = cache_ ? cache_->find(id) : nullptr) {
      direct.push_back({k, cached});
    } else {
      remote_ids[static_cast<size_t>(m)].push_back(id);
      remote_at[static_cast<size_t>(m)].push_back(k);
    }
  }
  // Remote machines: chunks of about kPullChunkBytes, all in flight at once,
  // while the direct rows are copied.
  struct Call {
    int machine;
    net::PendingCall call;
  };
  std::vector<Call> calls;
  std::vector<std::unique_ptr<uint8_t[]>> bufs(static_cast<size_t>(P));
  const size_t chunk = std::max<size_t>(1, ServerConnection::kPullChunkBytes / std::max<size_t>(rb, 1));
  for (int m = 0; m < P; ++m) {
    const auto& gids = remote_ids[static_cast<size_t>(m)];
    if (gids.empty()) continue;
    auto& buf = bufs[static_cast<size_t>(m)];
    buf = uninitialized_bytes(gids.size() * rb);
    for (size_t at = 0; at < gids.size(); at += chunk) {
      const size_t k = std::min(chunk, gids.size() - at);
      calls.push_back({m, c.server_for(m).start_pull(name_, std::span<const int64_t>(gids).subspan(at, k),
                                                     buf.get() + at * rb, k * rb)});
    }
  }
  for (const Direct& d : direct) std::memcpy(out + d.at * rb, d.src, rb);
  Status first;
  for (auto& call : calls) {
    auto& srv = c.server_for(call.machine);
    auto r = srv.finish_pull(call.call);  // every call is waited for, even after an error
    if (!first.is_ok()) continue;
    if (!r.is_ok()) {
      first = r.status().with_context("pull '" + name_ + "' from machine " + std::to_string(call.machine));
    } else if (r->dtype != dtype_) {
      first = invalid_argument("pull '" + name_ + "': machine " + std::to_string(call.machine) + " (" +
                               srv.peer() + ") answers " + dtype_name(r->dtype) + " rows, the tensor is " +
                               dtype_name(dtype_));
    } else if (!r->data.is_borrowed()) {
      first = invalid_argument("pull '" + name_ + "': rows on machine " + std::to_string(call.machine) + " (" +
                               srv.peer() + ") are " + std::to_string(r->row_bytes()) + " bytes, expected " +
                               std::to_string(rb));
    }
  }
  DGLD_RETURN_IF_ERROR(first);
  if (where) {
    int64_t remote = 0;
    for (const auto& at : remote_at) remote += static_cast<int64_t>(at.size());
    where->remote += remote;
    where->local += n_local;
    where->cached += static_cast<int64_t>(direct.size()) - n_local;
  }
  for (int m = 0; m < P; ++m) {
    const auto& at = remote_at[static_cast<size_t>(m)];
    const uint8_t* buf = bufs[static_cast<size_t>(m)].get();
    for (size_t i = 0; i < at.size(); ++i) std::memcpy(out + at[i] * rb, buf + i * rb, rb);
  }
  return Status::ok();
}

Result<std::vector<uint8_t>> DistTensor::pull(std::span<const int64_t> ids) const {
  std::vector<uint8_t> out(ids.size() * row_bytes_);
  DGLD_RETURN_IF_ERROR(pull_into(ids, out.data()));
  return out;
}

Status DistTensor::push(std::span<const int64_t> ids, const void* rows) const {
  if (!local_) return invalid_argument("DistTensor '" + name_ + "' was destroyed");
  Cluster& c = *cluster_;
  const int me = c.machine_id();
  const int P = c.num_machines();
  const size_t rb = row_bytes_;
  const auto* src = static_cast<const uint8_t*>(rows);
  std::vector<std::vector<int64_t>> gid(P);
  std::vector<std::vector<uint8_t>> data(P);
  std::vector<int64_t> local_rows;
  std::vector<size_t> local_at;
  for (size_t k = 0; k < ids.size(); ++k) {
    const int m = owner(ids[k]);
    if (m < 0) {
      return invalid_argument("push '" + name_ + "': id " + std::to_string(ids[k]) +
                              " is not in [0, " + std::to_string(id_limit()) + ")");
    }
    if (m == me) {
      local_rows.push_back(ids[k] - first_row_);
      local_at.push_back(k);
    } else {
      gid[m].push_back(ids[k]);
      data[m].insert(data[m].end(), src + k * rb, src + (k + 1) * rb);
    }
  }
  std::vector<int> remote;
  for (int m = 0; m < P; ++m) {
    if (!gid[m].empty()) remote.push_back(m);
  }
  remote.push_back(-1);  // the local rows, on this thread alongside the requests
  return c.for_each_machine(remote, [&](int m) -> Status {
    if (m >= 0) {
      return c.server_for(m)
          .push(name_, gid[m], dtype_, data[m].data(), rb)
          .with_context("push '" + name_ + "' to machine " + std::to_string(m));
    }
    if (local_rows.empty()) return Status::ok();
    std::vector<uint8_t> packed(local_rows.size() * rb);
    for (size_t i = 0; i < local_at.size(); ++i)
      std::memcpy(packed.data() + i * rb, src + local_at[i] * rb, rb);
    return local_->scatter_rows(local_rows, packed.data())
        .with_context("push '" + name_ + "' on machine " + std::to_string(me));
  });
}

}  // namespace dgld::client
