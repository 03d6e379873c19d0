// File: operator/src/controller/control_token.h
//
// Per-job control tokens: HMAC-SHA256 of the job's UID under the operator's
// key (a Secret both replicas mount), so any replica can check a worker's
// token without storing or reading one, and a re-created job of the same name
// (another UID) gets another token. The operator hands each job's token to its
// pods through a Secret it creates (ControlSecretName) and owns.
#pragma once

#include <string>

#include "easyscale/common/status.h"
#include "easyscale/operator/kube_client.h"

namespace easyscale::op {

class ControlTokens {
 public:
  // The key's bytes; at least 32.
  static StatusOr<ControlTokens> FromKey(std::string key);
  // Reads the key from `path` (the mounted Secret); errors name the flag.
  static StatusOr<ControlTokens> FromFile(const std::string& path);
  // The key in Secret `name` of namespace `ns` (data.key); the first replica
  // to find none creates it with a random key, the others read that one.
  static StatusOr<ControlTokens> FromSecret(KubeClient& client, const std::string& ns,
                                            const std::string& name);
  // A random key: tokens change with the process (one replica, or tests).
  static ControlTokens Random();

  std::string TokenFor(const std::string& jobUid) const;  // 64 hex

 private:
  explicit ControlTokens(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

// "<job>-control-<first 8 of the UID>": one per incarnation of the job.
std::string ControlSecretName(const std::string& job, const std::string& uid);
inline constexpr const char* kControlTokenKey = "token";
inline constexpr const char* kControlTokenEnv = "EASYSCALE_CONTROL_TOKEN";

}  // namespace easyscale::op
