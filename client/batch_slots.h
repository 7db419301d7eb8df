#pragma once
// Mini-batches handed from a sampler-worker to its trainer through shared
// memory instead of the socket (SampleBatch.reply_slot, docs/formats.md).
//
// The trainer owns the slots: BatchSlots creates a few segments per worker
// (segment_name(job, machine, "batch.<tag>.<slot>.g<generation>"), kind
// kBatchSlotKind) and names a free one in each SampleBatch request. The
// worker (SlotMappings) writes the whole batch into it at the offsets of
// batch_slot_layout() and replies with the sizes only. The trainer copies the
// small block arrays out and keeps the feature rows where they are: the
// batch's rows point into the slot, which is named in a request again only
// once the last holder of those rows lets go. A batch that does not fit is
// sent in the reply as before, and the trainer replaces the slot with a
// larger one for the next batch. Slots outlive the BatchSlots object while
// a batch still holds one.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/shm/shared_segment.h"
#include "common/status.h"

namespace dgld::client {

inline constexpr uint32_t kBatchSlotKind = 0x48435442;  // "BTCH"

// The arrays of one batch and where each starts in a slot (64-byte aligned,
// in this order): per block dst_nodes, src_nodes, indptr, indices, eids
// (int64), and with edge types etypes (int32); the feature rows (float32,
// num_input x feature_dim); the labels (int64, one per seed, or none); then,
// for a heterogeneous batch, per typed feature its positions in the input
// nodes (int64, count) and its rows (float32, count x dim).
struct BatchShape {
  struct BlockShape {
    int64_t num_dst = 0, num_src = 0, num_edges = 0;
  };
  struct TypedShape {
    int ntype = -1;
    int64_t count = 0, dim = 0;
  };
  std::vector<BlockShape> blocks;  // input layer first
  int64_t feature_dim = 0;
  bool has_labels = false;
  bool etypes = false;             // every block carries edge types
  std::vector<TypedShape> typed;   // heterogeneous batches' feature rows
};
struct BatchLayout {
  struct BlockOffsets {
    size_t dst_nodes = 0, src_nodes = 0, indptr = 0, indices = 0, eids = 0, etypes = 0;
  };
  struct TypedOffsets {
    size_t index = 0, rows = 0;
  };
  std::vector<BlockOffsets> blocks;
  size_t features = 0, labels = 0;
  std::vector<TypedOffsets> typed;
  size_t total = 0;  // bytes the batch needs
};
// invalid_argument when a size is negative or the blocks do not chain
// (blocks[i].num_dst == blocks[i+1].num_src).
Result<BatchLayout> batch_slot_layout(const BatchShape& shape);

class BatchSlots : public std::enable_shared_from_this<BatchSlots> {
 public:
  // `count` slots of `initial_bytes` each, named after `tag` (unique per
  // loader and worker on the machine). Errors name the segment.
  static Result<std::shared_ptr<BatchSlots>> create(const std::string& job_id, int machine_id,
                                                    const std::string& tag, int count, size_t initial_bytes);

  // A slot reserved for one request. Returned to the pool when destroyed,
  // unless hold() took it over.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    const std::string& name() const { return name_; }
    const std::byte* data() const { return data_; }
    size_t size() const { return size_; }
    // Asks for a slot of at least `bytes` next time (a batch needed that
    // much); every other slot grows to it too before it is handed out again.
    void grow_to(size_t bytes) { grow_to_ = bytes; }
    // Keeps the slot busy for as long as the returned pointer (aliasing the
    // bytes at `offset`) or a copy of it lives.
    std::shared_ptr<const std::byte> hold(size_t offset) &&;

   private:
    friend class BatchSlots;
    Lease(std::shared_ptr<BatchSlots> owner, int index, std::string name, const std::byte* data, size_t size);
    std::shared_ptr<BatchSlots> owner_;
    int index_ = -1;
    std::string name_;
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
    size_t grow_to_ = 0;
  };

  // A free slot, or nullopt when every slot holds a batch (the request then
  // goes without one).
  std::optional<Lease> acquire();
  int count() const;
  int busy() const;

 private:
  BatchSlots(std::string job_id, int machine_id, std::string tag) : job_id_(std::move(job_id)), machine_id_(machine_id), tag_(std::move(tag)) {}
  Status replace(int index, size_t bytes);  // under mu_
  void release(int index, size_t grow_to);

  struct Slot {
    std::unique_ptr<shm::SharedSegment> segment;
    uint32_t generation = 0;
    bool busy = false;
    size_t grow_to = 0;
  };
  std::string job_id_;
  int machine_id_ = 0;
  std::string tag_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  size_t floor_ = 0;  // the size a batch needed (with room): a free slot below it grows before it is handed out
};

// The worker's side: slots attached by name, writable, cached. A slot name
// seen again maps the same segment; a new generation of a slot (the same
// name up to ".g") replaces the old mapping. Thread-safe.
class SlotMappings {
 public:
  // The segment, attached on first use. invalid_argument for a name that is
  // not a batch slot (its kind); the attach errors otherwise.
  Result<std::shared_ptr<shm::SharedSegment>> writable(const std::string& name);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<shm::SharedSegment>> by_slot_;  // key: the name up to ".g"
};

}  // namespace dgld::client
