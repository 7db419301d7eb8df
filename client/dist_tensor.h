#pragma once
// DistTensor: a tensor whose rows live on the graph-servers, partitioned by
// node (or edge) ownership, as DGL's dgl.distributed.DistTensor. Rows of the
// caller's machine are read and written in shared memory with no request;
// rows of other machines go to the server Cluster::server_for() picks, one
// group of requests per machine, all in flight at once. Repeated ids are
// fetched once. A DistTensor borrows its Cluster, which must outlive it;
// copies share the same local mapping. pull/push may run on several threads.

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/server_api.h"
#include "common/dtype.h"
#include "common/status.h"

namespace dgld::shm {
class SharedTensor;
}

namespace dgld::client {

// Where the rows of a pull came from.
struct PullRows {
  int64_t local = 0, cached = 0, remote = 0;
  PullRows& operator+=(const PullRows& o) {
    local += o.local;
    cached += o.cached;
    remote += o.remote;
    return *this;
  }
};

class Cluster;
class RowCache;

class DistTensor {
 public:
  // An existing tensor (from the partition files or created earlier), as the
  // main server of the caller's machine lists it ("_N/features").
  static Result<DistTensor> open(Cluster& cluster, const std::string& name);
  // Collective: every trainer calls it with the same spec (shape[0] = the
  // graph's nodes or edges). Each machine's main server creates the tensor
  // once and the other callers attach; returns after a barrier, so every
  // machine has it. Trainers only.
  static Result<DistTensor> create(
      Cluster& cluster, const CreateTensor& spec,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));
  // Collective: every trainer calls it; the tensor is deleted on every machine
  // once all have arrived, and returns after every trainer saw it deleted.
  Status destroy(std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));

  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }  // global
  Policy policy() const { return policy_; }
  // Heterogeneous graphs: the node type whose rows the tensor holds ("paper/..."),
  // or -1 for every node (docs/heterogeneous.md). Rows are still addressed by
  // homogeneous id; num_rows() is then the type's node count.
  int ntype() const { return ntype_; }
  // The same for edge tensors: the edge type of "<src:rel:dst>/...", or -1.
  int etype() const { return etype_; }
  size_t row_bytes() const { return row_bytes_; }
  int64_t num_rows() const { return shape_.empty() ? 0 : shape_[0]; }

  // out[k] = row ids[k] (ids.size() * row_bytes() bytes); errors name the id or
  // the machine whose request failed.
  Status pull_into(std::span<const int64_t> ids, void* out) const;
  // The same for ids known to be distinct (a block's nodes): no de-duplication.
  // With `where`, adds how many rows came from this machine's memory, the
  // row cache and other machines.
  Status pull_unique_into(std::span<const int64_t> ids, void* out, PullRows* where = nullptr) const;
  // Rows of other machines found in `cache` are copied from it instead of
  // requested (a read-only tensor only: nothing invalidates the cache).
  // Copies of this DistTensor made afterwards share it.
  void set_row_cache(std::shared_ptr<const RowCache> cache) { cache_ = std::move(cache); }
  const std::shared_ptr<const RowCache>& row_cache() const { return cache_; }
  Result<std::vector<uint8_t>> pull(std::span<const int64_t> ids) const;
  template <typename T>
  Result<std::vector<T>> pull_as(std::span<const int64_t> ids) const;
  // row ids[k] = rows[k]; with repeated ids one of them wins.
  Status push(std::span<const int64_t> ids, const void* rows) const;

 private:
  DistTensor() = default;
  Cluster* cluster_ = nullptr;
  std::string name_;
  DType dtype_ = DType::float32;
  std::vector<int64_t> shape_;
  Policy policy_ = Policy::node;
  int ntype_ = -1, etype_ = -1;
  size_t row_bytes_ = 0;
  int64_t first_row_ = 0;                     // global id of the local machine's row 0
  std::shared_ptr<shm::SharedTensor> local_;  // the caller's machine's rows
  std::shared_ptr<const RowCache> cache_;      // other machines' rows, read-only tensors only

  int owner(int64_t id) const;
  // Ids are homogeneous node (or edge) ids below this.
  int64_t id_limit() const;
  Status pull_distinct(std::span<const int64_t> ids, uint8_t* out, PullRows* where = nullptr) const;
};

template <typename T>
Result<std::vector<T>> DistTensor::pull_as(std::span<const int64_t> ids) const {
  if (dtype_of<T>() != dtype_) {
    return invalid_argument("DistTensor '" + name_ + "' is " + dtype_name(dtype_) + ", not " +
                            dtype_name(dtype_of<T>()));
  }
  std::vector<T> out(ids.size() * (row_bytes_ / sizeof(T)));
  DGLD_RETURN_IF_ERROR(pull_into(ids, out.data()));
  return out;
}

}  // namespace dgld::client
