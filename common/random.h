#pragma once
// dgld's one random generator: splitmix64 sequences, the same numbers on
// every platform and whatever the thread count. StreamRng(rng_seed, key)
// starts an independent sequence for one key (a seed node, a layer, an
// epoch), so any split of the work across threads draws the same numbers;
// SplitMix64(state) is the plain sequence from a state; seeded_shuffle is
// the one seeded Fisher-Yates shuffle (loaders, standalone training, link
// splits).

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace dgld {

// The splitmix64 finaliser: a bijective 64-bit mixer.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A seed derived from (seed, key), for nested streams (per layer, per batch).
inline uint64_t derive_seed(uint64_t seed, uint64_t key) {
  return mix64(seed ^ mix64(key + 0x9e3779b97f4a7c15ull));
}

// splitmix64 of a single value: mix64 of x plus the golden-ratio increment
// (what the generators key their streams with).
inline uint64_t splitmix64(uint64_t x) { return mix64(x + 0x9e3779b97f4a7c15ull); }

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}

  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ull;
    return mix64(state_);
  }
  // Uniform in [0, n), n > 0, without bias (Lemire's multiply-and-reject).
  uint64_t below(uint64_t n) {
    __extension__ typedef unsigned __int128 u128;
    u128 m = static_cast<u128>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<u128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Uniform in [0, n) by one multiply, without the rejection step: bias
  // below n / 2^64, for the graph generators' large draws.
  uint64_t scaled(uint64_t n) {
    __extension__ typedef unsigned __int128 u128;
    return static_cast<uint64_t>((static_cast<u128>(next()) * n) >> 64);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// The stream of one key under rng_seed.
class StreamRng : public SplitMix64 {
 public:
  StreamRng(uint64_t rng_seed, uint64_t key) : SplitMix64(derive_seed(rng_seed, key)) {}
};

// The graph generators' streams: (seed, stream, index) -> an independent
// sequence, e.g. one per node and purpose, so a generated graph does not
// depend on the thread count. below() is the one-multiply draw (scaled).
class GeneratorStream : public SplitMix64 {
 public:
  GeneratorStream(uint64_t seed, uint64_t stream, uint64_t index)
      : SplitMix64(splitmix64(splitmix64(seed ^ splitmix64(stream)) ^ index) + 0x9e3779b97f4a7c15ull) {}
  uint64_t below(uint64_t n) { return scaled(n); }
};

// Fisher-Yates: every permutation of `items` equally likely, from `rng`.
template <typename T>
void seeded_shuffle(std::span<T> items, SplitMix64& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng.below(i)]);
}

}  // namespace dgld
