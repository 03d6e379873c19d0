// The HTTP face of the test API server: routing, request parameters, watch
// streams, authentication and fault injection.
#include "test_apiserver.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "api_answers.h"
#include "custom_resource.h"
#include "discovery.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/log.h"
#include "easyscale/operator/kube_time.h"
#include "object_store.h"
#include "openapi.h"
#include "protobuf_body.h"
#include "request_options.h"
#include "selectors.h"
#include "table.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

// Threads for requests other than watches: with at most maxWatches open
// watches, these always remain for everything else.
constexpr int kRequestThreads = 32;

// A watch answer's media type: kube's "application/json" with a parameter,
// which httplib does not compress (kube-apiserver never compresses a watch:
// a compressed stream would reach the client only when it ends).
constexpr const char* kWatchMediaType = "application/json;stream=watch";

json ErrorEvent(const Status& s) {
  return {{"type", "ERROR"}, {"object", StatusObject(410, "Expired", std::string(s.message()))}};
}

std::string EventLine(const std::string& type, const json& object) {
  return WireJson({{"type", type}, {"object", object}}) + "\n";
}

// The Table the request asks for, if any (kubectl get asks for one).
StatusOr<std::optional<TableFormat>> TableFormatOf(const ResourceInfo& r,
                                                   const httplib::Request& req) {
  return TableFormatFor(r, req.get_header_value("Accept"), req.get_param_value("includeObject"));
}

// A change as a watch sends it: the object, or a Table of one row.
std::string ChangeLine(const std::string& type, const json& object,
                       const std::optional<TableFormat>& table) {
  if (!table) return EventLine(type, object);
  return EventLine(
      type, table->Convert(json::array({object}),
                           {{"resourceVersion", object["metadata"].value("resourceVersion", "")}}));
}

// True when `patch` holds no list and no "$" key: a strategic merge patch
// that means exactly what a JSON merge patch does.
bool PlainMergePatch(const json& patch) {
  if (patch.is_array()) return false;
  if (!patch.is_object()) return true;
  for (const auto& [key, value] : patch.items()) {
    if ((!key.empty() && key[0] == '$') || !PlainMergePatch(value)) return false;
  }
  return true;
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
  std::atomic<int> openWatches{0};
  int listenSocket = -1;
  mutable std::mutex heldMu;
  std::set<std::string> heldPlurals;
  mutable std::mutex tokenMu;  // guards options.token, which SetToken changes

  std::string Token() const {
    std::lock_guard<std::mutex> lock(tokenMu);
    return options.token;
  }

  // A request's place in the REST tree.
  struct Target {
    std::string group, version, ns, plural, name, sub;
    bool watchPath = false;  // the legacy /watch/ prefix
  };

  bool Held(const std::string& plural) const {
    std::lock_guard<std::mutex> lock(heldMu);
    return heldPlurals.count(plural) != 0;
  }

  void Handle(const std::string& method, const httplib::Request& req, httplib::Response& res,
              const Target& t);
  void Evict(const httplib::Request& req, httplib::Response& res, const ResourceInfo& r,
             const Target& t);
  void Write(const std::string& method, const httplib::Request& req, httplib::Response& res,
             const ResourceInfo& r, const Target& t);
  void Watch(const ResourceInfo& r, const std::string& ns, const httplib::Request& req,
             httplib::Response& res, Selector labels, Selector fields);
};

void TestApiServer::Impl::Handle(const std::string& method, const httplib::Request& req,
                                 httplib::Response& res, const Target& t) {
  const ResourceInfo* r = store.FindResource(t.group, t.version, t.plural);
  const bool collection = t.name.empty();
  const bool eviction = r != nullptr && t.sub == "eviction" && r->resource.plural == "pods" &&
                        r->resource.group.empty() && !collection;
  if (eviction) {
    if (method != "POST") {
      return SendStatus(res, 405, "MethodNotAllowed", method + " is not supported here");
    }
    return Evict(req, res, *r, t);
  }
  if (r == nullptr || (!t.sub.empty() && (t.sub != "status" || !r->hasStatus)) ||
      (r->resource.namespaced != !t.ns.empty() &&
       !(t.ns.empty() && collection && method == "GET")) ||
      (t.watchPath && method != "GET")) {
    return SendStatus(res, 404, "NotFound", "the server could not find the requested resource");
  }
  if (method != "GET" || (!collection && !t.watchPath)) return Write(method, req, res, *r, t);
  StatusOr<Selector> labels = Selector::ParseLabels(req.get_param_value("labelSelector"));
  if (!labels.ok())
    return SendStatus(res, 400, "BadRequest", std::string(labels.status().message()));
  // A legacy watch of one object is a watch of its collection by name.
  std::string fieldSelector = req.get_param_value("fieldSelector");
  if (!collection) {
    fieldSelector =
        absl::StrCat(fieldSelector.empty() ? "" : fieldSelector + ",", "metadata.name=", t.name);
  }
  StatusOr<Selector> fields = Selector::ParseFields(fieldSelector, SupportedFields(t.plural));
  if (!fields.ok())
    return SendStatus(res, 400, "BadRequest", std::string(fields.status().message()));
  StatusOr<std::optional<bool>> watch = BoolParam(req, "watch");
  if (!watch.ok()) return SendError(res, watch.status());
  if (t.watchPath || watch->value_or(false)) return Watch(*r, t.ns, req, res, *labels, *fields);
  StatusOr<std::optional<TableFormat>> table = TableFormatOf(*r, req);
  if (!table.ok()) return SendError(res, table.status());
  ++lists;
  json list =
      store.List(*r, t.ns, [&](const json& o) { return labels->Matches(o) && fields->Matches(o); });
  if (*table) list = (*table)->Convert(list["items"], list["metadata"]);
  res.set_content(WireJson(list), "application/json");
}

// pods/eviction, as kube-apiserver answers a policy/v1 Eviction (what kubectl
// drain and the cluster autoscaler send): the pod gets the DisruptionTarget
// condition, then is deleted gracefully. No PodDisruptionBudget is served
// here, so no eviction is refused for one (kube-apiserver answers 429 then).
void TestApiServer::Impl::Evict(const httplib::Request& req, httplib::Response& res,
                                const ResourceInfo& r, const Target& t) {
  const json body = json::parse(req.body, nullptr, false);
  const std::string apiVersion = body.is_object() ? body.value("apiVersion", "") : "";
  if (!body.is_object() || body.value("kind", "") != "Eviction" ||
      (apiVersion != "policy/v1" && apiVersion != "policy/v1beta1")) {
    return SendStatus(res, 400, "BadRequest", "the body is not a policy/v1 Eviction");
  }
  const json meta = body.value("metadata", json::object());
  if (!meta.is_object() || meta.value("name", "") != t.name) {
    return SendStatus(res, 400, "BadRequest", "name in URL does not match name in Eviction object");
  }
  StatusOr<WriteOptions> w = WriteOptionsOf(req);
  if (!w.ok()) return SendError(res, w.status());
  json deleteOptions = body.value("deleteOptions", json::object());
  if (!deleteOptions.is_object()) deleteOptions = json::object();
  StatusOr<DeleteOptions> d = DeleteOptionsIn(deleteOptions, req, &*w);
  if (!d.ok()) return SendError(res, d.status());
  StatusOr<json> pod = store.Get(r, t.ns, t.name);
  if (!pod.ok()) return SendError(res, pod.status());
  const json status = pod->value("status", json::object());
  const std::string phase = status.value("phase", "");
  if (phase != "Succeeded" && phase != "Failed") {  // a terminal pod is only deleted
    json conditions = json::array();
    for (const json& c : status.value("conditions", json::array())) {
      if (c.value("type", "") != "DisruptionTarget") conditions.push_back(c);
    }
    conditions.push_back({{"type", "DisruptionTarget"},
                          {"status", "True"},
                          {"reason", "EvictionByEvictionAPI"},
                          {"message", "Eviction API: evicting"},
                          {"lastTransitionTime", NowTime()}});
    StatusOr<json> marked = store.Patch(r, t.ns, t.name, PatchType::kMerge,
                                        {{"status", {{"conditions", conditions}}}}, true, *w);
    if (!marked.ok()) return SendError(res, marked.status());
  }
  StatusOr<json> deleted = store.Delete(r, t.ns, t.name, *d, *w);
  if (!deleted.ok()) return SendError(res, deleted.status());
  res.status = 201;
  res.set_content(WireJson({{"kind", "Status"},
                            {"apiVersion", "v1"},
                            {"metadata", json::object()},
                            {"status", "Success"},
                            {"code", 201}}),
                  "application/json");
}

// get, create, update, patch and delete of one object.
void TestApiServer::Impl::Write(const std::string& method, const httplib::Request& req,
                                httplib::Response& res, const ResourceInfo& r, const Target& t) {
  StatusOr<WriteOptions> w = WriteOptionsOf(req);
  if (!w.ok()) return SendError(res, w.status());
  std::vector<std::string> warnings;
  w->warnings = &warnings;
  const bool status = t.sub == "status";
  json body;
  const std::string contentType = req.get_header_value("Content-Type");
  if ((method == "POST" || method == "PUT") &&
      contentType == "application/vnd.kubernetes.protobuf") {
    StatusOr<json> read = ReadProtobufBody(req.body);
    if (!read.ok()) {
      return SendStatus(res, 415, "UnsupportedMediaType", std::string(read.status().message()));
    }
    body = std::move(*read);
  } else if ((method == "POST" || method == "PUT") && !contentType.empty() &&
             contentType.rfind("application/json", 0) != 0) {
    return SendStatus(res, 415, "UnsupportedMediaType",
                      "the body of the request was in an unknown format - accepted media types "
                      "include: application/json, application/vnd.kubernetes.protobuf (Secrets)");
  } else if (method == "POST" || method == "PUT" || method == "PATCH") {
    body = json::parse(req.body, nullptr, false);  // invalid UTF-8 is a parse error too
    if (body.is_discarded()) {
      return SendStatus(res, 400, "BadRequest", "the body is not valid JSON (or not UTF-8)");
    }
  }
  StatusOr<json> out = absl::InternalError("unhandled");
  if (method == "GET" && !t.name.empty()) {
    StatusOr<std::optional<TableFormat>> table = TableFormatOf(r, req);
    if (!table.ok()) return SendError(res, table.status());
    out = store.Get(r, t.ns, t.name);
    if (out.ok() && *table) {
      out = (*table)->Convert(json::array({*out}),
                              {{"resourceVersion", (*out)["metadata"]["resourceVersion"]}});
    }
  } else if (method == "POST" && t.name.empty()) {
    out = store.Create(r, t.ns, body, *w);
    if (out.ok()) res.status = 201;
  } else if (method == "PUT" && !t.name.empty()) {
    out = store.Update(r, t.ns, t.name, body, status, *w);
  } else if (method == "PATCH" && !t.name.empty()) {
    const std::string type = req.get_header_value("Content-Type");
    const std::map<std::string, PatchType> types = {
        {"application/merge-patch+json", PatchType::kMerge},
        {"application/json-patch+json", PatchType::kJson},
        {"application/apply-patch+yaml", PatchType::kApply}};
    auto it = types.find(type);
    if (type == "application/strategic-merge-patch+json") {
      // kubectl cordon, drain, label and annotate send these for built-in
      // types. Without lists or $-directives a strategic merge patch is a JSON
      // merge patch; the rest would need each type's patch strategies.
      if (r.resource.group == kEasyScaleJobs.group) {
        return SendStatus(res, 415, "UnsupportedMediaType",
                          "the body of the request was in an unknown format - accepted media "
                          "types include: application/json-patch+json, "
                          "application/merge-patch+json, application/apply-patch+yaml");
      }
      if (!PlainMergePatch(body)) {
        return SendStatus(res, 415, "UnsupportedMediaType",
                          "this test server applies strategic merge patches without lists or "
                          "$-directives only");
      }
      it = types.find("application/merge-patch+json");
    }
    if (it == types.end()) {
      return SendStatus(res, 415, "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media types "
                        "include: application/json-patch+json, application/merge-patch+json, "
                        "application/apply-patch+yaml");
    }
    if (it->second == PatchType::kApply && req.get_param_value("fieldManager").empty()) {
      return SendStatus(res, 400, "BadRequest",
                        "PATCH requests with apply content type must specify a fieldManager");
    }
    out = store.Patch(r, t.ns, t.name, it->second, body, status, *w);
  } else if (method == "DELETE" && !t.name.empty() && !status) {
    StatusOr<DeleteOptions> d = DeleteOptionsOf(req, &*w);
    if (!d.ok()) return SendError(res, d.status());
    out = store.Delete(r, t.ns, t.name, *d, *w);
  } else {
    return SendStatus(res, 405, "MethodNotAllowed", method + " is not supported here");
  }
  if (!out.ok()) return SendError(res, out.status());
  // One header per warning, as kube-apiserver sends them (code 299, agent
  // "-"), each once (a patch retried after a lost race decodes again).
  std::set<std::string> sent;
  for (const std::string& warning : warnings) {
    if (sent.insert(warning).second) res.set_header("Warning", "299 - " + json(warning).dump());
  }
  res.set_content(WireJson(*out), "application/json");
}

// A watch stream: initial state (when asked for, or by default without a
// resourceVersion), then the changes after it, as newline-delimited JSON in a
// chunked 200 response. Each open watch holds a server thread; at most
// options.maxWatches are open, so that other requests always find one.
void TestApiServer::Impl::Watch(const ResourceInfo& r, const std::string& ns,
                                const httplib::Request& req, httplib::Response& res,
                                Selector labels, Selector fields) {
  ++watches;
  // Frees the watch's place when the stream (or an early answer) ends.
  struct Slot {
    explicit Slot(std::atomic<int>& n) : open(n) { ++open; }
    ~Slot() { --open; }
    std::atomic<int>& open;
  };
  auto slot = std::make_shared<Slot>(openWatches);
  if (openWatches > options.maxWatches) {
    return SendStatus(res, 429, "TooManyRequests",
                      absl::StrCat("too many open watches (at most ", options.maxWatches, ")"));
  }
  StatusOr<std::optional<bool>> bookmarks = BoolParam(req, "allowWatchBookmarks");
  if (!bookmarks.ok()) return SendError(res, bookmarks.status());
  StatusOr<std::optional<bool>> sendInitial = BoolParam(req, "sendInitialEvents");
  if (!sendInitial.ok()) return SendError(res, sendInitial.status());
  StatusOr<std::optional<TableFormat>> table = TableFormatOf(r, req);
  if (!table.ok()) return SendError(res, table.status());
  const std::string rvMatch = req.get_param_value("resourceVersionMatch");
  // kube's rules for a watch list (WatchList, what client-go's informers send).
  if (sendInitial->has_value() && rvMatch != "NotOlderThan") {
    return SendStatus(res, 422, "Invalid",
                      "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
                      "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
  }
  if (sendInitial->value_or(false) && !bookmarks->value_or(false)) {
    return SendStatus(res, 422, "Invalid",
                      "ListOptions.meta.k8s.io \"\" is invalid: allowWatchBookmarks: Forbidden: "
                      "sendInitialEvents requires allowWatchBookmarks=true");
  }
  if (!sendInitial->has_value() && !rvMatch.empty()) {
    return SendStatus(res, 422, "Invalid",
                      "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
                      "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                      "provided");
  }
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
  const json bookmarkTemplate = {{"kind", r.resource.kind},
                                 {"apiVersion", r.resource.apiVersion()}};
  const std::string rvParam = req.get_param_value("resourceVersion");
  if (!rvParam.empty() && !absl::SimpleAtoi(rvParam, &st->lastRv)) {
    return SendStatus(res, 400, "BadRequest", "resourceVersion: not an integer: " + rvParam);
  }
  const bool legacyInitial = rvParam.empty() || rvParam == "0";
  if (sendInitial->value_or(legacyInitial)) {
    json list = store.List(r, ns, match);
    st->lastRv = std::stoll(list["metadata"]["resourceVersion"].get<std::string>());
    for (const json& item : list["items"]) st->lines.push_back(ChangeLine("ADDED", item, *table));
    if (sendInitial->value_or(false)) {
      json end = bookmarkTemplate;
      end["metadata"] = {{"resourceVersion", std::to_string(st->lastRv)},
                         {"annotations", {{"k8s.io/initial-events-end", "true"}}}};
      st->lines.push_back(EventLine("BOOKMARK", end));
    }
  } else if (legacyInitial) {
    st->lastRv = store.CurrentRv();  // from now on, without the initial state
  }
  StatusOr<std::vector<StoredEvent>> probe = store.EventsSince(r.resource.plural, st->lastRv);
  if (!probe.ok()) {
    if (options.goneAsHttpStatus) return SendError(res, probe.status());
    st->lines.push_back(WireJson(ErrorEvent(probe.status())) + "\n");
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
  const int myDrop = dropGeneration.load();
  const std::string plural = r.resource.plural;

  res.set_chunked_content_provider(
      kWatchMediaType, [this, st, slot, match, wantBookmarks = bookmarks->value_or(false), myDrop,
                        plural, bookmarkTemplate, table = *table](size_t, httplib::DataSink& sink) {
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
          st->lines.push_back(WireJson(ErrorEvent(events.status())) + "\n");
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
          if (!type.empty()) st->lines.push_back(ChangeLine(type, e.object, table));
          st->lastRv = e.rv;
        }
        st->lastRv = std::max(st->lastRv, seenRv);
        const auto t = std::chrono::steady_clock::now();
        if (wantBookmarks && t >= st->nextBookmark) {
          json b = bookmarkTemplate;
          b["metadata"] = {{"resourceVersion", std::to_string(st->lastRv)}};
          st->lines.push_back(EventLine("BOOKMARK", b));
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
  ES_RETURN_IF_ERROR(CheckServedCrdSchema());
  auto impl = std::make_unique<Impl>();
  impl->options = o;
  impl->store.SetCompactionWindow(o.compactionWindow);
  impl->store.SetValidateJobSpecs(o.validateJobSpecs);
  impl->store.SetDefaultFieldValidation(o.strictFieldValidation ? FieldValidation::kStrict
                                                                : FieldValidation::kWarn);
  if (o.tls) {
    ES_ASSIGN_OR_RETURN(impl->cert, MakeSelfSignedCert("easyscale-test-apiserver", o.address));
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
  svr.new_task_queue = [n = o.maxWatches + kRequestThreads] { return new httplib::ThreadPool(n); };
  svr.set_tcp_nodelay(true);
  svr.set_keep_alive_timeout(o.keepAliveTimeoutSeconds);
  svr.set_payload_max_length(kMaxBodyBytes);
  svr.set_error_handler(
      [](const httplib::Request&, httplib::Response& res) { FillEmptyErrorAnswer(res); });
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        SendStatus(res, 500, "InternalError", "the request could not be served");
      });
  Impl* p = impl.get();
  svr.set_socket_options([p](socket_t sock) {
    httplib::default_socket_options(sock);
    p->listenSocket = sock;
  });
  svr.set_pre_routing_handler([p](const httplib::Request& req, httplib::Response& res) {
    if (const std::string token = p->Token();
        !token.empty() && req.get_header_value("Authorization") != "Bearer " + token) {
      SendStatus(res, 401, "Unauthorized", "Unauthorized");
      return httplib::Server::HandlerResponse::Handled;
    }
    int n = p->failNext.load();
    while (n > 0 && !p->failNext.compare_exchange_weak(n, n - 1)) {
    }
    if (n > 0) {
      const int code = p->failCode.load();
      SendStatus(res, code, code == 429 ? "TooManyRequests" : "InternalError", "injected failure");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  InstallDiscovery(svr);
  InstallOpenApi(svr);
  // [/watch][/namespaces/NS]/PLURAL[/NAME[/status or, for pods, /eviction]] below /api/v1 and
  // /apis/GROUP/VERSION.
  const char* core =
      R"(/api/(v1)/(?:(watch)/)?(?:namespaces/([^/]+)/)?([a-z]+)(?:/([^/]+))?(?:/(status|eviction))?)";
  const char* groups =
      R"(/apis/([^/]+)/([^/]+)/(?:(watch)/)?(?:namespaces/([^/]+)/)?([a-z]+)(?:/([^/]+))?(?:/(status))?)";
  for (const std::string method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    auto coreHandler = [p, method](const httplib::Request& req, httplib::Response& res) {
      p->Handle(method, req, res,
                {"", req.matches[1], req.matches[3], req.matches[4], req.matches[5], req.matches[6],
                 req.matches[2].matched});
    };
    auto groupHandler = [p, method](const httplib::Request& req, httplib::Response& res) {
      p->Handle(method, req, res,
                {req.matches[1], req.matches[2], req.matches[4], req.matches[5], req.matches[6],
                 req.matches[7], req.matches[3].matched});
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
  impl->port = o.port == 0 ? svr.bind_to_any_port(o.address)
                           : (svr.bind_to_port(o.address, o.port) ? o.port : -1);
  if (impl->port <= 0) return absl::UnavailableError("test apiserver: cannot bind " + o.address);
  // httplib listens with a backlog of 5: clients that connect at once (a
  // hundred watches, kubectl's parallel discovery) would wait a second for a
  // SYN retry each time it overflows. Go's servers listen with the system's.
  if (listen(impl->listenSocket, SOMAXCONN) != 0) {
    return absl::UnavailableError("test apiserver: cannot listen on " + o.address);
  }
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
  return absl::StrCat(impl_->options.tls ? "https" : "http", "://", impl_->options.address, ":",
                      impl_->port);
}
int TestApiServer::port() const { return impl_->port; }
const std::string& TestApiServer::caPem() const { return impl_->cert.certPem; }

KubeConfig TestApiServer::ClientConfig() const {
  KubeConfig c;
  c.server = url();
  c.caPem = impl_->cert.certPem;
  c.token = impl_->Token();
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
  const std::string token = impl_->Token();
  yaml += token.empty() ? "    {}\n" : "    token: " + token + "\n";
  return WriteFileAtomic(path, yaml);
}

void TestApiServer::SetToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(impl_->tokenMu);
  impl_->options.token = token;
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
