// The REST verbs and the watch stream over cpp-httplib.
#include "easyscale/operator/kube_client.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <poll.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/log.h"

namespace easyscale::op {

using nlohmann::json;

const Resource kPods{"", "v1", "pods", "Pod", true};
const Resource kNodes{"", "v1", "nodes", "Node", false};
const Resource kEvents{"", "v1", "events", "Event", true};
const Resource kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
const Resource kEasyScaleJobs{"easyscale.io", "v1alpha1", "easyscalejobs", "EasyScaleJob", true};
const Resource kSecrets{"", "v1", "secrets", "Secret", true};
const Resource kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};
const Resource kNetworkPolicies{"networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy",
                                true};

struct KubeClient::Target {
  bool https = true;
  std::string host;
  int port = 443;
  std::string basePath;  // a server URL may carry a path prefix
};

namespace {

// The Content-Type a JSON merge patch needs.
constexpr const char* kMergePatch = "application/merge-patch+json";

// client-go's period for a token file: half the time between kubelet's
// refresh of a projected token (at 80% of its life) and its expiry.
constexpr auto kTokenRereadPeriod = std::chrono::minutes(1);

constexpr int kMaxRetryAfter = 10;

// A 429 or 500-504 answer's Retry-After in whole seconds (client-go honours
// only those); nullopt for any other answer, or without a usable header.
std::optional<int> RetryAfterSeconds(const httplib::Response& r) {
  if (r.status != 429 && (r.status < 500 || r.status > 504)) return std::nullopt;
  int seconds = 0;
  if (!absl::SimpleAtoi(r.get_header_value("Retry-After"), &seconds) || seconds < 0) {
    return std::nullopt;
  }
  return std::min(seconds, 60);  // a wrong header must not park the controller
}

// An idle keep-alive connection has nothing to read unless the server closed
// it: kube-apiserver closes one idle for 90 s with a TLS close_notify, which
// httplib's own liveness check takes for data and reuses the connection.
// Go's transport notices the close at once and never reuses it; so do we.
bool ClosedWhileIdle(const httplib::ClientImpl& c) {
  const socket_t fd = c.socket();
  if (fd == INVALID_SOCKET) return false;  // httplib connects anew
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) != 0;
}

httplib::Headers RequestHeaders(const std::string& token) {
  httplib::Headers h = {{"Accept", "application/json"}};
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  return h;
}

StatusOr<std::unique_ptr<KubeClient::Target>> ParseServer(const std::string& server) {
  auto t = std::make_unique<KubeClient::Target>();
  std::string rest;
  if (server.rfind("https://", 0) == 0) {
    rest = server.substr(8);
  } else if (server.rfind("http://", 0) == 0) {
    t->https = false;
    t->port = 80;
    rest = server.substr(7);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("server: must start with https:// or http://, got \"", server, "\""));
  }
  const size_t slash = rest.find('/');
  std::string hostPort = rest.substr(0, slash);
  if (slash != std::string::npos) t->basePath = rest.substr(slash);
  while (!t->basePath.empty() && t->basePath.back() == '/') t->basePath.pop_back();
  size_t colon = hostPort.rfind(':');
  if (!hostPort.empty() && hostPort[0] == '[') {  // [v6]:port
    const size_t close = hostPort.find(']');
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("server: bad IPv6 host in \"", server, "\""));
    }
    t->host = hostPort.substr(1, close - 1);
    colon =
        hostPort.size() > close + 1 && hostPort[close + 1] == ':' ? close + 1 : std::string::npos;
  } else {
    t->host = hostPort.substr(0, colon);
  }
  if (colon != std::string::npos) {
    if (!absl::SimpleAtoi(hostPort.substr(colon + 1), &t->port) || t->port <= 0 ||
        t->port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("server: bad port in \"", server, "\""));
    }
  }
  if (t->host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("server: no host in \"", server, "\""));
  }
  return t;
}

X509_STORE* StoreFromPem(const std::string& pem) {
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, cert) == 1) ++added;
    X509_free(cert);
  }
  BIO_free(bio);
  if (added == 0) {
    X509_STORE_free(store);
    return nullptr;
  }
  return store;
}

std::string HttpErrorName(httplib::Error e) { return httplib::to_string(e); }

}  // namespace

Status ToStatus(int code, const std::string& body) {
  if (code >= 200 && code < 300) return absl::OkStatus();
  std::string message = body;
  std::string reason;
  json j = json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("message") && j["message"].is_string()) message = j["message"];
    if (j.contains("reason") && j["reason"].is_string()) reason = j["reason"];
  }
  const std::string text =
      absl::StrCat("HTTP ", code, reason.empty() ? "" : " ", reason, ": ", message);
  switch (code) {
    case 400:
    case 422:
      return absl::InvalidArgumentError(text);
    case 401:
      return absl::UnauthenticatedError(text);
    case 403:
      return absl::PermissionDeniedError(text);
    case 404:
      return absl::NotFoundError(text);
    case 409:
      return reason == "AlreadyExists" ? absl::AlreadyExistsError(text) : absl::AbortedError(text);
    case 410:
      return absl::OutOfRangeError(text);
    case 429:
      return absl::ResourceExhaustedError(text);
    case 504:
      return absl::DeadlineExceededError(text);
    default:
      return code >= 500 ? absl::UnavailableError(text) : absl::UnknownError(text);
  }
}

std::string ObjectKey(const json& obj) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  const json& m = obj["metadata"];
  const std::string ns = m.value("namespace", "");
  const std::string name = m.value("name", "");
  return ns.empty() ? name : ns + "/" + name;
}

std::string ResourceVersionOf(const json& obj) {
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  return obj["metadata"].value("resourceVersion", "");
}

std::string UrlEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string ResourcePath(const Resource& r, const std::string& ns, const std::string& name,
                         const std::string& subresource) {
  std::string p = r.group.empty() ? "/api/" + r.version : "/apis/" + r.group + "/" + r.version;
  if (r.namespaced && !ns.empty()) p += "/namespaces/" + ns;
  p += "/" + r.plural;
  if (!name.empty()) p += "/" + name;
  if (!subresource.empty()) p += "/" + subresource;
  return p;
}

void WatchCanceller::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (client_ != nullptr) client_->stop();
}

void WatchCanceller::Attach(httplib::ClientImpl* c) {
  std::lock_guard<std::mutex> lock(mu_);
  client_ = c;
  if (c != nullptr && cancelled_) c->stop();
}

StatusOr<std::unique_ptr<KubeClient>> KubeClient::Create(const KubeConfig& config) {
  ES_ASSIGN_OR_RETURN(std::unique_ptr<Target> target, ParseServer(config.server));
  if (target->https && !config.caPem.empty()) {
    X509_STORE* s = StoreFromPem(config.caPem);
    if (s == nullptr) {
      return absl::InvalidArgumentError("certificate-authority: no PEM certificate found");
    }
    X509_STORE_free(s);
  }
  if (!config.clientCertPem.empty() && !target->https) {
    return absl::InvalidArgumentError("client-certificate: needs an https:// server");
  }
  auto c = std::unique_ptr<KubeClient>(new KubeClient(config, std::move(target)));
  if (c->target_->https) {  // fail early on unreadable client credentials
    if (c->NewConnection() == nullptr) {
      return absl::InvalidArgumentError("client-certificate/client-key: not a valid PEM pair");
    }
  }
  return c;
}

KubeClient::KubeClient(KubeConfig config, std::unique_ptr<Target> target)
    : config_(std::move(config)),
      target_(std::move(target)),
      token_(config_.token),
      tokenReadAt_(std::chrono::steady_clock::now()) {}

KubeClient::~KubeClient() = default;

std::unique_ptr<httplib::ClientImpl> KubeClient::NewConnection() const {
  std::unique_ptr<httplib::ClientImpl> c;
  if (!target_->https) {
    c = std::make_unique<httplib::ClientImpl>(target_->host, target_->port);
  } else {
    std::unique_ptr<httplib::SSLClient> s;
    if (!config_.clientCertPem.empty()) {
      BIO* cb = BIO_new_mem_buf(config_.clientCertPem.data(),
                                static_cast<int>(config_.clientCertPem.size()));
      X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
      BIO_free(cb);
      BIO* kb = BIO_new_mem_buf(config_.clientKeyPem.data(),
                                static_cast<int>(config_.clientKeyPem.size()));
      EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
      BIO_free(kb);
      if (cert == nullptr || key == nullptr) {
        X509_free(cert);
        EVP_PKEY_free(key);
        return nullptr;
      }
      s = std::make_unique<httplib::SSLClient>(target_->host, target_->port, cert, key);
      X509_free(cert);  // the SSL context holds its own references
      EVP_PKEY_free(key);
    } else {
      s = std::make_unique<httplib::SSLClient>(target_->host, target_->port);
    }
    if (config_.insecureSkipTlsVerify) {
      s->enable_server_certificate_verification(false);
    } else {
      s->enable_server_certificate_verification(true);
      if (!config_.caPem.empty()) s->set_ca_cert_store(StoreFromPem(config_.caPem));
    }
    c = std::move(s);
  }
  c->set_connection_timeout(5, 0);
  c->set_read_timeout(30, 0);
  c->set_write_timeout(10, 0);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // small requests: no Nagle/delayed-ACK stalls
  return c;
}

std::unique_ptr<httplib::ClientImpl> KubeClient::TakeConnection() {
  {
    std::lock_guard<std::mutex> lock(poolMu_);
    while (!pool_.empty()) {
      auto c = std::move(pool_.back());
      pool_.pop_back();
      if (!ClosedWhileIdle(*c)) return c;
    }
  }
  return NewConnection();
}

void KubeClient::ReturnConnection(std::unique_ptr<httplib::ClientImpl> c) {
  std::lock_guard<std::mutex> lock(poolMu_);
  if (pool_.size() < 8) pool_.push_back(std::move(c));
}

std::string KubeClient::BearerToken(bool reread) {
  std::lock_guard<std::mutex> lock(tokenMu_);
  const auto now = std::chrono::steady_clock::now();
  if (config_.tokenFile.empty() || (!reread && now - tokenReadAt_ < kTokenRereadPeriod)) {
    return token_;
  }
  tokenReadAt_ = now;
  StatusOr<std::string> token = ReadTokenFile(config_.tokenFile);
  if (token.ok() && !token->empty()) {
    token_ = *std::move(token);
  } else {
    LogWarn("kube-client", "cannot read the token file again; keeping the last token",
            {{"path", config_.tokenFile},
             {"error", token.ok() ? "empty" : std::string(token.status().message())}});
  }
  return token_;
}

StatusOr<json> KubeClient::Call(const std::string& method, const std::string& path,
                                const json* body, const std::string& contentType) {
  std::unique_ptr<httplib::ClientImpl> c = TakeConnection();
  if (c == nullptr) return absl::InvalidArgumentError("client credentials: cannot load");
  const std::string full = target_->basePath + path;
  const std::string payload = body != nullptr ? body->dump() : std::string();
  const auto send = [&](const std::string& token) {
    const httplib::Headers headers = RequestHeaders(token);
    if (method == "GET") return c->Get(full, headers);
    if (method == "POST") return c->Post(full, headers, payload, contentType);
    if (method == "PUT") return c->Put(full, headers, payload, contentType);
    if (method == "PATCH") return c->Patch(full, headers, payload, contentType);
    return c->Delete(full, headers, payload, contentType);
  };
  const std::string token = BearerToken(/*reread=*/false);
  httplib::Result res = send(token);
  if (res && res->status == 401 && !config_.tokenFile.empty()) {
    // The token expired before the minute was up: kubelet has written a new
    // one by then. The server refused the request, so sending it again is safe.
    if (const std::string fresh = BearerToken(/*reread=*/true); fresh != token) res = send(fresh);
  }
  // API Priority and Fairness sheds load with 429 and a Retry-After, as does
  // a server that is starting (5xx): client-go waits that long and sends the
  // request again, at most 10 times; so do we (the server did not act on it).
  for (int retries = 0; res && retries < kMaxRetryAfter; ++retries) {
    const std::optional<int> wait = RetryAfterSeconds(*res);
    if (!wait) break;
    std::this_thread::sleep_for(std::chrono::seconds(*wait));
    res = send(BearerToken(/*reread=*/false));
  }
  if (!res) {
    return absl::UnavailableError(
        absl::StrCat(method, " ", path, ": ", HttpErrorName(res.error())));
  }
  const int code = res->status;
  std::string respBody = std::move(res->body);
  ReturnConnection(std::move(c));
  ES_RETURN_IF_ERROR(ToStatus(code, respBody));
  json j = json::parse(respBody, nullptr, false);
  if (j.is_discarded()) {
    return absl::UnavailableError(absl::StrCat(method, " ", path, ": response is not JSON"));
  }
  return j;
}

StatusOr<json> KubeClient::Get(const Resource& r, const std::string& ns, const std::string& name) {
  return Call("GET", ResourcePath(r, ns, name), nullptr, "");
}

StatusOr<json> KubeClient::List(const Resource& r, const std::string& ns, const ListOptions& o) {
  std::string q;
  if (!o.labelSelector.empty()) q += "&labelSelector=" + UrlEncode(o.labelSelector);
  if (!o.fieldSelector.empty()) q += "&fieldSelector=" + UrlEncode(o.fieldSelector);
  if (!q.empty()) q[0] = '?';
  return Call("GET", ResourcePath(r, ns) + q, nullptr, "");
}

StatusOr<json> KubeClient::Create(const Resource& r, const std::string& ns, const json& obj) {
  return Call("POST", ResourcePath(r, ns), &obj, "application/json");
}

StatusOr<json> KubeClient::Update(const Resource& r, const json& obj) {
  const json& m = obj.value("metadata", json::object());
  return Call("PUT", ResourcePath(r, m.value("namespace", ""), m.value("name", "")), &obj,
              "application/json");
}

StatusOr<json> KubeClient::UpdateStatus(const Resource& r, const json& obj) {
  const json& m = obj.value("metadata", json::object());
  return Call("PUT", ResourcePath(r, m.value("namespace", ""), m.value("name", ""), "status"), &obj,
              "application/json");
}

StatusOr<json> KubeClient::MergePatch(const Resource& r, const std::string& ns,
                                      const std::string& name, const json& patch, bool status) {
  return Call("PATCH", ResourcePath(r, ns, name, status ? "status" : ""), &patch, kMergePatch);
}

Status KubeClient::Delete(const Resource& r, const std::string& ns, const std::string& name,
                          int gracePeriodSeconds) {
  const std::string q =
      gracePeriodSeconds >= 0 ? absl::StrCat("?gracePeriodSeconds=", gracePeriodSeconds) : "";
  return Call("DELETE", ResourcePath(r, ns, name) + q, nullptr, "").status();
}

Status KubeClient::Watch(const Resource& r, const std::string& ns, const WatchOptions& o,
                         const std::function<bool(const WatchEvent&)>& onEvent,
                         WatchCanceller* canceller) {
  std::unique_ptr<httplib::ClientImpl> c = NewConnection();
  if (c == nullptr) return absl::InvalidArgumentError("client credentials: cannot load");
  c->set_keep_alive(false);
  c->set_read_timeout(o.timeoutSeconds + 30, 0);  // the server ends the stream first
  std::string q = "?watch=true";
  if (!o.resourceVersion.empty()) q += "&resourceVersion=" + UrlEncode(o.resourceVersion);
  if (o.allowBookmarks) q += "&allowWatchBookmarks=true";
  q += absl::StrCat("&timeoutSeconds=", o.timeoutSeconds);
  if (!o.labelSelector.empty()) q += "&labelSelector=" + UrlEncode(o.labelSelector);
  if (!o.fieldSelector.empty()) q += "&fieldSelector=" + UrlEncode(o.fieldSelector);
  const std::string path = target_->basePath + ResourcePath(r, ns) + q;

  if (canceller != nullptr) canceller->Attach(c.get());
  int code = 0;
  std::string errorBody;
  std::string pending;  // bytes after the last newline: an event not yet complete
  Status streamStatus;
  bool stoppedByHandler = false;
  httplib::Result res = c->Get(
      path, RequestHeaders(BearerToken(/*reread=*/false)),
      [&](const httplib::Response& resp) {
        code = resp.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (code != 200) {
          errorBody.append(data, n);
          return errorBody.size() < (1u << 20);
        }
        pending.append(data, n);
        size_t start = 0;
        for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
          const std::string line = pending.substr(start, nl - start);
          if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
          json j = json::parse(line, nullptr, false);
          if (!j.is_object() || !j.contains("type") || !j["type"].is_string() ||
              !j.contains("object") || !j["object"].is_object()) {
            streamStatus = absl::UnavailableError("watch: malformed event line");
            return false;
          }
          WatchEvent ev{j["type"].get<std::string>(), std::move(j["object"])};
          if (ev.type == "ERROR") {  // a Status object; 410 means the RV expired
            streamStatus = ToStatus(ev.object.value("code", 500), ev.object.dump());
            return false;
          }
          if (!onEvent(ev)) {
            stoppedByHandler = true;
            return false;
          }
        }
        pending.erase(0, start);
        return true;
      });
  if (canceller != nullptr) canceller->Attach(nullptr);
  if (canceller != nullptr && canceller->cancelled())
    return absl::CancelledError("watch cancelled");
  if (!streamStatus.ok()) return streamStatus;
  if (stoppedByHandler) return absl::OkStatus();
  if (code != 0 && code != 200) return ToStatus(code, errorBody);
  if (!res) {
    return absl::UnavailableError(
        absl::StrCat("watch ", r.plural, ": ", HttpErrorName(res.error())));
  }
  return absl::OkStatus();
}

}  // namespace easyscale::op
