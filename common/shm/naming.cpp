#include "common/shm/naming.h"

#include <atomic>

namespace dgld::shm {

std::string default_job_id(const PartitionConfig& config, const MachineAddress& machine) {
  return config.graph_name + "-" + std::to_string(machine.base_port);
}

std::string tensor_segment(const std::string& job_id, int machine_id, const std::string& name, bool edge) {
  return segment_name(job_id, machine_id, (edge ? "e." : "n.") + name);
}

namespace {
std::string generation_segment(const std::string& job_id, int machine_id) {
  return segment_name(job_id, machine_id, "generation");
}
}  // namespace

Result<TensorGeneration> TensorGeneration::create(const std::string& job_id, int machine_id) {
  DGLD_ASSIGN_OR_RETURN(auto seg, SharedSegment::create(generation_segment(job_id, machine_id), 64));
  DGLD_RETURN_IF_ERROR(seg.mark_ready());
  return TensorGeneration(std::move(seg));
}

Result<TensorGeneration> TensorGeneration::attach(const std::string& job_id, int machine_id, Deadline deadline) {
  DGLD_ASSIGN_OR_RETURN(auto seg, SharedSegment::attach(generation_segment(job_id, machine_id), false, deadline));
  return TensorGeneration(std::move(seg));
}

uint64_t TensorGeneration::load() const {
  return std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(const_cast<void*>(seg_.data())))
      .load(std::memory_order_acquire);
}

void TensorGeneration::bump() {
  std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(seg_.mutable_data())).fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace dgld::shm
