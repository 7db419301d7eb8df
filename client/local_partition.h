#pragma once
// The partition of the machine a client runs on, read with no request at all:
// the graph structure from the (memory-mapped, page-cache shared) partition
// files, and every node/edge tensor from the POSIX shared memory its main
// graph-server published. Trainers and samplers use this for local rows and
// local sampling; remote rows go through ServerConnection.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "common/ip_config.h"
#include "common/part_config.h"
#include "common/partition/partition.h"
#include "common/shm/naming.h"
#include "common/shm/shared_segment.h"
#include "common/shm/shared_tensor.h"
#include "common/status.h"

namespace dgld::client {

using shm::default_job_id;
using shm::tensor_segment;
using shm::TensorGeneration;

class LocalPartition {
 public:
  // Maps partition `machine_id` of `config` and remembers where its tensors
  // live. Tensors are attached on first use, waiting up to `attach_timeout`
  // for the main server to publish them.
  static Result<std::unique_ptr<LocalPartition>> open(const PartitionConfig& config, int machine_id,
                                                      std::string job_id,
                                                      std::chrono::milliseconds attach_timeout);

  const MappedPartition& graph() const { return *part_; }
  int machine_id() const { return machine_id_; }
  const IdRange& node_range() const { return node_range_; }
  const IdRange& edge_range() const { return edge_range_; }

  // The shared tensor `name` (node tensors first, then edge tensors).
  Result<shm::SharedTensor*> tensor(const std::string& name);
  // The same mapping, shared: a DistTensor of this machine opened by name
  // maps its segment once per process (two mappings of a 40 MiB feature
  // tensor counted twice in the trainer's RSS). not_found when the tensor's
  // segment is not `segment_name` (another job's, or none).
  Result<std::shared_ptr<shm::SharedTensor>> shared_tensor(const std::string& name, const std::string& segment_name);
  // out[k] = row of global id ids[k]; every id must be owned by this machine.
  Status gather(const std::string& name, std::span<const int64_t> global_ids, void* out);

 private:
  LocalPartition() = default;
  std::unique_ptr<MappedPartition> part_;
  int machine_id_ = 0;
  std::string job_id_;
  IdRange node_range_, edge_range_;
  PartitionConfig config_;  // for the rows of per-type tensors (node_tensor_range)
  std::chrono::milliseconds attach_timeout_{0};
  std::mutex mu_;
  struct Attached {
    // Shared: a caller keeps its mapping after a deleted tensor cleared the map.
    std::shared_ptr<shm::SharedTensor> tensor;
    std::string segment;
    int64_t first_row = 0;
  };
  std::map<std::string, Attached> tensors_;
  std::unique_ptr<TensorGeneration> generation_;
  uint64_t cached_generation_ = 0;
  Result<Attached> find(const std::string& name);
};

}  // namespace dgld::client
