// Loads KubeConfig from the service account or a kubeconfig file.
#include "easyscale/operator/kube_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"

namespace easyscale::op {
namespace {

namespace fs = std::filesystem;

// ReadFile's bounds: a kubeconfig may embed certificates of many clusters;
// a token, a CA bundle, a client certificate or key is small.
constexpr size_t kMaxKubeconfigBytes = 16 << 20;
constexpr size_t kMaxCredentialBytes = 1 << 20;

// A named entry of a kubeconfig list (clusters, users, contexts).
StatusOr<YAML::Node> FindNamed(const YAML::Node& root, const std::string& list,
                               const std::string& name, const std::string& inner) {
  const YAML::Node items = root[list];
  if (!items || !items.IsSequence()) {
    return absl::InvalidArgumentError(absl::StrCat(list, ": missing or not a list"));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const YAML::Node item = items[i];
    if (item["name"] && item["name"].as<std::string>() == name) {
      if (!item[inner] || !item[inner].IsMap()) {
        return absl::InvalidArgumentError(
            absl::StrCat(list, "[", name, "].", inner, ": missing or not a map"));
      }
      return item[inner];
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(list, ": no entry named \"", name, "\""));
}

std::string Scalar(const YAML::Node& n, const char* key) {
  return n[key] && n[key].IsScalar() ? n[key].as<std::string>() : std::string();
}

// Reads `<key>-data` (base64) or `<key>` (a file path, relative to `dir`).
StatusOr<std::string> DataOrFile(const YAML::Node& n, const std::string& key,
                                 const std::string& field, const fs::path& dir) {
  const std::string data = Scalar(n, (key + "-data").c_str());
  if (!data.empty()) {
    std::string decoded;
    if (!absl::Base64Unescape(data, &decoded)) {
      return absl::InvalidArgumentError(absl::StrCat(field, "-data: not valid base64"));
    }
    return decoded;
  }
  const std::string file = Scalar(n, key.c_str());
  if (file.empty()) return std::string();
  fs::path p(file);
  if (p.is_relative()) p = dir / p;
  StatusOr<std::string> content = ReadFile(p.string(), kMaxCredentialBytes);
  if (!content.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": cannot read ", p.string(), ": ", content.status().message()));
  }
  return content;
}

}  // namespace

StatusOr<KubeConfig> LoadInClusterConfig(const std::string& dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return absl::FailedPreconditionError(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  KubeConfig c;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6 literal
  c.server = absl::StrCat("https://", h, ":", port);
  c.tokenFile = dir + "/token";
  StatusOr<std::string> token = ReadTokenFile(c.tokenFile);
  if (!token.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster config: token: ", token.status().message()));
  }
  c.token = *token;
  StatusOr<std::string> ca = ReadFile(dir + "/ca.crt", kMaxCredentialBytes);
  if (!ca.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster config: ca.crt: ", ca.status().message()));
  }
  c.caPem = *ca;
  StatusOr<std::string> ns = ReadFile(dir + "/namespace", kMaxCredentialBytes);
  if (ns.ok() && !absl::StripAsciiWhitespace(*ns).empty()) {
    c.defaultNamespace = std::string(absl::StripAsciiWhitespace(*ns));
  }
  return c;
}

StatusOr<KubeConfig> LoadKubeconfigFile(const std::string& path, const std::string& context) {
  StatusOr<std::string> text = ReadFile(path, kMaxKubeconfigBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", path, ": ", text.status().message()));
  }
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": ", e.what()));
  }
  auto fail = [&](const Status& s) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": ", s.message()));
  };
  if (!root.IsMap()) return fail(absl::InvalidArgumentError("not a YAML map"));
  std::string ctxName = context.empty() ? Scalar(root, "current-context") : context;
  if (ctxName.empty()) return fail(absl::InvalidArgumentError("current-context: not set"));
  StatusOr<YAML::Node> ctx = FindNamed(root, "contexts", ctxName, "context");
  if (!ctx.ok()) return fail(ctx.status());
  const std::string clusterName = Scalar(*ctx, "cluster");
  if (clusterName.empty()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("contexts[", ctxName, "].context.cluster: not set")));
  }
  StatusOr<YAML::Node> cluster = FindNamed(root, "clusters", clusterName, "cluster");
  if (!cluster.ok()) return fail(cluster.status());
  const fs::path dir = fs::path(path).parent_path();
  const std::string cprefix = absl::StrCat("clusters[", clusterName, "].cluster.");

  KubeConfig c;
  c.server = Scalar(*cluster, "server");
  if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat(cprefix, "server: must be an http(s):// URL, got \"", c.server, "\"")));
  }
  c.insecureSkipTlsVerify = Scalar(*cluster, "insecure-skip-tls-verify") == "true";
  StatusOr<std::string> ca =
      DataOrFile(*cluster, "certificate-authority", cprefix + "certificate-authority", dir);
  if (!ca.ok()) return fail(ca.status());
  c.caPem = *ca;
  if (!Scalar(*ctx, "namespace").empty()) c.defaultNamespace = Scalar(*ctx, "namespace");

  const std::string userName = Scalar(*ctx, "user");
  if (!userName.empty()) {
    StatusOr<YAML::Node> user = FindNamed(root, "users", userName, "user");
    if (!user.ok()) return fail(user.status());
    const std::string uprefix = absl::StrCat("users[", userName, "].user.");
    c.token = Scalar(*user, "token");
    const std::string tokenFile = Scalar(*user, "tokenFile");
    if (c.token.empty() && !tokenFile.empty()) {
      fs::path p(tokenFile);
      if (p.is_relative()) p = dir / p;
      StatusOr<std::string> t = ReadTokenFile(p.string());
      if (!t.ok()) {
        return fail(
            absl::InvalidArgumentError(absl::StrCat(uprefix, "tokenFile: ", t.status().message())));
      }
      c.token = *t;
      c.tokenFile = p.string();
    }
    StatusOr<std::string> cert =
        DataOrFile(*user, "client-certificate", uprefix + "client-certificate", dir);
    if (!cert.ok()) return fail(cert.status());
    StatusOr<std::string> key = DataOrFile(*user, "client-key", uprefix + "client-key", dir);
    if (!key.ok()) return fail(key.status());
    if (cert->empty() != key->empty()) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat(uprefix, "client-certificate and client-key: set both or neither")));
    }
    c.clientCertPem = *cert;
    c.clientKeyPem = *key;
  }
  return c;
}

StatusOr<KubeConfig> LoadKubeConfig(const std::string& flagPath) {
  if (!flagPath.empty()) return LoadKubeconfigFile(flagPath);
  const char* env = std::getenv("KUBECONFIG");
  if (env != nullptr && *env != '\0') {
    for (absl::string_view p : absl::StrSplit(env, ':', absl::SkipEmpty())) {
      if (fs::exists(std::string(p))) return LoadKubeconfigFile(std::string(p));
    }
    return absl::InvalidArgumentError(absl::StrCat("KUBECONFIG=", env, ": no such file"));
  }
  if (std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) return LoadInClusterConfig();
  const char* home = std::getenv("HOME");
  if (home != nullptr && fs::exists(fs::path(home) / ".kube/config")) {
    return LoadKubeconfigFile((fs::path(home) / ".kube/config").string());
  }
  return absl::FailedPreconditionError(
      "no Kubernetes config: pass --kubeconfig, set KUBECONFIG, or run in a pod");
}

}  // namespace easyscale::op
