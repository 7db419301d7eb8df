// The fuzz targets without libFuzzer: a main() that runs a target over every
// file of its corpus, then over deterministic pseudo-random mutations of those
// files (bit flips, interesting integers, cut, duplicated and spliced ranges),
// so every build (gcc included) runs each target in `meson test`.
//
//   fuzz_replay_<target> [--mutations N] [--seconds S] [--seed X] PATH...
//
// PATH is a file or a directory (all files under it, in name order). Mutated
// inputs are derived from (seed, index) only, so a failure is reproducible;
// the input is written to fuzz-replay-failure.bin before each run when
// --save-input is given. Exits non-zero on the first crash (abort from a
// failed invariant, a sanitizer report) like libFuzzer does.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

using Bytes = std::vector<uint8_t>;

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

constexpr size_t kMaxInput = 1 << 16;

const int64_t kInteresting[] = {0, 1, -1, 2, 7, 8, 16, 32, 64, 127, 128, 255, 256, 1024, 4096, 65535, 65536,
                                0x7fffffff, -0x7fffffffll - 1, 0xffffffffll, 0x100000000ll,
                                0x7fffffffffffffffll, static_cast<int64_t>(0x8000000000000000ull),
                                1ll << 40, 1ll << 62};
const char kTextBytes[] = " \t\n\r#.:,;[]{}\"'-0123456789aeAE\\/";

void mutate_once(Bytes& b, const std::vector<Bytes>& corpus, Rng& r) {
  switch (r.below(9)) {
    case 0:  // flip a bit
      if (!b.empty()) b[r.below(b.size())] ^= static_cast<uint8_t>(1u << r.below(8));
      break;
    case 1:  // an interesting byte
      if (!b.empty()) {
        const uint8_t v[] = {0, 1, 0x7f, 0x80, 0xff, static_cast<uint8_t>(r.next())};
        b[r.below(b.size())] = v[r.below(sizeof(v))];
      }
      break;
    case 2: {  // an interesting 2/4/8-byte little-endian integer
      const size_t w = size_t{2} << r.below(3);
      if (b.size() < w) break;
      int64_t v = kInteresting[r.below(std::size(kInteresting))];
      // Near an interesting value, wrapping around (in uint64_t: INT64_MAX + 2
      // as int64_t arithmetic is undefined, UBSan's finding).
      if (r.below(4) == 0) v = static_cast<int64_t>(static_cast<uint64_t>(v) + r.below(5) - 2);
      const size_t at = r.below(b.size() - w + 1);
      for (size_t i = 0; i < w; ++i) b[at + i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
      break;
    }
    case 3: {  // erase a range
      if (b.empty()) break;
      const size_t at = r.below(b.size());
      const size_t n = 1 + r.below(std::min<size_t>(b.size() - at, 64));
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
      break;
    }
    case 4: {  // duplicate a range
      if (b.empty()) break;
      const size_t at = r.below(b.size());
      const size_t n = 1 + r.below(std::min<size_t>(b.size() - at, 64));
      Bytes piece(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(r.below(b.size() + 1)), piece.begin(), piece.end());
      break;
    }
    case 5:  // truncate
      b.resize(r.below(b.size() + 1));
      break;
    case 6: {  // splice with another corpus input
      const Bytes& o = corpus[r.below(corpus.size())];
      const size_t keep = r.below(b.size() + 1), from = r.below(o.size() + 1);
      b.resize(keep);
      b.insert(b.end(), o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
      break;
    }
    case 7:  // a byte that matters to text formats
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(r.below(b.size() + 1)),
               static_cast<uint8_t>(kTextBytes[r.below(sizeof(kTextBytes) - 1)]));
      break;
    default: {  // random bytes
      const size_t n = 1 + r.below(8);
      const size_t at = r.below(b.size() + 1);
      for (size_t i = 0; i < n; ++i) b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(r.next()));
      break;
    }
  }
  if (b.size() > kMaxInput) b.resize(kMaxInput);
}

void collect(const std::filesystem::path& p, std::vector<std::filesystem::path>& out) {
  if (std::filesystem::is_directory(p)) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(p)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  } else {
    out.push_back(p);
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t mutations = 3000;
  double seconds = 10;
  uint64_t seed = 1;
  bool save = false;
  std::vector<std::filesystem::path> paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc) mutations = std::stoull(argv[++i]);
    else if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (a == "--save-input") save = true;
    else collect(a, paths);
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<Bytes> corpus;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (corpus.empty()) {
    std::cerr << "fuzz replay: no corpus files given\n";
    return 2;
  }
  auto run = [&](const Bytes& b) {
    if (save) std::ofstream("fuzz-replay-failure.bin", std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    // A copy of exactly the input's size, so ASan sees reads past its end.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[b.size() ? b.size() : 1]);
    if (!b.empty()) std::memcpy(copy.get(), b.data(), b.size());
    LLVMFuzzerTestOneInput(copy.get(), b.size());
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < corpus.size(); ++i) run(corpus[i]);
  size_t done = 0;
  for (; done < mutations; ++done) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) break;
    Rng r{seed * 0x100000001b3ull + done};
    Bytes b = corpus[r.below(corpus.size())];
    const size_t steps = 1 + r.below(4);
    for (size_t s = 0; s < steps; ++s) mutate_once(b, corpus, r);
    run(b);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "fuzz replay: " << corpus.size() << " corpus inputs and " << done << " mutated inputs in " << took
            << " s, no crash\n";
  return 0;
}
