// File: easyscale/worker/philox.h
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"),
// a counter-based generator: the value at (key, counter) needs no state, so a
// CPU loop and a GPU thread per element draw the same numbers. Each EST keeps
// only a counter per stream in its context.
#pragma once

#include <array>
#include <cstdint>

#include "easyscale/worker/detmath.h"

namespace easyscale {

struct PhiloxKey {
  uint32_t k0 = 0, k1 = 0;
};

ES_HD void Philox4x32(PhiloxKey key, uint64_t counter_lo, uint64_t counter_hi, uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = key.k0, k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// A float in [0, 1) from the top 24 bits: exact, identical on every device.
ES_HD float UniformFromBits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// Derives a key from a seed and a stream id (SplitMix64 finaliser).
inline PhiloxKey DeriveKey(uint64_t seed, uint64_t stream) {
  uint64_t z =
      seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return {static_cast<uint32_t>(z), static_cast<uint32_t>(z >> 32)};
}

// A host-side stream: a key and a counter that advances by one per 4 words.
class PhiloxStream {
 public:
  PhiloxStream() = default;
  PhiloxStream(PhiloxKey key, uint64_t counter) : key_(key), counter_(counter) {}
  uint32_t NextU32() {
    if (index_ == 4) {
      Philox4x32(key_, counter_++, 0, buf_);
      index_ = 0;
    }
    return buf_[index_++];
  }
  float NextUniform() { return UniformFromBits(NextU32()); }
  // Uniform integer in [0, n) by rejection, so no modulo bias.
  uint32_t NextBelow(uint32_t n) {
    const uint32_t limit = UINT32_MAX - UINT32_MAX % n;
    uint32_t v;
    do {
      v = NextU32();
    } while (v >= limit);
    return v % n;
  }
  // The counter to save: blocks already drawn (a partly used block is dropped,
  // so a restored stream continues at a block boundary, as the original does
  // after Sync()).
  uint64_t counter() const { return counter_; }
  // Drops the rest of the current block so the state is exactly `counter()`.
  void Sync() { index_ = 4; }
  PhiloxKey key() const { return key_; }

 private:
  PhiloxKey key_;
  uint64_t counter_ = 0;
  uint32_t buf_[4] = {0, 0, 0, 0};
  int index_ = 4;
};

}  // namespace easyscale
