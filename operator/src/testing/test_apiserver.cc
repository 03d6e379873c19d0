// The HTTP face of the test API server: routing, Status objects, watch
// streams, authentication and fault injection.
#include "easyscale/operator/test_apiserver.h"

#include <httplib.h>
#include <openssl/pem.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/log.h"
#include "object_store.h"
#include "selectors.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

// Answers an error the way kube-apiserver does: a metav1.Status object.
void SendStatus(httplib::Response& res, int code, const std::string& reason,
                const std::string& message) {
  const json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
                  {"status", "Failure"}, {"message", message}, {"reason", reason},
                  {"code", code}};
  res.status = code;
  res.set_content(s.dump(), "application/json");
}

void SendError(httplib::Response& res, const Status& s) {
  const std::string msg(s.message());
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return SendStatus(res, 404, "NotFound", msg);
    case absl::StatusCode::kAlreadyExists:
      return SendStatus(res, 409, "AlreadyExists", msg);
    case absl::StatusCode::kAborted:
      return SendStatus(res, 409, "Conflict", msg);
    case absl::StatusCode::kInvalidArgument:
      return SendStatus(res, 422, "Invalid", msg);
    case absl::StatusCode::kFailedPrecondition:
      return SendStatus(res, 400, "BadRequest", msg);
    case absl::StatusCode::kOutOfRange:
      return SendStatus(res, 410, "Expired", msg);
    default:
      return SendStatus(res, 500, "InternalError", msg);
  }
}

json ErrorEvent(const std::string& message) {
  return {{"type", "ERROR"},
          {"object",
           {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", json::object()},
            {"status", "Failure"},
            {"message", message},
            {"reason", "Expired"},
            {"code", 410}}}};
}

// Legacy discovery (/api, /apis and each group version), so kubectl and other
// discovery-driven clients can talk to the test server.
void InstallDiscovery(httplib::Server& svr) {
  auto send = [](httplib::Response& res, const json& j) {
    res.set_content(j.dump(), "application/json");
  };
  svr.Get("/api", [send](const httplib::Request&, httplib::Response& res) {
    send(res, {{"kind", "APIVersions"},
               {"versions", {"v1"}},
               {"serverAddressByClientCIDRs",
                {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1"}}}}});
  });
  svr.Get("/apis", [send](const httplib::Request&, httplib::Response& res) {
    json groups = json::array();
    std::set<std::string> seen;
    for (const ResourceInfo& r : ServedResources()) {
      const std::string gv = r.resource.apiVersion();
      if (r.resource.group.empty() || !seen.insert(gv).second) continue;
      const json version = {{"groupVersion", gv}, {"version", r.resource.version}};
      groups.push_back(
          {{"name", r.resource.group}, {"versions", {version}}, {"preferredVersion", version}});
    }
    send(res, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}});
  });
  auto resources = [send](const std::string& gv, httplib::Response& res) {
    json list = json::array();
    for (const ResourceInfo& r : ServedResources()) {
      if (r.resource.apiVersion() != gv) continue;
      std::string singular = r.resource.kind;
      std::transform(singular.begin(), singular.end(), singular.begin(), ::tolower);
      list.push_back({{"name", r.resource.plural},
                      {"singularName", singular},
                      {"namespaced", r.resource.namespaced},
                      {"kind", r.resource.kind},
                      {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}});
      if (r.hasStatus) {
        list.push_back({{"name", r.resource.plural + "/status"},
                        {"singularName", ""},
                        {"namespaced", r.resource.namespaced},
                        {"kind", r.resource.kind},
                        {"verbs", {"get", "patch", "update"}}});
      }
    }
    if (list.empty())
      return SendStatus(res, 404, "NotFound", "the server could not find the requested resource");
    send(res, {{"kind", "APIResourceList"},
               {"apiVersion", "v1"},
               {"groupVersion", gv},
               {"resources", list}});
  };
  svr.Get("/api/v1",
          [resources](const httplib::Request&, httplib::Response& res) { resources("v1", res); });
  svr.Get(R"(/apis/([^/]+)/([^/]+))",
          [resources](const httplib::Request& req, httplib::Response& res) {
            resources(std::string(req.matches[1]) + "/" + std::string(req.matches[2]), res);
          });
}

}  // namespace

struct TestApiServer::Impl {
  TestApiServerOptions options;
  ObjectStore store;
  SelfSignedCert cert;
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  int port = 0;
  std::atomic<int> failNext{0};
  std::atomic<int> failCode{500};
  std::atomic<int> dropGeneration{0};
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> watches{0};
  std::atomic<int64_t> lists{0};
  mutable std::mutex heldMu;
  std::set<std::string> heldPlurals;

  bool Held(const std::string& plural) const {
    std::lock_guard<std::mutex> lock(heldMu);
    return heldPlurals.count(plural) != 0;
  }

  void Handle(const std::string& method, const httplib::Request& req, httplib::Response& res,
              const std::string& group, const std::string& version, const std::string& ns,
              const std::string& plural, const std::string& name, const std::string& sub);
  void Watch(const ResourceInfo& r, const std::string& ns, const httplib::Request& req,
             httplib::Response& res, Selector labels, Selector fields);
};

void TestApiServer::Impl::Handle(const std::string& method, const httplib::Request& req,
                                 httplib::Response& res, const std::string& group,
                                 const std::string& version, const std::string& ns,
                                 const std::string& plural, const std::string& name,
                                 const std::string& sub) {
  const ResourceInfo* r = store.FindResource(group, version, plural);
  if (r == nullptr || (!sub.empty() && (sub != "status" || !r->hasStatus))) {
    return SendStatus(res, 404, "NotFound", "the server could not find the requested resource");
  }
  if (r->resource.namespaced != !ns.empty() && !(ns.empty() && name.empty() && method == "GET")) {
    return SendStatus(res, 404, "NotFound", "the server could not find the requested resource");
  }
  if (method == "GET" && name.empty()) {
    StatusOr<Selector> labels = Selector::ParseLabels(req.get_param_value("labelSelector"));
    if (!labels.ok())
      return SendStatus(res, 400, "BadRequest", std::string(labels.status().message()));
    StatusOr<Selector> fields =
        Selector::ParseFields(req.get_param_value("fieldSelector"), SupportedFields(plural));
    if (!fields.ok())
      return SendStatus(res, 400, "BadRequest", std::string(fields.status().message()));
    const std::string w = req.get_param_value("watch");
    if (w == "true" || w == "1") return Watch(*r, ns, req, res, *labels, *fields);
    ++lists;
    json list =
        store.List(*r, ns, [&](const json& o) { return labels->Matches(o) && fields->Matches(o); });
    res.set_content(list.dump(), "application/json");
    return;
  }
  StatusOr<json> out = absl::InternalError("unhandled");
  json body;
  if (method == "POST" || method == "PUT" || method == "PATCH") {
    body = json::parse(req.body, nullptr, false);
    if (!body.is_object())
      return SendStatus(res, 400, "BadRequest", "the body is not a JSON object");
  }
  if (method == "GET") {
    out = store.Get(*r, ns, name);
  } else if (method == "POST" && name.empty()) {
    out = store.Create(*r, ns, body);
    if (out.ok()) res.status = 201;
  } else if (method == "PUT" && !name.empty()) {
    out = store.Update(*r, ns, name, body, sub == "status");
  } else if (method == "PATCH" && !name.empty()) {
    if (req.get_header_value("Content-Type") != "application/merge-patch+json") {
      return SendStatus(res, 415, "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media types "
                        "include: application/merge-patch+json");
    }
    out = store.MergePatch(*r, ns, name, body, sub == "status");
  } else if (method == "DELETE" && !name.empty() && sub.empty()) {
    int grace = -1;  // DeleteOptions: query parameter or body
    const json options = json::parse(req.body, nullptr, false);
    if (options.is_object() && options.contains("gracePeriodSeconds") &&
        options["gracePeriodSeconds"].is_number_integer()) {
      grace = options["gracePeriodSeconds"].get<int>();
    }
    if (req.has_param("gracePeriodSeconds") &&
        (!absl::SimpleAtoi(req.get_param_value("gracePeriodSeconds"), &grace) || grace < 0)) {
      return SendStatus(res, 400, "BadRequest", "gracePeriodSeconds: not a non-negative integer");
    }
    out = store.Delete(*r, ns, name, grace);
  } else {
    return SendStatus(res, 405, "MethodNotAllowed", method + " is not supported here");
  }
  if (!out.ok()) return SendError(res, out.status());
  res.set_content(out->dump(), "application/json");
}

// A watch stream: initial state (when no resourceVersion is given), then the
// changes after it, as newline-delimited JSON in a chunked 200 response.
void TestApiServer::Impl::Watch(const ResourceInfo& r, const std::string& ns,
                                const httplib::Request& req, httplib::Response& res,
                                Selector labels, Selector fields) {
  ++watches;
  struct State {
    int64_t lastRv = 0;
    std::vector<std::string> lines;
    bool finished = false;
    std::chrono::steady_clock::time_point deadline, nextBookmark;
  };
  auto st = std::make_shared<State>();
  auto match = [labels, fields, ns](const json& o) {
    if (o.is_null()) return false;
    if (!ns.empty() && o["metadata"].value("namespace", "") != ns) return false;
    return labels.Matches(o) && fields.Matches(o);
  };
  const std::string rvParam = req.get_param_value("resourceVersion");
  if (rvParam.empty() || rvParam == "0") {
    json list = store.List(r, ns, match);
    st->lastRv = std::stoll(list["metadata"]["resourceVersion"].get<std::string>());
    for (json& item : list["items"]) {
      st->lines.push_back(json{{"type", "ADDED"}, {"object", std::move(item)}}.dump() + "\n");
    }
  } else if (!absl::SimpleAtoi(rvParam, &st->lastRv)) {
    return SendStatus(res, 400, "BadRequest", "resourceVersion: not an integer: " + rvParam);
  }
  StatusOr<std::vector<StoredEvent>> probe = store.EventsSince(r.resource.plural, st->lastRv);
  if (!probe.ok()) {
    if (options.goneAsHttpStatus)
      return SendStatus(res, 410, "Expired", std::string(probe.status().message()));
    st->lines.push_back(ErrorEvent(std::string(probe.status().message())).dump() + "\n");
    st->finished = true;
  }
  int timeout = 1800;
  if (req.has_param("timeoutSeconds")) {
    if (!absl::SimpleAtoi(req.get_param_value("timeoutSeconds"), &timeout) || timeout < 0) {
      return SendStatus(res, 400, "BadRequest", "timeoutSeconds: not a non-negative integer");
    }
  }
  const auto now = std::chrono::steady_clock::now();
  st->deadline = now + std::chrono::seconds(timeout);
  st->nextBookmark = now + std::chrono::milliseconds(options.bookmarkIntervalMs);
  const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
  const int myDrop = dropGeneration.load();
  const std::string plural = r.resource.plural;
  const json bookmarkTemplate = {{"kind", r.resource.kind},
                                 {"apiVersion", r.resource.apiVersion()}};

  res.set_chunked_content_provider(
      "application/json", [this, st, match, bookmarks, myDrop, plural, bookmarkTemplate](
                              size_t, httplib::DataSink& sink) {
        if (stopping || dropGeneration.load() != myDrop) return false;  // connection drops
        auto flush = [&] {
          for (const std::string& l : st->lines) {
            if (!sink.write(l.data(), l.size())) return false;
          }
          st->lines.clear();
          return true;
        };
        if (!flush()) return false;
        if (st->finished) {
          sink.done();
          return true;
        }
        if (Held(plural)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          return sink.is_writable();
        }
        const int64_t seenRv = store.CurrentRv();
        StatusOr<std::vector<StoredEvent>> events = store.EventsSince(plural, st->lastRv);
        if (!events.ok()) {
          st->lines.push_back(ErrorEvent(std::string(events.status().message())).dump() + "\n");
          st->finished = true;
          return flush();
        }
        for (const StoredEvent& e : *events) {
          const bool now = match(e.object);
          const bool before = match(e.previous);
          std::string type;
          if (e.type == "MODIFIED") {
            type = now && before ? "MODIFIED" : now ? "ADDED" : before ? "DELETED" : "";
          } else if (now) {
            type = e.type;
          }
          if (!type.empty())
            st->lines.push_back(json{{"type", type}, {"object", e.object}}.dump() + "\n");
          st->lastRv = e.rv;
        }
        st->lastRv = std::max(st->lastRv, seenRv);
        const auto t = std::chrono::steady_clock::now();
        if (bookmarks && t >= st->nextBookmark) {
          json b = bookmarkTemplate;
          b["metadata"] = {{"resourceVersion", std::to_string(st->lastRv)}};
          st->lines.push_back(json{{"type", "BOOKMARK"}, {"object", b}}.dump() + "\n");
          st->nextBookmark = t + std::chrono::milliseconds(options.bookmarkIntervalMs);
        }
        if (!flush() || !sink.is_writable()) return false;
        if (t >= st->deadline) {
          sink.done();
          return true;
        }
        store.WaitForChange(st->lastRv, std::chrono::milliseconds(100));
        return true;
      });
}

StatusOr<std::unique_ptr<TestApiServer>> TestApiServer::Start(const TestApiServerOptions& o) {
  auto impl = std::make_unique<Impl>();
  impl->options = o;
  impl->store.SetCompactionWindow(o.compactionWindow);
  impl->store.SetValidateJobSpecs(o.validateJobSpecs);
  if (o.tls) {
    ES_ASSIGN_OR_RETURN(impl->cert, MakeSelfSignedCert("easyscale-test-apiserver"));
    BIO* cb =
        BIO_new_mem_buf(impl->cert.certPem.data(), static_cast<int>(impl->cert.certPem.size()));
    X509* x = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    BIO_free(cb);
    BIO* kb = BIO_new_mem_buf(impl->cert.keyPem.data(), static_cast<int>(impl->cert.keyPem.size()));
    EVP_PKEY* k = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
    BIO_free(kb);
    impl->server = std::make_unique<httplib::SSLServer>(x, k);
    X509_free(x);
    EVP_PKEY_free(k);
  } else {
    impl->server = std::make_unique<httplib::Server>();
  }
  httplib::Server& svr = *impl->server;
  if (!svr.is_valid()) return absl::InternalError("test apiserver: TLS setup failed");
  svr.new_task_queue = [] { return new httplib::ThreadPool(64); };  // one thread per watch
  svr.set_tcp_nodelay(true);
  Impl* p = impl.get();
  svr.set_pre_routing_handler([p](const httplib::Request& req, httplib::Response& res) {
    if (!p->options.token.empty() &&
        req.get_header_value("Authorization") != "Bearer " + p->options.token) {
      SendStatus(res, 401, "Unauthorized", "Unauthorized");
      return httplib::Server::HandlerResponse::Handled;
    }
    int n = p->failNext.load();
    while (n > 0 && !p->failNext.compare_exchange_weak(n, n - 1)) {
    }
    if (n > 0) {
      const int code = p->failCode.load();
      if (code == 429) res.set_header("Retry-After", "1");
      SendStatus(res, code, code == 429 ? "TooManyRequests" : "InternalError", "injected failure");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  InstallDiscovery(svr);
  const char* core = R"(/api/(v1)(?:/namespaces/([^/]+))?/([a-z]+)(?:/([^/]+))?(?:/(status))?)";
  const char* groups =
      R"(/apis/([^/]+)/([^/]+)(?:/namespaces/([^/]+))?/([a-z]+)(?:/([^/]+))?(?:/(status))?)";
  for (const std::string method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    auto coreHandler = [p, method](const httplib::Request& req, httplib::Response& res) {
      p->Handle(method, req, res, "", req.matches[1], req.matches[2], req.matches[3],
                req.matches[4], req.matches[5]);
    };
    auto groupHandler = [p, method](const httplib::Request& req, httplib::Response& res) {
      p->Handle(method, req, res, req.matches[1], req.matches[2], req.matches[3], req.matches[4],
                req.matches[5], req.matches[6]);
    };
    for (auto [pattern, handler] :
         {std::pair<const char*, httplib::Server::Handler>{core, coreHandler},
          {groups, groupHandler}}) {
      if (method == "GET") svr.Get(pattern, handler);
      if (method == "POST") svr.Post(pattern, handler);
      if (method == "PUT") svr.Put(pattern, handler);
      if (method == "PATCH") svr.Patch(pattern, handler);
      if (method == "DELETE") svr.Delete(pattern, handler);
    }
  }
  impl->port = o.port == 0 ? svr.bind_to_any_port("127.0.0.1")
                           : (svr.bind_to_port("127.0.0.1", o.port) ? o.port : -1);
  if (impl->port <= 0) return absl::UnavailableError("test apiserver: cannot bind 127.0.0.1");
  impl->thread = std::thread([p] { p->server->listen_after_bind(); });
  while (!svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return std::unique_ptr<TestApiServer>(new TestApiServer(std::move(impl)));
}

TestApiServer::TestApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TestApiServer::~TestApiServer() {
  impl_->stopping = true;
  impl_->store.NotifyAll();
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string TestApiServer::url() const {
  return absl::StrCat(impl_->options.tls ? "https" : "http", "://127.0.0.1:", impl_->port);
}
int TestApiServer::port() const { return impl_->port; }
const std::string& TestApiServer::caPem() const { return impl_->cert.certPem; }

KubeConfig TestApiServer::ClientConfig() const {
  KubeConfig c;
  c.server = url();
  c.caPem = impl_->cert.certPem;
  c.token = impl_->options.token;
  return c;
}

Status TestApiServer::WriteKubeconfig(const std::string& path) const {
  std::string yaml =
      "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: test\n  cluster:\n  "
      "  server: " +
      url() + "\n";
  if (!caPem().empty())
    yaml += "    certificate-authority-data: " + absl::Base64Escape(caPem()) + "\n";
  yaml +=
      "contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: "
      "default\nusers:\n- name: test\n  user:\n";
  yaml += impl_->options.token.empty() ? "    {}\n" : "    token: " + impl_->options.token + "\n";
  return WriteFileAtomic(path, yaml);
}

void TestApiServer::FailNextRequests(int k, int httpCode) {
  impl_->failCode = httpCode;
  impl_->failNext = k;
}
void TestApiServer::DropWatches() {
  ++impl_->dropGeneration;
  impl_->store.NotifyAll();
}
void TestApiServer::HoldWatches(const std::string& plural, bool held) {
  std::lock_guard<std::mutex> lock(impl_->heldMu);
  if (held) {
    impl_->heldPlurals.insert(plural);
  } else {
    impl_->heldPlurals.erase(plural);
  }
}
void TestApiServer::SetCompactionWindow(size_t events) { impl_->store.SetCompactionWindow(events); }
void TestApiServer::Compact() { impl_->store.Compact(); }
int64_t TestApiServer::resourceVersion() const { return impl_->store.CurrentRv(); }
int64_t TestApiServer::watchRequests() const { return impl_->watches; }
int64_t TestApiServer::listRequests() const { return impl_->lists; }
ObjectStore& TestApiServer::store() { return impl_->store; }

}  // namespace easyscale::op::testing
