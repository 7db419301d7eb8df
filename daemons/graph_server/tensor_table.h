#pragma once
// The named tensors one machine serves (DGL's KVStore on a server): node and
// edge data from the partition plus DistTensors created at run time. Rows are
// the machine's owned nodes (or edges) in local order. Every tensor lives in
// POSIX shared memory: the main server creates it, backup servers and
// co-located clients attach to the same segment by its deterministic name.
// Creation, deletion and listing happen on the main server (it owns the
// segments); backups attach by name on first use (node tensors first, then
// edge tensors: the policy is part of the segment name). Thread-safe for lookups, creation and deletion; row
// reads and writes are unsynchronised, as in DGL.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/kvstore_types.h"
#include "common/part_config.h"
#include "common/shm/naming.h"
#include "common/shm/shared_tensor.h"
#include "common/status.h"

namespace dgld::graph_server {

// The same description a client sends (shape is global: dim 0 = the graph's
// number of nodes or edges).
using TensorSpec = CreateTensor;
using PartPolicy = Policy;
using InitKind = Init;

struct ServedTensor {
  std::string name;
  PartPolicy policy = PartPolicy::node;
  bool persistent = false;
  int64_t first_global_row = 0;  // global id of local row 0
  std::unique_ptr<shm::SharedTensor> storage;

  DType dtype() const { return storage->dtype(); }
  int64_t num_rows() const { return storage->num_rows(); }
  size_t row_bytes() const { return storage->row_bytes(); }
  std::vector<int64_t> shape() const { return {storage->shape().begin(), storage->shape().end()}; }
};

class TensorTable {
 public:
  // `owner` creates segments; otherwise tensors are attached on first use.
  TensorTable(std::string job_id, int machine_id, bool owner, int64_t node_start, int64_t num_owned_nodes,
              int64_t edge_start, int64_t num_owned_edges,
              std::chrono::milliseconds attach_timeout = std::chrono::milliseconds(120000));
  // Owner: publishes the generation counter. Call once before serving.
  Status init();
  // Heterogeneous graphs: the homogeneous ids whose rows this machine holds for
  // a node tensor of that name ("paper/features": the machine's paper nodes;
  // node_tensor_range in common/part_config.h). Without it every node tensor
  // holds all the machine's nodes. Call before init.
  void set_node_rows(std::function<IdRange(const std::string&)> rows) { node_rows_ = std::move(rows); }
  // The same for edge tensors ("paper:cites:paper/features": the machine's edges
  // of that type; edge_tensor_range).
  void set_edge_rows(std::function<IdRange(const std::string&)> rows) { edge_rows_ = std::move(rows); }
  ~TensorTable();

  // Creates a tensor with its rows copied from `rows` (num_rows * row bytes), or
  // initialised per spec.init when `rows` is null. Owner only. `copied`, when
  // set, is called with each stretch of `rows` (16 MiB at most) once it is
  // copied: a server drops a mapped file's pages there, so that it does not
  // hold a tensor twice, even for a moment.
  using CopiedFn = std::function<void(const void*, size_t)>;
  Status add(const TensorSpec& spec, const void* rows, const CopiedFn& copied = {});
  // Collective DistTensor creation: ok(true) when created, ok(false) when it
  // already exists with the same dtype and shape, an error when it differs.
  Result<bool> create(const TensorSpec& spec);
  // Looks a tensor up; a non-owner attaches to the main server's segment first.
  // Shared ownership: a reply still being written keeps a deleted tensor alive.
  Result<std::shared_ptr<ServedTensor>> find(const std::string& name);
  Status remove(const std::string& name);
  std::vector<std::shared_ptr<const ServedTensor>> list();
  std::string segment_for(const std::string& name, PartPolicy policy) const;

 private:
  Result<bool> create_locked(const TensorSpec& spec, const void* rows, const CopiedFn& copied);

  // First global row and row count of a tensor of this name and policy on this machine.
  IdRange rows_of(const std::string& name, PartPolicy policy) const;

  std::function<IdRange(const std::string&)> node_rows_, edge_rows_;
  std::string job_id_;
  int machine_id_;
  bool owner_;
  int64_t node_start_, num_nodes_, edge_start_, num_edges_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<ServedTensor>> tensors_;
  // Owner: bumped on every delete. Others: compared with the cached value to
  // drop attachments to deleted segments.
  std::unique_ptr<shm::TensorGeneration> generation_;
  uint64_t cached_generation_ = 0;
  std::chrono::milliseconds attach_timeout_;
};

}  // namespace dgld::graph_server
