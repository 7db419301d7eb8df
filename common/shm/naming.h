#pragma once
// How a job's shared memory is named, which graph-servers (that create the
// segments) and clients (that attach to them) must agree on: the job id, the
// segment of each tensor, and the tensor generation counter.

#include <cstdint>
#include <string>

#include "common/ip_config.h"
#include "common/part_config.h"
#include "common/shm/shared_segment.h"
#include "common/status.h"

namespace dgld::shm {

// The job id that names a machine's shared-memory segments unless given
// explicitly: "<graph_name>-<base_port of the machine>". Servers and clients
// must agree on it, so both call this.
std::string default_job_id(const PartitionConfig& config, const MachineAddress& machine);
// Segment of tensor `name` of machine `machine_id` ("n." node / "e." edge).
std::string tensor_segment(const std::string& job_id, int machine_id, const std::string& name, bool edge);

// The tensor generation of a machine: a counter in its own small segment that
// the main server bumps whenever it deletes a tensor. Backup servers and
// co-located clients compare it with the value they cached and drop their
// attachments when it moved, so a tensor deleted and created again under the
// same name is never served from the old segment.
class TensorGeneration {
 public:
  // Main server: creates the counter (0). Others: attach, waiting until `deadline`.
  static Result<TensorGeneration> create(const std::string& job_id, int machine_id);
  static Result<TensorGeneration> attach(const std::string& job_id, int machine_id, Deadline deadline);
  uint64_t load() const;
  void bump();

 private:
  explicit TensorGeneration(SharedSegment seg) : seg_(std::move(seg)) {}
  SharedSegment seg_;
};

}  // namespace dgld::shm
