#include "common/client/dist_tensor.h"

#include <algorithm>
#include <cstring>

#include "common/client/cluster.h"
#include "common/net/rpc_client.h"
#include "common/partition/partition_book.h"
#include "common/sampling/id_map.h"
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
  t.shape_[0] = edge ? cluster.config().num_edges : cluster.config().num_nodes;
  t.first_row_ = edge ? cluster.partition_book().edge_range(me).start
                      : cluster.partition_book().node_range(me).start;
  t.row_bytes_ = dtype_size(t.dtype_);
  for (size_t d = 1; d < t.shape_.size(); ++d) t.row_bytes_ *= static_cast<size_t>(t.shape_[d]);
  auto seg = shm::SharedTensor::attach(it->shm_name, false,
                                       shm::Deadline::clock::now() + std::chrono::seconds(10));
  if (!seg.is_ok())
    return seg.status().with_context("DistTensor '" + name + "' on machine " + std::to_string(me));
  if (seg->row_bytes() != t.row_bytes_ || seg->dtype() != t.dtype_) {
    return corruption("DistTensor '" + name + "': shared memory " + it->shm_name + " holds " +
                      std::to_string(seg->row_bytes()) + "-byte rows, the server lists " +
                      std::to_string(t.row_bytes_));
  }
  t.local_ = std::make_shared<shm::SharedTensor>(std::move(*seg));
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

int DistTensor::owner(int64_t id) const {
  const auto& book = cluster_->partition_book();
  return policy_ == Policy::edge ? book.edge_partition(id) : book.node_partition(id);
}

Status DistTensor::pull_into(std::span<const int64_t> ids, void* out) const {
  if (!local_) return invalid_argument("DistTensor '" + name_ + "' was destroyed");
  Cluster& c = *cluster_;
  const int me = c.machine_id();
  const int P = c.num_machines();
  const size_t rb = row_bytes_;
  UniqueInverse uniq = unique_with_inverse(ids);
  const size_t n = uniq.unique.size();

  // Group the unique ids by owner: machine m's ids sit at [start[m], start[m+1]).
  std::vector<int> owners(n);
  std::vector<size_t> start(static_cast<size_t>(P) + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    owners[i] = owner(uniq.unique[i]);
    if (owners[i] < 0) {
      return invalid_argument("pull '" + name_ + "': id " + std::to_string(uniq.unique[i]) +
                              " is not in [0, " + std::to_string(num_rows()) + ")");
    }
    ++start[owners[i] + 1];
  }
  for (int m = 0; m < P; ++m) start[m + 1] += start[m];
  // Everything local and nothing repeated: straight from shared memory.
  if (n == ids.size() && start[me + 1] - start[me] == n) {
    std::vector<int64_t> rows(n);
    for (size_t i = 0; i < n; ++i) rows[i] = ids[i] - first_row_;
    return local_->gather_rows(rows, out).with_context("pull '" + name_ + "' on machine " +
                                                       std::to_string(me));
  }
  std::vector<size_t> pos(n);
  std::vector<int64_t> grouped(n);
  {
    std::vector<size_t> fill(start.begin(), start.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      pos[i] = fill[owners[i]]++;
      grouped[pos[i]] = uniq.unique[i];
    }
  }
  std::vector<uint8_t> rows_buf(n * rb);
  uint8_t* buf = rows_buf.data();

  // Remote machines: chunks of about kPullChunkBytes, all in flight at once.
  struct Call {
    int machine;
    net::PendingCall call;
  };
  std::vector<Call> calls;
  const size_t chunk =
      std::max<size_t>(1, ServerConnection::kPullChunkBytes / std::max<size_t>(rb, 1));
  const std::span<const int64_t> gids(grouped);
  for (int m = 0; m < P; ++m) {
    if (m == me) continue;
    for (size_t at = start[m]; at < start[m + 1]; at += chunk) {
      const size_t k = std::min(chunk, start[m + 1] - at);
      calls.push_back(
          {m, c.server_for(m).start_pull(name_, gids.subspan(at, k), buf + at * rb, k * rb)});
    }
  }
  Status first;
  if (start[me + 1] > start[me]) {
    std::vector<int64_t> rows(gids.begin() + start[me], gids.begin() + start[me + 1]);
    for (auto& r : rows) r -= first_row_;
    first = local_->gather_rows(rows, buf + start[me] * rb)
                .with_context("pull '" + name_ + "' on machine " + std::to_string(me));
  }
  for (auto& call : calls) {
    auto& srv = c.server_for(call.machine);
    auto r = srv.finish_pull(call.call);  // every call is waited for, even after an error
    if (!first.is_ok()) continue;
    if (!r.is_ok()) {
      first = r.status().with_context("pull '" + name_ + "' from machine " +
                                      std::to_string(call.machine));
    } else if (r->dtype != dtype_) {
      first = invalid_argument("pull '" + name_ + "': machine " + std::to_string(call.machine) +
                               " (" + srv.peer() + ") answers " + dtype_name(r->dtype) +
                               " rows, the tensor is " + dtype_name(dtype_));
    } else if (!r->data.is_borrowed()) {
      first =
          invalid_argument("pull '" + name_ + "': rows on machine " + std::to_string(call.machine) +
                           " (" + srv.peer() + ") are " + std::to_string(r->row_bytes()) +
                           " bytes, expected " + std::to_string(rb));
    }
  }
  DGLD_RETURN_IF_ERROR(first);
  auto* dst = static_cast<uint8_t*>(out);
  for (size_t k = 0; k < ids.size(); ++k)
    std::memcpy(dst + k * rb, buf + pos[uniq.inverse[k]] * rb, rb);
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
                              " is not in [0, " + std::to_string(num_rows()) + ")");
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
