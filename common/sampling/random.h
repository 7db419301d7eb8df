#pragma once
// Counter-style random streams for sampling: StreamRng(rng_seed, key) starts
// an independent splitmix64 sequence for one key (a seed node, a layer), so
// any split of the work across threads draws the same numbers.

#include <cstdint>

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

class StreamRng {
 public:
  StreamRng(uint64_t rng_seed, uint64_t key) : state_(derive_seed(rng_seed, key)) {}

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
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace dgld
