// kube-apiserver's storage rules, in memory.
#include "object_store.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "custom_resource.h"
#include "easyscale/common/checks.h"
#include "easyscale/operator/kube_time.h"
#include "object_shape.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

std::string Key(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

// A DNS-1123 subdomain (what most object names must be) or, without dots and
// at most 63 characters, a DNS-1123 label (what namespaces must be).
bool ValidDnsName(const std::string& n, bool subdomain) {
  if (n.empty() || n.size() > (subdomain ? 253 : 63)) return false;
  for (char c : n) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' ||
          (subdomain && c == '.'))) {
      return false;
    }
  }
  return absl::ascii_isalnum(n.front()) && absl::ascii_isalnum(n.back());
}

std::string ResourceVersionOf(const json& obj) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  const json& m = obj["metadata"];
  return m.contains("resourceVersion") && m["resourceVersion"].is_string()
             ? m["resourceVersion"].get<std::string>()
             : "";
}

// `patch` applied to `current`: a JSON patch that is not a list of operations
// is 400, one that does not apply (a failed test, a missing path) 422.
StatusOr<json> ApplyPatch(const json& current, PatchType type, const json& patch) {
  if (type == PatchType::kMerge || type == PatchType::kApply) {
    if (!patch.is_object()) return absl::FailedPreconditionError("the patch must be a JSON object");
    json next = current;
    next.merge_patch(patch);
    return next;
  }
  if (!patch.is_array()) {
    return absl::FailedPreconditionError("a JSON patch must be a list of operations");
  }
  try {
    return current.patch(patch);
  } catch (const json::parse_error& e) {
    return absl::FailedPreconditionError(absl::StrCat("the JSON patch is malformed: ", e.what()));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the JSON patch does not apply: ", e.what()));
  }
}

// An applied object names its kind, API version and (the URL's) name, as
// kube-apiserver requires of server-side apply.
Status CheckAppliedObject(const ResourceInfo& r, const std::string& name, const json& applied) {
  if (!applied.is_object()) return absl::FailedPreconditionError("the patch must be a JSON object");
  if (applied.value("kind", json()) != r.resource.kind ||
      applied.value("apiVersion", json()) != r.resource.apiVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "apply: kind and apiVersion must be ", r.resource.kind, " and ", r.resource.apiVersion()));
  }
  const json meta = applied.value("metadata", json::object());
  if (!meta.is_object() || meta.value("name", json()) != name) {
    return absl::FailedPreconditionError("apply: metadata.name must be the name in the URL, \"" +
                                         name + "\"");
  }
  return absl::OkStatus();
}

std::string Qualified(const ResourceInfo& r) {
  return r.resource.group.empty() ? r.resource.plural : r.resource.plural + "." + r.resource.group;
}

json& Meta(json& obj) {
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
  return obj["metadata"];
}

// What kube-apiserver does to a Secret on write: stringData is folded into
// data (base64) and never stored; data values must be base64, keys names.
Status NormalizeSecret(json& secret) {
  json& data = secret["data"];
  if (data.is_null()) data = json::object();
  if (secret.contains("stringData")) {
    for (const auto& [key, value] : secret["stringData"].items()) {
      if (!value.is_string()) {
        return absl::FailedPreconditionError("stringData." + key + ": not a string");
      }
      data[key] = absl::Base64Escape(value.get<std::string>());
    }
    secret.erase("stringData");
  }
  for (const auto& [key, value] : data.items()) {
    std::string decoded;
    if (!value.is_string() || !absl::Base64Unescape(value.get<std::string>(), &decoded)) {
      return absl::FailedPreconditionError("data." + key + ": illegal base64 data");
    }
    const auto keyChar = [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    };
    if (key.empty() || !std::all_of(key.begin(), key.end(), keyChar)) {
      return absl::InvalidArgumentError(
          "Secret \"" + secret["metadata"].value("name", "") + "\" is invalid: data[" + key +
          "]: Invalid value: a valid config key must consist of alphanumeric characters, '-', "
          "'_' or '.'");
    }
  }
  if (secret.value("type", "").empty()) secret["type"] = "Opaque";
  return absl::OkStatus();
}

// What kube-apiserver writes to a new CRD's status once its names are free
// (here: at once): accepted names, Established, NamesAccepted.
json EstablishedCrdStatus(const json& crd) {
  json stored = json::array();
  for (const json& v : crd["spec"].value("versions", json::array())) {
    if (v.value("storage", false)) stored.push_back(v.value("name", ""));
  }
  const std::string now = NowTime();
  auto condition = [&](const char* type, const char* reason, const char* message) {
    return json{{"type", type},
                {"status", "True"},
                {"lastTransitionTime", now},
                {"reason", reason},
                {"message", message}};
  };
  return {
      {"acceptedNames", crd["spec"]["names"]},
      {"storedVersions", stored},
      {"conditions",
       {condition("NamesAccepted", "NoConflicts", "no conflicts found"),
        condition("Established", "InitialNamesAccepted", "the initial names have been accepted")}}};
}

bool HasFinalizers(const json& obj) {
  const json& m = obj["metadata"];
  return m.contains("finalizers") && m["finalizers"].is_array() && !m["finalizers"].empty();
}

}  // namespace

const std::vector<ResourceInfo>& ServedResources() {
  // Short names and categories as kube-apiserver and crds/ declare them. The
  // operator's kinds, then the other kinds the Helm chart and the examples
  // create (stored and listed; only the fields the server itself reads are
  // checked).
  static const std::vector<ResourceInfo> r = {
      {kPods, true, {"po"}, {"all"}},
      {kNodes, true, {"no"}, {}},
      {kEvents, false, {"ev"}, {}},
      {kLeases, false, {}, {}},
      {kEasyScaleJobs, true, {"esj"}, {"easyscale", "all"}},
      {kSecrets, false, {}, {}},
      {kNetworkPolicies, false, {"netpol"}, {}},
      {{"", "v1", "namespaces", "Namespace", false}, true, {"ns"}, {}},
      {kConfigMaps, false, {"cm"}, {}},
      {{"", "v1", "services", "Service", true}, true, {"svc"}, {"all"}},
      {{"", "v1", "serviceaccounts", "ServiceAccount", true}, false, {"sa"}, {}},
      {{"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true}, true, {"pvc"}, {}},
      {{"apps", "v1", "deployments", "Deployment", true}, true, {"deploy"}, {"all"}},
      {{"apps", "v1", "daemonsets", "DaemonSet", true}, true, {"ds"}, {"all"}},
      {{"rbac.authorization.k8s.io", "v1", "roles", "Role", true}, false, {}, {}},
      {{"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true}, false, {}, {}},
      {{"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false}, false, {}, {}},
      {{"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false},
       false,
       {},
       {}},
      {{"apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
        false},
       true,
       {"crd", "crds"},
       {"api-extensions"}}};
  return r;
}

ObjectStore::ObjectStore() = default;

const ResourceInfo* ObjectStore::FindResource(const std::string& group, const std::string& version,
                                              const std::string& plural) const {
  for (const ResourceInfo& r : ServedResources()) {
    if (r.resource.group == group && r.resource.version == version && r.resource.plural == plural) {
      return &r;
    }
  }
  return nullptr;
}

Status ObjectStore::Validate(const ResourceInfo& r, const json& obj,
                             std::vector<FieldError> errors) const {
  const std::string name = obj["metadata"].value("name", "");
  std::vector<FieldError> own;
  auto add = [&](const std::string& field, const std::string& message,
                 const char* reason = "FieldValueInvalid") {
    own.push_back({reason, field, message});
  };
  if (!ValidDnsName(name, true)) {
    add("metadata.name", "Invalid value: \"" + name +
                             "\": a lowercase RFC 1123 subdomain must consist of lower case "
                             "alphanumeric characters, '-' or '.', and must start and end with an "
                             "alphanumeric character");
  }
  const std::string ns = obj["metadata"].value("namespace", "");
  if (r.resource.namespaced && !ValidDnsName(ns, false)) {
    add("metadata.namespace", "Invalid value: \"" + ns +
                                  "\": a lowercase RFC 1123 label must consist of lower case "
                                  "alphanumeric characters or '-', and must start and end with an "
                                  "alphanumeric character");
  }
  if (r.resource.plural == "pods") {
    const json spec = obj.value("spec", json::object());
    const json containers = spec.value("containers", json::array());
    if (!containers.is_array() || containers.empty()) {
      add("spec.containers", "Required value", "FieldValueRequired");
    }
    for (size_t i = 0; containers.is_array() && i < containers.size(); ++i) {
      for (const char* field : {"name", "image"}) {
        if (containers[i].value(field, "").empty()) {
          add(absl::StrCat("spec.containers[", i, "].", field), "Required value",
              "FieldValueRequired");
        }
      }
    }
  } else if (r.resource.plural == "customresourcedefinitions") {
    const json& spec = obj.value("spec", json::object());
    const std::string plural = spec.value("names", json::object()).value("plural", "");
    if (plural.empty()) {
      add("spec.names.plural", "Required value", "FieldValueRequired");
    } else if (name != plural + "." + spec.value("group", "")) {
      add("metadata.name",
          "Invalid value: \"" + name + "\": must be spec.names.plural+\".\"+spec.group");
    }
  } else if (r.resource.plural == "events") {
    if (!obj.contains("involvedObject") || !obj["involvedObject"].is_object()) {
      add("involvedObject", "Required value", "FieldValueRequired");
    }
  }
  own.insert(own.end(), errors.begin(), errors.end());
  if (own.empty()) return absl::OkStatus();
  return InvalidObject(r.resource, name, own);
}

StatusOr<std::vector<FieldError>> ObjectStore::Decode(const ResourceInfo& r, json* obj,
                                                      const json* old, bool statusOnly,
                                                      WriteOptions w) const {
  if (!statusOnly && !validateJobSpecs_) return std::vector<FieldError>();
  const FieldValidation v =
      w.fieldValidation == FieldValidation::kDefault ? defaultFieldValidation_ : w.fieldValidation;
  return DecodeCustomResource(r, obj, old, statusOnly, v, w.warnings);
}

void ObjectStore::Record(const std::string& plural, const std::string& type, const json& obj,
                         const json& previous) {
  history_.push_back({rv_, plural, type, obj, previous});
  Trim();
  changed_.notify_all();
}

void ObjectStore::Trim() {
  while (history_.size() > window_) {
    compactedRv_ = history_.front().rv;
    history_.pop_front();
  }
}

StatusOr<ObjectStore::Objects::iterator> ObjectStore::FindLocked(const ResourceInfo& r,
                                                                 const std::string& ns,
                                                                 const std::string& name) {
  Objects& objs = objects_[r.resource.plural];
  auto it = objs.find(Key(ns, name));
  if (it == objs.end()) {
    return absl::NotFoundError(absl::StrCat(Qualified(r), " \"", name, "\" not found"));
  }
  return it;
}

StatusOr<json> ObjectStore::Get(const ResourceInfo& r, const std::string& ns,
                                const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  ES_ASSIGN_OR_RETURN(auto it, FindLocked(r, ns, name));
  return it->second;
}

json ObjectStore::List(const ResourceInfo& r, const std::string& ns,
                       const std::function<bool(const json&)>& match) {
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  for (const auto& [key, obj] : objects_[r.resource.plural]) {
    if (!ns.empty() && obj["metadata"].value("namespace", "") != ns) continue;
    if (match(obj)) items.push_back(obj);
  }
  return {{"kind", r.resource.kind + "List"},
          {"apiVersion", r.resource.apiVersion()},
          {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
          {"items", items}};
}

StatusOr<json> ObjectStore::Create(const ResourceInfo& r, const std::string& ns, json obj,
                                   WriteOptions w) {
  ES_RETURN_IF_ERROR(CheckObjectShape(r.resource, obj));
  std::lock_guard<std::mutex> lock(mu_);
  json& m = Meta(obj);
  if (r.resource.namespaced) {
    const std::string bodyNs = m.value("namespace", "");
    if (!bodyNs.empty() && bodyNs != ns) {
      return absl::FailedPreconditionError(
          "the namespace of the provided object does not match the namespace sent on the request");
    }
    m["namespace"] = ns;
  } else {
    m.erase("namespace");
  }
  if (m.value("name", "").empty() && !m.value("generateName", "").empty()) {
    m["name"] =
        absl::StrFormat("%s%05x", m.value("generateName", ""), (rv_ * 2654435761u) % 0xfffff);
  }
  obj["kind"] = r.resource.kind;
  obj["apiVersion"] = r.resource.apiVersion();
  if (r.hasStatus) obj.erase("status");  // writes to the main resource ignore status
  if (r.resource.plural == "secrets") ES_RETURN_IF_ERROR(NormalizeSecret(obj));
  ES_ASSIGN_OR_RETURN(std::vector<FieldError> schemaErrors, Decode(r, &obj, nullptr, false, w));
  ES_RETURN_IF_ERROR(Validate(r, obj, std::move(schemaErrors)));
  const std::string key = Key(ns, obj["metadata"]["name"]);
  Objects& objs = objects_[r.resource.plural];
  if (objs.count(key) != 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        Qualified(r), " \"", obj["metadata"]["name"].get<std::string>(), "\" already exists"));
  }
  if (r.resource.plural == "pods") obj["status"] = {{"phase", "Pending"}};
  if (r.resource.plural == "customresourcedefinitions") obj["status"] = EstablishedCrdStatus(obj);
  m["uid"] = absl::StrFormat("00000000-0000-4000-8000-%012d", ++uidCounter_);
  m["creationTimestamp"] = NowTime();
  m.erase("deletionTimestamp");
  if (obj.contains("spec")) m["generation"] = 1;
  if (w.dryRun) return obj;
  m["resourceVersion"] = std::to_string(++rv_);
  objs[key] = obj;
  Record(r.resource.plural, "ADDED", obj, json());
  return obj;
}

StatusOr<json> ObjectStore::Update(const ResourceInfo& r, const std::string& ns,
                                   const std::string& name, json obj, bool status, WriteOptions w) {
  ES_RETURN_IF_ERROR(CheckObjectShape(r.resource, obj));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = Key(ns, name);
  ES_ASSIGN_OR_RETURN(auto it, FindLocked(r, ns, name));
  const json old = it->second;
  json& m = Meta(obj);
  if (m.value("name", name) != name) {
    return absl::FailedPreconditionError("the name of the object does not match the URL");
  }
  const std::string rv = m.value("resourceVersion", "");
  if (!rv.empty() && rv != old["metadata"].value("resourceVersion", "")) {
    return absl::AbortedError(absl::StrCat(
        "Operation cannot be fulfilled on ", Qualified(r), " \"", name,
        "\": the object has been modified; please apply your changes to the latest version and "
        "try again"));
  }
  json next;
  if (status) {  // /status: only the status stanza changes
    next = old;
    if (obj.contains("status")) next["status"] = obj["status"];
    ES_ASSIGN_OR_RETURN(std::vector<FieldError> schemaErrors, Decode(r, &next, &old, true, w));
    if (!schemaErrors.empty()) return InvalidObject(r.resource, name, schemaErrors);
  } else {
    next = obj;
    if (r.hasStatus) {  // the main resource: status is kept
      if (old.contains("status"))
        next["status"] = old["status"];
      else
        next.erase("status");
    }
    json& nm = next["metadata"];
    for (const char* immutable : {"uid", "creationTimestamp", "namespace", "generation",
                                  "deletionTimestamp", "deletionGracePeriodSeconds"}) {
      if (old["metadata"].contains(immutable))
        nm[immutable] = old["metadata"][immutable];
      else
        nm.erase(immutable);
    }
    nm["name"] = name;
    next["kind"] = r.resource.kind;
    next["apiVersion"] = r.resource.apiVersion();
    ES_ASSIGN_OR_RETURN(std::vector<FieldError> schemaErrors, Decode(r, &next, &old, false, w));
    json& meta = next["metadata"];
    if (old.value("spec", json()) != next.value("spec", json()) && meta.contains("generation")) {
      meta["generation"] = meta["generation"].get<int64_t>() + 1;
    }
    if (r.resource.plural == "secrets") ES_RETURN_IF_ERROR(NormalizeSecret(next));
    ES_RETURN_IF_ERROR(Validate(r, next, std::move(schemaErrors)));
  }
  next["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"];
  if (next == old) return old;  // a no-op write keeps the resourceVersion
  return Commit(r, key, std::move(next), old, w);
}

json ObjectStore::Commit(const ResourceInfo& r, const std::string& key, json obj, const json& old,
                         WriteOptions w) {
  if (w.dryRun) return obj;
  obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
  if (obj["metadata"].contains("deletionTimestamp") && !HasFinalizers(obj) &&
      obj["metadata"].value("deletionGracePeriodSeconds", 0) == 0) {
    objects_[r.resource.plural][key] = obj;
    Remove(r, key);
    return obj;
  }
  objects_[r.resource.plural][key] = obj;
  Record(r.resource.plural, old.is_null() ? "ADDED" : "MODIFIED", obj, old);
  return obj;
}

void ObjectStore::Remove(const ResourceInfo& r, const std::string& key) {
  Objects& objs = objects_[r.resource.plural];
  auto it = objs.find(key);
  if (it == objs.end()) return;
  json obj = it->second;
  objs.erase(it);
  obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
  Record(r.resource.plural, "DELETED", obj, json());
  CollectGarbage(obj["metadata"].value("uid", ""));
  ReleaseForegroundOwners(obj);
}

StatusOr<json> ObjectStore::Patch(const ResourceInfo& r, const std::string& ns,
                                  const std::string& name, PatchType type, const json& patch,
                                  bool status, WriteOptions w) {
  if (type == PatchType::kApply) ES_RETURN_IF_ERROR(CheckAppliedObject(r, name, patch));
  for (int attempt = 0;; ++attempt) {
    StatusOr<json> found = Get(r, ns, name);
    if (type == PatchType::kApply && absl::IsNotFound(found.status())) {
      StatusOr<json> created = Create(r, ns, patch, w);
      if (!absl::IsAlreadyExists(created.status()) || attempt > 5) return created;
      continue;  // created by another writer meanwhile: apply to that
    }
    ES_ASSIGN_OR_RETURN(json current, std::move(found));
    ES_ASSIGN_OR_RETURN(json next, ApplyPatch(current, type, patch));
    StatusOr<json> out = Update(r, ns, name, next, status, w);
    // Only a write that lost a race (not one the patch made conditional) is retried.
    const bool conditional = ResourceVersionOf(next) != ResourceVersionOf(current);
    if (out.ok() || conditional || !absl::IsAborted(out.status()) || attempt > 5) return out;
  }
}

StatusOr<json> ObjectStore::Delete(const ResourceInfo& r, const std::string& ns,
                                   const std::string& name, DeleteOptions d, WriteOptions w) {
  std::lock_guard<std::mutex> lock(mu_);
  ES_ASSIGN_OR_RETURN(auto it, FindLocked(r, ns, name));
  const std::string uid = it->second["metadata"].value("uid", "");
  if (!w.dryRun && d.propagation == DeleteOptions::Propagation::kOrphan) Orphan(uid);
  if (!w.dryRun && d.propagation == DeleteOptions::Propagation::kForeground &&
      HasDependentsLocked(uid)) {
    return DeleteInForeground(r, Key(ns, name), uid);
  }
  return DeleteLocked(r, Key(ns, name), d, w);
}

json ObjectStore::DeleteLocked(const ResourceInfo& r, const std::string& key, DeleteOptions d,
                               WriteOptions w) {
  json& current = objects_[r.resource.plural][key];
  // Only pods read spec and status here (and only theirs are type-checked for it).
  int grace = 0;
  bool waitForKubelet = false;
  if (r.resource.plural == "pods") {
    const json spec = current.value("spec", json::object());
    const std::string phase = current.value("status", json::object()).value("phase", "");
    grace = d.gracePeriodSeconds >= 0 ? d.gracePeriodSeconds
                                      : spec.value("terminationGracePeriodSeconds", 30);
    waitForKubelet = !spec.value("nodeName", "").empty() && phase != "Succeeded" &&
                     phase != "Failed" && grace > 0;
  }
  if (!HasFinalizers(current) && !waitForKubelet) {
    if (w.dryRun) return current;
    json obj = current;
    Remove(r, key);
    obj["metadata"]["resourceVersion"] = std::to_string(rv_);
    return obj;
  }
  json old = current;
  json next = current;
  if (!next["metadata"].contains("deletionTimestamp")) {
    next["metadata"]["deletionTimestamp"] =
        FormatTime(WallClock::now() + std::chrono::seconds(waitForKubelet ? grace : 0));
  }
  next["metadata"]["deletionGracePeriodSeconds"] = waitForKubelet ? grace : 0;
  if (next == old) return old;
  return Commit(r, key, std::move(next), old, w);
}

StatusOr<std::vector<StoredEvent>> ObjectStore::EventsSince(const std::string& plural, int64_t rv) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rv < compactedRv_) {
    return absl::OutOfRangeError(
        absl::StrCat("too old resource version: ", rv, " (", compactedRv_ + 1, ")"));
  }
  std::vector<StoredEvent> out;
  auto first = std::upper_bound(history_.begin(), history_.end(), rv,
                                [](int64_t v, const StoredEvent& e) { return v < e.rv; });
  for (auto it = first; it != history_.end(); ++it) {
    if (it->plural == plural) out.push_back(*it);
  }
  return out;
}

void ObjectStore::WaitForChange(int64_t rv, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, timeout, [&] { return rv_ > rv; });
}

void ObjectStore::NotifyAll() {
  std::lock_guard<std::mutex> lock(mu_);
  changed_.notify_all();
}

int64_t ObjectStore::CurrentRv() {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

void ObjectStore::SetCompactionWindow(size_t events) {
  std::lock_guard<std::mutex> lock(mu_);
  window_ = events;
  Trim();
}

void ObjectStore::SetValidateJobSpecs(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  validateJobSpecs_ = on;
}

void ObjectStore::SetDefaultFieldValidation(FieldValidation v) {
  std::lock_guard<std::mutex> lock(mu_);
  defaultFieldValidation_ = v == FieldValidation::kDefault ? FieldValidation::kWarn : v;
}

void ObjectStore::Compact() {
  std::lock_guard<std::mutex> lock(mu_);
  compactedRv_ = rv_;
  history_.clear();
}

}  // namespace easyscale::op::testing
