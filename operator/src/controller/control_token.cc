#include "controller/control_token.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/sha256.h"

namespace easyscale::op {

StatusOr<ControlTokens> ControlTokens::FromKey(std::string key) {
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.size() < 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("control key of ", key.size(), " bytes; want at least 32"));
  }
  return ControlTokens(std::move(key));
}

StatusOr<ControlTokens> ControlTokens::FromFile(const std::string& path) {
  StatusOr<std::string> key = ReadFile(path, 4096);  // a key, not a file of data
  if (!key.ok()) {
    return absl::InvalidArgumentError("--control-key-file: " + std::string(key.status().message()));
  }
  StatusOr<ControlTokens> tokens = FromKey(std::move(*key));
  if (!tokens.ok()) {
    return absl::InvalidArgumentError("--control-key-file " + path + ": " +
                                      std::string(tokens.status().message()));
  }
  return tokens;
}

StatusOr<ControlTokens> ControlTokens::FromSecret(KubeClient& client, const std::string& ns,
                                                  const std::string& name) {
  StatusOr<nlohmann::json> secret = client.Get(kSecrets, ns, name);
  if (absl::IsNotFound(secret.status())) {
    std::string key(48, '\0');
    RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size()));
    const nlohmann::json object = {{"apiVersion", "v1"},
                                   {"kind", "Secret"},
                                   {"metadata", {{"name", name}, {"namespace", ns}}},
                                   {"type", "Opaque"},
                                   {"data", {{"key", absl::Base64Escape(key)}}}};
    secret = client.Create(kSecrets, ns, object);
    if (absl::IsAlreadyExists(secret.status())) secret = client.Get(kSecrets, ns, name);
  }
  if (!secret.ok()) {
    return absl::UnavailableError("--control-key-secret " + ns + "/" + name + ": " +
                                  std::string(secret.status().message()));
  }
  const nlohmann::json& data = (*secret).value("data", nlohmann::json::object());
  std::string key;
  if (!data.contains("key") || !data["key"].is_string() ||
      !absl::Base64Unescape(data["key"].get<std::string>(), &key)) {
    return absl::InvalidArgumentError("--control-key-secret " + ns + "/" + name +
                                      ": data.key is missing or not base64");
  }
  return FromKey(std::move(key));
}

ControlTokens ControlTokens::Random() {
  std::string key(32, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size()));
  return ControlTokens(std::move(key));
}

std::string ControlTokens::TokenFor(const std::string& jobUid) const {
  const std::string message = "easyscale.io/control-token/v1:" + jobUid;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &size);
  return ToHex(mac, size);
}

std::string ControlSecretName(const std::string& job, const std::string& uid) {
  return job + "-control-" + uid.substr(0, 8);
}

}  // namespace easyscale::op
