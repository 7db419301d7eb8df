#pragma once
// IdMap: an open-addressing hash map from int64 ids (any value, negatives
// included) to dense int32 indices given in insertion order. It relabels the
// nodes of a block and de-duplicates requested ids; about 3x faster than
// std::unordered_map for that job (no node allocations, one probe line).
// Linear probing over a power-of-two table kept at most half full; ids()
// lists the unique ids in insertion order.
// With a direct range (set_direct_range), ids in [0, range) skip the hash:
// their index is read from an array indexed by the id (8 bytes per id of the
// range, kept across clear()), which a block's relabelling of a graph's node
// ids does in about half the hash's time; other ids still go to the hash.
// At most 2^31 - 1 ids. Not thread-safe; one map per thread.

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace dgld {

class IdMap {
 public:
  explicit IdMap(size_t expected_ids = 0) { reserve(expected_ids); }

  // Makes room for `n` ids in total without rehashing. On an empty map it
  // also shrinks the table in use to fit `n`, for cache locality.
  void reserve(size_t n);
  // Forgets all ids in O(1), keeping the memory for reuse.
  void clear();
  // Ids in [0, range) are looked up in a direct array from now on (range 0:
  // none; at most kMaxDirectRange, a larger one is taken as 0). The map must
  // be empty. Keeps the array when the range is unchanged.
  void set_direct_range(int64_t range);
  int64_t direct_range() const { return static_cast<int64_t>(direct_range_); }
  size_t direct_bytes() const { return direct_.capacity() * sizeof(uint64_t); }
  // The largest direct range (8 MiB of array).
  static constexpr int64_t kMaxDirectRange = int64_t{1} << 20;

  // Index of `id`, inserting it (with index size()) if new; second is true
  // when it was inserted.
  std::pair<int32_t, bool> insert_or_find(int64_t id);
  // Index of `id`, or -1 when absent.
  int32_t find(int64_t id) const;
  bool contains(int64_t id) const { return find(id) >= 0; }

  size_t size() const { return ids_.size(); }
  bool empty() const { return ids_.empty(); }
  // Unique ids in insertion order: ids()[find(x)] == x.
  const std::vector<int64_t>& ids() const { return ids_; }
  // Moves the ids out and clears the map.
  std::vector<int64_t> release_ids();
  // Bytes the map holds (its table, direct array and ids, used or not).
  size_t memory_bytes() const {
    return slots_.capacity() * sizeof(Slot) + ids_.capacity() * sizeof(int64_t) + direct_.capacity() * sizeof(uint64_t);
  }

 private:
  struct Slot {
    int64_t key;
    int32_t value;
    uint32_t stamp;  // the slot is live iff stamp == stamp_
  };
  size_t slot_of(int64_t id) const {
    // Fibonacci hashing: the high bits of the product depend on every key bit.
    return static_cast<size_t>((static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void grow();
  void use_capacity(size_t capacity);
  std::pair<int32_t, bool> insert_direct(int64_t id) {
    uint64_t& e = direct_[static_cast<size_t>(id)];
    if ((e >> 32) == stamp_) return {static_cast<int32_t>(static_cast<uint32_t>(e)), false};
    const auto index = static_cast<int32_t>(ids_.size());
    e = (static_cast<uint64_t>(stamp_) << 32) | static_cast<uint32_t>(index);
    ids_.push_back(id);
    return {index, true};
  }

  // The table is slots_[0, mask_ + 1); slots_ may be longer after a clear().
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  uint32_t stamp_ = 1;  // never 0: a fresh slot or entry (stamp 0) is free
  size_t hashed_ = 0;   // ids in the table (those outside the direct range)
  std::vector<int64_t> ids_;
  // direct_[id] for id < direct_range_: stamp << 32 | index, live iff its stamp is stamp_.
  std::vector<uint64_t> direct_;
  uint64_t direct_range_ = 0;
};

// De-duplicates `ids`: unique[inverse[i]] == ids[i], unique in order of first
// appearance.
struct UniqueInverse {
  std::vector<int64_t> unique;
  std::vector<int32_t> inverse;
};
UniqueInverse unique_with_inverse(std::span<const int64_t> ids);

// ---- inline hot paths ----

inline std::pair<int32_t, bool> IdMap::insert_or_find(int64_t id) {
  if (static_cast<uint64_t>(id) < direct_range_) return insert_direct(id);
  if ((hashed_ + 1) * 2 > mask_ + 1) grow();
  for (size_t s = slot_of(id);; s = (s + 1) & mask_) {
    Slot& slot = slots_[s];
    if (slot.stamp != stamp_) {
      slot = Slot{id, static_cast<int32_t>(ids_.size()), stamp_};
      ids_.push_back(id);
      ++hashed_;
      return {slot.value, true};
    }
    if (slot.key == id) return {slot.value, false};
  }
}

inline int32_t IdMap::find(int64_t id) const {
  if (static_cast<uint64_t>(id) < direct_range_) {
    const uint64_t e = direct_[static_cast<size_t>(id)];
    return (e >> 32) == stamp_ ? static_cast<int32_t>(static_cast<uint32_t>(e)) : -1;
  }
  if (hashed_ == 0) return -1;
  for (size_t s = slot_of(id);; s = (s + 1) & mask_) {
    const Slot& slot = slots_[s];
    if (slot.stamp != stamp_) return -1;
    if (slot.key == id) return slot.value;
  }
}

}  // namespace dgld
