// File: operator/src/testing/test_apiserver.h (test code: the easyscale::test_apiserver target)
//
// An in-process stand-in for kube-apiserver, for tests: the REST tree of pods,
// nodes, events, leases and easyscalejobs with kube-apiserver's wire behaviour
// (list/watch framing, resourceVersion, bookmarks, WatchList, 404/409/410/422
// Status objects, custom resources pruned, defaulted and validated by their
// CRD (fieldValidation, Warning headers, CEL rules), the status subresource,
// label and field selectors, dry run, merge and JSON patches, finalizers,
// graceful termination of bound pods,
// garbage collection of owned objects or their orphaning, /version, legacy
// discovery and OpenAPI v3 for kubectl), over HTTP or HTTPS on 127.0.0.1 (or
// the address it is told), plus
// fault injection. tests/operator/CONFORMANCE.md says how real clients fare.
//   auto s = TestApiServer::Start({.tls = true});
//   KubeConfig c = (*s)->ClientConfig();       // trusts the server's own CA
//   (*s)->FailNextRequests(3, 500);
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "easyscale/common/status.h"
#include "easyscale/operator/kube_config.h"

namespace easyscale::op::testing {

class ObjectStore;

struct TestApiServerOptions {
  bool tls = false;   // HTTPS with a self-signed certificate for 127.0.0.1
  std::string token;  // when set, every request needs "Authorization: Bearer <token>"
  int port = 0;       // 0 picks a free port
  // Where it listens; the certificate names it too. Another address than
  // 127.0.0.1 lets pods on a pod network reach it, as pods reach kube-apiserver.
  std::string address = "127.0.0.1";
  int bookmarkIntervalMs = 1000;
  // A keep-alive connection idle this long is closed (kube-apiserver: 90 s).
  int keepAliveTimeoutSeconds = 5;
  // Open watches allowed at once; one more is answered 429. Each holds a
  // thread, and other requests have threads of their own besides.
  int maxWatches = 256;
  size_t compactionWindow = 100000;  // change events kept for watches to resume from
  // kube-apiserver answers a watch from an expired resourceVersion with an
  // ERROR event (code 410) on a 200 stream; true answers HTTP 410 instead.
  bool goneAsHttpStatus = false;
  // EasyScaleJobs are pruned, defaulted and validated by the CRD of crds/
  // (422 with kube's causes); false stores what the schema refuses (as objects
  // stored under an older, looser CRD), to test the operator's own
  // validation. Status writes are validated either way.
  bool validateJobSpecs = true;
  // Writes without fieldValidation get Strict (unknown fields are 400)
  // instead of kube's default Warn (pruned, with a Warning header): the
  // operator's tests set it, so that a field the operator writes and the CRD
  // does not declare fails its write instead of vanishing.
  bool strictFieldValidation = false;
};

class TestApiServer {
 public:
  static StatusOr<std::unique_ptr<TestApiServer>> Start(const TestApiServerOptions& o);
  ~TestApiServer();

  std::string url() const;
  int port() const;
  const std::string& caPem() const;
  KubeConfig ClientConfig() const;
  // A kubeconfig with the CA as certificate-authority-data and the token.
  Status WriteKubeconfig(const std::string& path) const;

  // From now on only `token` is accepted, as when a service account's token
  // expires and kubelet has written the pod a new one.
  void SetToken(const std::string& token);
  // The next `k` requests (of any kind) fail with `httpCode` (500, 429, ...).
  void FailNextRequests(int k, int httpCode);
  // Ends every open watch stream abruptly, as a lost connection would.
  void DropWatches();
  // While held, watch streams of `plural` deliver no changes (a lagging
  // informer); on release they catch up.
  void HoldWatches(const std::string& plural, bool held);
  void SetCompactionWindow(size_t events);
  void Compact();
  int64_t resourceVersion() const;
  int64_t watchRequests() const;
  int64_t listRequests() const;

  ObjectStore& store();

  struct Impl;

 private:
  explicit TestApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A self-signed certificate (EC P-256) for `commonName` with IP SANs 127.0.0.1
// and `address`, and DNS SAN localhost; PEM text.
struct SelfSignedCert {
  std::string certPem;
  std::string keyPem;
};
StatusOr<SelfSignedCert> MakeSelfSignedCert(const std::string& commonName,
                                            const std::string& address = "127.0.0.1");

}  // namespace easyscale::op::testing
