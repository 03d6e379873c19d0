// File: easyscale/common/sha256.h
//
// Incremental SHA-256 (OpenSSL EVP underneath).
//   Sha256 h; h.Update(bytes, n); std::string hex = h.HexDigest();
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace easyscale {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> Digest();
  std::string HexDigest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string Sha256Hex(const void* data, size_t size);
std::string ToHex(const uint8_t* data, size_t size);

}  // namespace easyscale
