#include "common/sampling/id_map.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace dgld {

namespace {
constexpr size_t kMaxIds = 0x7fffffff;
constexpr size_t kMinSlots = 16;
}  // namespace

void IdMap::reserve(size_t n) {
  if (n > kMaxIds) throw std::length_error("IdMap: more than 2^31 - 1 ids");
  ids_.reserve(n);
  // With a direct range the table holds only the ids outside it: it grows
  // when they come.
  if (direct_range_ > 0) return;
  const size_t want = std::bit_ceil(std::max(kMinSlots, n * 2));
  if (ids_.empty()) {
    use_capacity(want);
  } else {
    while (mask_ + 1 < want) grow();
  }
}

void IdMap::clear() {
  ids_.clear();
  hashed_ = 0;
  if (++stamp_ == 0) {  // wrapped: every old stamp could look live again
    for (Slot& s : slots_) s.stamp = 0;
    std::fill(direct_.begin(), direct_.end(), uint64_t{0});
    stamp_ = 1;
  }
}

void IdMap::set_direct_range(int64_t range) {
  if (!ids_.empty()) throw std::logic_error("IdMap::set_direct_range on a map that holds ids");
  if (range <= 0 || range > kMaxDirectRange) range = 0;
  if (static_cast<uint64_t>(range) == direct_range_) return;
  direct_range_ = static_cast<uint64_t>(range);
  // Entries of stamp 0 are free whatever stamp_ is (it is never 0).
  if (range == 0) {
    std::vector<uint64_t>().swap(direct_);
  } else {
    direct_.assign(static_cast<size_t>(range), uint64_t{0});
  }
}

std::vector<int64_t> IdMap::release_ids() {
  std::vector<int64_t> out = std::move(ids_);
  ids_ = {};
  clear();
  return out;
}

// Points the table at slots_[0, capacity); the map must be empty.
void IdMap::use_capacity(size_t capacity) {
  if (slots_.size() < capacity) slots_.assign(capacity, Slot{0, 0, 0});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
}

// Doubles the table (first use: kMinSlots) and re-inserts the ids.
void IdMap::grow() {
  const size_t capacity = slots_.empty() ? kMinSlots : (mask_ + 1) * 2;
  if (capacity / 2 > kMaxIds + 1) throw std::length_error("IdMap: more than 2^31 - 1 ids");
  // Fresh slots (stamp 0) are free; stamp_ stays, as the direct entries use it.
  slots_.assign(capacity, Slot{0, 0, 0});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (static_cast<uint64_t>(ids_[i]) < direct_range_) continue;
    size_t s = slot_of(ids_[i]);
    while (slots_[s].stamp == stamp_) s = (s + 1) & mask_;
    slots_[s] = Slot{ids_[i], static_cast<int32_t>(i), stamp_};
  }
}

UniqueInverse unique_with_inverse(std::span<const int64_t> ids) {
  UniqueInverse out;
  IdMap map(ids.size());
  out.inverse.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) out.inverse[i] = map.insert_or_find(ids[i]).first;
  out.unique = map.release_ids();
  return out;
}

}  // namespace dgld
