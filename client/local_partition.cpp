#include "client/local_partition.h"

#include <atomic>
#include <vector>

#include "common/shm/shared_segment.h"

namespace dgld::client {


Result<std::unique_ptr<LocalPartition>> LocalPartition::open(const PartitionConfig& config, int machine_id,
                                                             std::string job_id,
                                                             std::chrono::milliseconds attach_timeout) {
  if (machine_id < 0 || machine_id >= config.num_parts) {
    return invalid_argument("machine " + std::to_string(machine_id) + " has no partition (num_parts=" +
                            std::to_string(config.num_parts) + ")");
  }
  std::unique_ptr<LocalPartition> lp(new LocalPartition());
  DGLD_ASSIGN_OR_RETURN(lp->part_, open_partition(config, machine_id, false));
  lp->machine_id_ = machine_id;
  lp->job_id_ = std::move(job_id);
  lp->node_range_ = config.node_map[machine_id];
  lp->edge_range_ = config.edge_map[machine_id];
  lp->config_ = config;
  lp->attach_timeout_ = attach_timeout;
  return lp;
}

Result<LocalPartition::Attached> LocalPartition::find(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!generation_) {
    auto g = TensorGeneration::attach(job_id_, machine_id_, shm::Deadline::clock::now() + attach_timeout_);
    if (!g.is_ok()) return g.status().with_context("machine " + std::to_string(machine_id_) + " tensors");
    generation_ = std::make_unique<TensorGeneration>(std::move(*g));
    cached_generation_ = generation_->load();
  }
  // A tensor was deleted since: every attachment may be stale.
  if (uint64_t now = generation_->load(); now != cached_generation_) {
    tensors_.clear();
    cached_generation_ = now;
  }
  if (auto it = tensors_.find(name); it != tensors_.end()) return it->second;
  // A tensor from the partition files is published at server start: wait for it.
  // A DistTensor created at run time exists already or not at all: node, then edge.
  std::vector<std::pair<bool, std::chrono::milliseconds>> tries;
  if (part_->node_tensor(name)) tries = {{false, attach_timeout_}};
  else if (part_->edge_tensor(name)) tries = {{true, attach_timeout_}};
  else tries = {{false, std::chrono::milliseconds(0)}, {true, std::chrono::milliseconds(0)}};
  Status last;
  for (const auto& [edge, wait] : tries) {
    const std::string segment = tensor_segment(job_id_, machine_id_, name, edge);
    auto t = shm::SharedTensor::attach(segment, false, shm::Deadline::clock::now() + wait);
    if (t.is_ok()) {
      const IdRange rows = edge ? edge_tensor_range(config_, machine_id_, name)
                                : node_tensor_range(config_, machine_id_, name);
      Attached a{std::make_shared<shm::SharedTensor>(std::move(*t)), segment, rows.start};
      return tensors_.emplace(name, std::move(a)).first->second;
    }
    last = t.status();
  }
  return not_found("tensor '" + name + "' of machine " + std::to_string(machine_id_) +
                   " is not in shared memory: " + last.message());
}

Result<shm::SharedTensor*> LocalPartition::tensor(const std::string& name) {
  DGLD_ASSIGN_OR_RETURN(Attached a, find(name));
  return a.tensor.get();
}

Result<std::shared_ptr<shm::SharedTensor>> LocalPartition::shared_tensor(const std::string& name,
                                                                         const std::string& segment_name) {
  DGLD_ASSIGN_OR_RETURN(Attached a, find(name));
  if (a.segment != segment_name) {
    return not_found("tensor '" + name + "' of machine " + std::to_string(machine_id_) + " is in segment " +
                     a.segment + ", not " + segment_name);
  }
  return a.tensor;
}

Status LocalPartition::gather(const std::string& name, std::span<const int64_t> global_ids, void* out) {
  DGLD_ASSIGN_OR_RETURN(Attached a, find(name));
  std::vector<int64_t> local(global_ids.size());
  for (size_t i = 0; i < global_ids.size(); ++i) local[i] = global_ids[i] - a.first_row;
  return a.tensor->gather_rows(local, out);
}

}  // namespace dgld::client
