// File: easyscale/operator/kube_config.h
//
// Where the API server is and how to authenticate, read from the pod's
// service account (in-cluster) or from a kubeconfig file.
//   StatusOr<KubeConfig> c = LoadKubeConfig(flags.kubeconfig);  // flag, KUBECONFIG,
//                                                               // in-cluster, ~/.kube/config
#pragma once

#include <string>

#include "easyscale/common/status.h"

namespace easyscale::op {

struct KubeConfig {
  std::string server;         // https://host:port (or http:// for tests)
  std::string caPem;          // trusted CA bundle; empty = system roots
  std::string clientCertPem;  // client certificate authentication
  std::string clientKeyPem;
  std::string token;  // bearer token authentication
  // Where `token` came from, when a file: kubelet rewrites a service account's
  // token before it expires, so the client reads it again (see KubeClient).
  std::string tokenFile;
  bool insecureSkipTlsVerify = false;
  std::string defaultNamespace = "default";
};

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

// Token, ca.crt and namespace from `dir`, server from KUBERNETES_SERVICE_HOST/PORT.
StatusOr<KubeConfig> LoadInClusterConfig(const std::string& dir = kServiceAccountDir);
// The current context of a kubeconfig (or `context` when set). Relative file
// paths are resolved against the kubeconfig's folder. Errors name the field.
StatusOr<KubeConfig> LoadKubeconfigFile(const std::string& path, const std::string& context = "");
// client-go's order: `flagPath`, else the first KUBECONFIG entry, else
// in-cluster, else ~/.kube/config.
StatusOr<KubeConfig> LoadKubeConfig(const std::string& flagPath);

}  // namespace easyscale::op
