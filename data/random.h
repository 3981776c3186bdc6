// Counter-based random numbers that are the same on every platform and
// standard library (std:: distributions are implementation-defined), so the
// data a run sees is a pure function of its seeds.
//
// Not thread-safe (a Rng is a small value; give each thread its own).
//
//   Rng rng(MixSeeds(seed, sample_index));
//   int64_t i = rng.Uniform(100);   // 0 <= i < 100
#ifndef HLAB_DATA_RANDOM_H_
#define HLAB_DATA_RANDOM_H_

#include <cstdint>

namespace hlab::data {

// SplitMix64 finalizer: a bijective 64-bit mix.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

inline uint64_t MixSeeds(uint64_t a, uint64_t b) {
  return Mix64(Mix64(a) ^ (b + 0x632BE59BD9B4E019ULL));
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0. Multiply-shift: bias below 2^-40 for the n
  // used here.
  int64_t Uniform(int64_t n) {
    return static_cast<int64_t>(
        (static_cast<unsigned __int128>(Next()) * static_cast<uint64_t>(n)) >>
        64);
  }
  // Uniform in [0, 1) with 53 bits.
  double UniformReal() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace hlab::data

#endif  // HLAB_DATA_RANDOM_H_
