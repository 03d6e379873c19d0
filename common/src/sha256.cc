#include "easyscale/common/sha256.h"

#include <openssl/evp.h>

#include "easyscale/common/checks.h"

namespace easyscale {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
  bool finished = false;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  ES_CHECK(impl_->ctx != nullptr) << "EVP_MD_CTX_new";
  ES_CHECK(EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) == 1) << "EVP_DigestInit_ex";
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::Update(const void* data, size_t size) {
  ES_CHECK(!impl_->finished) << "Sha256 updated after Digest()";
  ES_CHECK(EVP_DigestUpdate(impl_->ctx, data, size) == 1) << "EVP_DigestUpdate";
}

std::array<uint8_t, 32> Sha256::Digest() {
  ES_CHECK(!impl_->finished) << "Sha256::Digest called twice";
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  ES_CHECK(EVP_DigestFinal_ex(impl_->ctx, out.data(), &len) == 1 && len == out.size());
  impl_->finished = true;
  return out;
}

std::string Sha256::HexDigest() {
  const auto d = Digest();
  return ToHex(d.data(), d.size());
}

std::string Sha256Hex(const void* data, size_t size) {
  Sha256 h;
  h.Update(data, size);
  return h.HexDigest();
}

std::string ToHex(const uint8_t* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

}  // namespace easyscale
