#include "client/batch_slots.h"

#include <fmt/format.h>

#include "common/logging.h"

namespace dgld::client {

namespace {

constexpr size_t kAlign = 64;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Bytes of a slot asked to hold `bytes`: a quarter more, so that batches a
// little larger than the largest seen so far still fit, in whole MiB.
size_t slot_bytes_for(size_t bytes) {
  const size_t want = bytes + bytes / 4;
  return (want + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);
}

std::string slot_key(const std::string& name) {
  const auto g = name.rfind(".g");
  return g == std::string::npos ? name : name.substr(0, g);
}

}  // namespace

Result<BatchLayout> batch_slot_layout(const BatchShape& shape) {
  if (shape.blocks.empty()) return invalid_argument("a batch needs at least one block");
  if (shape.feature_dim < 0) return invalid_argument(fmt::format("feature_dim {} < 0", shape.feature_dim));
  BatchLayout l;
  size_t at = 0;
  auto take = [&](int64_t count, size_t elem) {
    const size_t off = at;
    at = align_up(at + static_cast<size_t>(count) * elem);
    return off;
  };
  for (size_t i = 0; i < shape.blocks.size(); ++i) {
    const auto& b = shape.blocks[i];
    if (b.num_dst < 0 || b.num_src < b.num_dst || b.num_edges < 0) {
      return invalid_argument(fmt::format("block {} has {} dst, {} src and {} edges", i, b.num_dst, b.num_src,
                                          b.num_edges));
    }
    if (i + 1 < shape.blocks.size() && b.num_dst != shape.blocks[i + 1].num_src) {
      return invalid_argument(fmt::format("block {} has {} dst nodes but block {} has {} src nodes", i, b.num_dst,
                                          i + 1, shape.blocks[i + 1].num_src));
    }
    BatchLayout::BlockOffsets o;
    o.dst_nodes = take(b.num_dst, 8);
    o.src_nodes = take(b.num_src, 8);
    o.indptr = take(b.num_dst + 1, 8);
    o.indices = take(b.num_edges, 8);
    o.eids = take(b.num_edges, 8);
    if (shape.etypes) o.etypes = take(b.num_edges, sizeof(int32_t));
    l.blocks.push_back(o);
  }
  l.features = take(shape.blocks.front().num_src * shape.feature_dim, sizeof(float));
  l.labels = take(shape.has_labels ? shape.blocks.back().num_dst : 0, 8);
  for (const auto& t : shape.typed) {
    if (t.ntype < 0 || t.count < 0 || t.dim < 0 || t.count > shape.blocks.front().num_src) {
      return invalid_argument(fmt::format("typed rows of node type {}: {} rows of {} for {} input nodes", t.ntype,
                                          t.count, t.dim, shape.blocks.front().num_src));
    }
    BatchLayout::TypedOffsets o;
    o.index = take(t.count, 8);
    o.rows = take(t.count * t.dim, sizeof(float));
    l.typed.push_back(o);
  }
  l.total = at;
  return l;
}

// ---------------------------------------------------------------- BatchSlots

Result<std::shared_ptr<BatchSlots>> BatchSlots::create(const std::string& job_id, int machine_id,
                                                       const std::string& tag, int count, size_t initial_bytes) {
  if (count < 1) return invalid_argument("BatchSlots: count must be >= 1");
  std::shared_ptr<BatchSlots> s(new BatchSlots(job_id, machine_id, tag));
  s->slots_.resize(static_cast<size_t>(count));
  std::lock_guard<std::mutex> lock(s->mu_);
  for (int i = 0; i < count; ++i) DGLD_RETURN_IF_ERROR(s->replace(i, initial_bytes));
  return s;
}

Status BatchSlots::replace(int index, size_t bytes) {
  Slot& slot = slots_[static_cast<size_t>(index)];
  const std::string name = shm::segment_name(
      job_id_, machine_id_, fmt::format("batch.{}.{}.g{}", tag_, index, slot.generation + 1));
  shm::SegmentOptions so;
  so.kind = kBatchSlotKind;
  DGLD_ASSIGN_OR_RETURN(auto seg, shm::SharedSegment::create(name, slot_bytes_for(bytes), so));
  seg.populate();  // the trainer reads every batch from it: map it once, not a fault per page
  DGLD_RETURN_IF_ERROR(seg.mark_ready());
  slot.segment = std::make_unique<shm::SharedSegment>(std::move(seg));  // the old one is unlinked
  ++slot.generation;
  return Status::ok();
}

std::optional<BatchSlots::Lease> BatchSlots::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.busy || !s.segment) continue;
    if (s.segment->size() < floor_) {
      // Another slot was too small for a batch: this one would be too (the
      // batch would come through the socket, and the slot be replaced then).
      if (Status st = replace(static_cast<int>(i), floor_); !st.is_ok()) {
        logger("sampler")->warn("batch slot {} could not grow to {} bytes: {}", s.segment->name(), floor_,
                                st.to_string());
      }
    }
    s.busy = true;
    return Lease(shared_from_this(), static_cast<int>(i), s.segment->name(),
                 static_cast<const std::byte*>(s.segment->data()), s.segment->size());
  }
  return std::nullopt;
}

int BatchSlots::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(slots_.size());
}

int BatchSlots::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& s : slots_) n += s.busy ? 1 : 0;
  return n;
}

void BatchSlots::release(int index, size_t grow_to) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[static_cast<size_t>(index)];
  s.busy = false;
  if (grow_to > 0) grow_to += grow_to / 8;  // room for the next batches, which vary in size
  floor_ = std::max(floor_, grow_to);
  if (s.segment && grow_to > s.segment->size()) {
    if (Status st = replace(index, grow_to); !st.is_ok()) {
      // Keep the old slot: batches that do not fit keep coming in the reply.
      logger("sampler")->warn("batch slot {} could not grow to {} bytes: {}", s.segment->name(), grow_to,
                              st.to_string());
    }
  }
}

BatchSlots::Lease::Lease(std::shared_ptr<BatchSlots> owner, int index, std::string name, const std::byte* data,
                         size_t size)
    : owner_(std::move(owner)), index_(index), name_(std::move(name)), data_(data), size_(size) {}

BatchSlots::Lease::Lease(Lease&& o) noexcept
    : owner_(std::move(o.owner_)), index_(o.index_), name_(std::move(o.name_)), data_(o.data_), size_(o.size_),
      grow_to_(o.grow_to_) {
  o.owner_.reset();
}

BatchSlots::Lease::~Lease() {
  if (owner_) owner_->release(index_, grow_to_);
}

std::shared_ptr<const std::byte> BatchSlots::Lease::hold(size_t offset) && {
  // The control block owns the lease: the slot is released when the last
  // copy of the pointer goes.
  auto holder = std::make_shared<Lease>(std::move(*this));
  return std::shared_ptr<const std::byte>(holder, holder->data_ + offset);
}

// ---------------------------------------------------------------- SlotMappings

Result<std::shared_ptr<shm::SharedSegment>> SlotMappings::writable(const std::string& name) {
  const std::string key = slot_key(name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_slot_.find(key);
    if (it != by_slot_.end() && it->second->name() == name) return it->second;
  }
  DGLD_RETURN_IF_ERROR(shm::validate_segment_name(name));
  DGLD_ASSIGN_OR_RETURN(auto seg, shm::SharedSegment::attach(name, /*read_only=*/false,
                                                             std::chrono::steady_clock::now()));
  if (seg.kind() != kBatchSlotKind) {
    return invalid_argument(fmt::format("shared-memory segment {} is not a batch slot", name));
  }
  seg.populate();  // every batch is written into it
  auto shared = std::make_shared<shm::SharedSegment>(std::move(seg));
  std::lock_guard<std::mutex> lock(mu_);
  by_slot_[key] = shared;  // a previous generation's mapping goes once its writers are done
  return shared;
}

}  // namespace dgld::client
