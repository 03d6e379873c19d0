// File: easyscale/operator/kube_client.h
//
// A small Kubernetes REST client over HTTP(S): the verbs a controller needs on
// any resource, list then watch with resourceVersion and bookmarks, and the
// status subresource. Objects are plain JSON, as on the wire.
//   auto c = KubeClient::Create(config);
//   StatusOr<json> pods = (*c)->List(kPods, "default", {.labelSelector = "app=x"});
// API errors map onto Status codes (see ToStatus): 404 NotFound, 409 Aborted
// (conflict) or AlreadyExists, 410 OutOfRange (resourceVersion expired),
// 400/422 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied,
// 429 ResourceExhausted, 5xx and connection errors Unavailable.
// A token from a file (a pod's service account) is read again once a minute
// and after a 401, as kubelet rewrites it before it expires.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/operator/kube_config.h"

namespace httplib {
class ClientImpl;
}

namespace easyscale::op {

// Where a resource lives in the REST tree.
struct Resource {
  std::string group;  // "" = core
  std::string version;
  std::string plural;
  std::string kind;
  bool namespaced = true;
  std::string apiVersion() const { return group.empty() ? version : group + "/" + version; }
};

extern const Resource kPods;
extern const Resource kNodes;
extern const Resource kEvents;
extern const Resource kLeases;
extern const Resource kEasyScaleJobs;
extern const Resource kSecrets;  // data values are base64, as on the wire
extern const Resource kNetworkPolicies;
extern const Resource kConfigMaps;

struct ListOptions {
  std::string labelSelector;
  std::string fieldSelector;
};

struct WatchOptions {
  std::string resourceVersion;
  std::string labelSelector;
  std::string fieldSelector;
  bool allowBookmarks = true;
  int timeoutSeconds = 300;  // the server ends the stream after this
};

struct WatchEvent {
  std::string type;  // ADDED | MODIFIED | DELETED | BOOKMARK | ERROR
  nlohmann::json object;
};

// Cancels a running Watch from another thread.
class WatchCanceller {
 public:
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }

 private:
  friend class KubeClient;
  void Attach(httplib::ClientImpl* c);
  std::mutex mu_;
  httplib::ClientImpl* client_ = nullptr;
  std::atomic<bool> cancelled_{false};
};

// Maps an HTTP status and a Kubernetes Status body onto a Status.
Status ToStatus(int httpCode, const std::string& body);

// "ns/name" or "name" for cluster-scoped objects.
std::string ObjectKey(const nlohmann::json& obj);
std::string ResourceVersionOf(const nlohmann::json& obj);

class KubeClient {
 public:
  static StatusOr<std::unique_ptr<KubeClient>> Create(const KubeConfig& config);
  ~KubeClient();

  const KubeConfig& config() const { return config_; }
  struct Target;  // scheme, host, port and path prefix of the server

  StatusOr<nlohmann::json> Get(const Resource& r, const std::string& ns, const std::string& name);
  // `ns` empty lists all namespaces. The result is the List object.
  StatusOr<nlohmann::json> List(const Resource& r, const std::string& ns,
                                const ListOptions& o = {});
  StatusOr<nlohmann::json> Create(const Resource& r, const std::string& ns,
                                  const nlohmann::json& obj);
  // PUT of the whole object; metadata.resourceVersion makes it conditional.
  StatusOr<nlohmann::json> Update(const Resource& r, const nlohmann::json& obj);
  StatusOr<nlohmann::json> UpdateStatus(const Resource& r, const nlohmann::json& obj);
  // JSON merge patch (RFC 7386), on the object or its status subresource.
  StatusOr<nlohmann::json> MergePatch(const Resource& r, const std::string& ns,
                                      const std::string& name, const nlohmann::json& patch,
                                      bool status = false);
  // `gracePeriodSeconds` < 0 leaves the object's own grace period (pods).
  Status Delete(const Resource& r, const std::string& ns, const std::string& name,
                int gracePeriodSeconds = -1);

  // Streams watch events to `onEvent` until the server closes the stream
  // (OK), `onEvent` returns false (OK), `canceller` fires (Cancelled) or an
  // error (410 gives OutOfRange).
  Status Watch(const Resource& r, const std::string& ns, const WatchOptions& o,
               const std::function<bool(const WatchEvent&)>& onEvent,
               WatchCanceller* canceller = nullptr);

 private:
  KubeClient(KubeConfig config, std::unique_ptr<Target> target);
  std::unique_ptr<httplib::ClientImpl> NewConnection() const;
  std::unique_ptr<httplib::ClientImpl> TakeConnection();
  void ReturnConnection(std::unique_ptr<httplib::ClientImpl> c);
  StatusOr<nlohmann::json> Call(const std::string& method, const std::string& path,
                                const nlohmann::json* body, const std::string& contentType);
  std::string BearerToken(bool reread);

  KubeConfig config_;
  std::unique_ptr<Target> target_;
  std::mutex poolMu_;
  std::vector<std::unique_ptr<httplib::ClientImpl>> pool_;
  std::mutex tokenMu_;
  std::string token_;
  std::chrono::steady_clock::time_point tokenReadAt_;
};

// Path of a collection or an object: /api/v1/namespaces/ns/pods[/name][/status].
std::string ResourcePath(const Resource& r, const std::string& ns, const std::string& name = "",
                         const std::string& subresource = "");
// Percent-encodes a query value.
std::string UrlEncode(const std::string& s);

}  // namespace easyscale::op

namespace easyscale::op {

// Writes the status subresource of `obj` after `mutate` changed it; on 409
// Conflict re-reads the object and re-applies `mutate`, up to `attempts` times.
StatusOr<nlohmann::json> UpdateStatusWithRetry(KubeClient& client, const Resource& r,
                                               nlohmann::json obj,
                                               const std::function<void(nlohmann::json&)>& mutate,
                                               int attempts = 5);
// The same for the main resource (metadata and spec, e.g. finalizers).
StatusOr<nlohmann::json> UpdateWithRetry(KubeClient& client, const Resource& r, nlohmann::json obj,
                                         const std::function<void(nlohmann::json&)>& mutate,
                                         int attempts = 5);

}  // namespace easyscale::op
