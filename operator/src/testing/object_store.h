// File: operator/src/testing/object_store.h
//
// The state of the test API server: objects by resource, namespace and name,
// one global resourceVersion, and the history of changes that watches resume
// from. It applies kube-apiserver's write rules: status subresource split,
// generation bumps on spec changes, optimistic concurrency, finalizers,
// garbage collection of dependents whose owner is gone, and custom resources
// pruned, defaulted and validated by their CRD (custom_resource.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/operator/kube_client.h"
#include "testing/structural_schema.h"

namespace easyscale::op::testing {

struct ResourceInfo {
  Resource resource;
  bool hasStatus = false;               // a /status subresource splits spec and status writes
  std::vector<std::string> shortNames;  // discovery: `kubectl get esj`
  std::vector<std::string> categories;  // discovery: `kubectl get all`
};

// The resources the test API server serves.
const std::vector<ResourceInfo>& ServedResources();

struct StoredEvent {
  int64_t rv = 0;
  std::string plural;
  std::string type;  // ADDED | MODIFIED | DELETED
  nlohmann::json object;
  nlohmann::json previous;  // the object before a MODIFIED, for selector moves
};

// What a write does with the unknown fields of a custom resource (the
// request's fieldValidation): prune them silently (Ignore), prune them with a
// warning each (Warn, kube's default), or refuse the write (Strict, 400).
enum class FieldValidation { kDefault, kIgnore, kWarn, kStrict };

// A write with dryRun (the request's dryRun=All) runs every check and
// answers what would be stored, storing nothing.
struct WriteOptions {
  bool dryRun = false;
  FieldValidation fieldValidation = FieldValidation::kDefault;  // kDefault: the store's
  std::vector<std::string>* warnings = nullptr;  // where Warn's warnings go, when wanted
};

// What a DELETE asks for besides the object (metav1.DeleteOptions).
struct DeleteOptions {
  int gracePeriodSeconds = -1;  // < 0: a pod's own terminationGracePeriodSeconds
  enum class Propagation {
    kBackground,  // the owner goes, then the garbage collector deletes its dependents
    kOrphan,      // dependents stay, without their references to the owner
    kForeground,  // the owner waits (foregroundDeletion finalizer) until its dependents are gone
  } propagation = Propagation::kBackground;
};

enum class PatchType {
  kMerge,  // application/merge-patch+json (RFC 7386)
  kJson,   // application/json-patch+json (RFC 6902)
  // application/apply-patch+yaml (server-side apply), simplified: the applied
  // object is created, or merged into the stored one as a merge patch. No
  // managedFields: fields a manager stops applying stay, and there are no
  // conflicts between managers.
  kApply,
};

// Errors use the client's codes: NotFound, AlreadyExists, Aborted (conflict),
// InvalidArgument (422), FailedPrecondition (400), OutOfRange (410).
class ObjectStore {
 public:
  ObjectStore();

  const ResourceInfo* FindResource(const std::string& group, const std::string& version,
                                   const std::string& plural) const;

  StatusOr<nlohmann::json> Get(const ResourceInfo& r, const std::string& ns,
                               const std::string& name);
  // Every object of `r` in `ns` (all when empty) that `match` accepts.
  nlohmann::json List(const ResourceInfo& r, const std::string& ns,
                      const std::function<bool(const nlohmann::json&)>& match);
  StatusOr<nlohmann::json> Create(const ResourceInfo& r, const std::string& ns, nlohmann::json obj,
                                  WriteOptions w = {});
  StatusOr<nlohmann::json> Update(const ResourceInfo& r, const std::string& ns,
                                  const std::string& name, nlohmann::json obj, bool status,
                                  WriteOptions w = {});
  // A patch that leaves metadata.resourceVersion alone is applied to the
  // latest object (re-applied when another write wins the race); one that
  // sets it is a conditional write (409 when stale). A JSON patch that does
  // not apply is 422. An apply creates the object when there is none.
  StatusOr<nlohmann::json> Patch(const ResourceInfo& r, const std::string& ns,
                                 const std::string& name, PatchType type,
                                 const nlohmann::json& patch, bool status, WriteOptions w = {});
  // Pods bound to a node that have not ended terminate gracefully, as the
  // kubelet must confirm: DELETE sets deletionTimestamp (+ grace period) and a
  // second DELETE with gracePeriodSeconds 0 removes them (a pod's default
  // grace period is 30 s). Dependents go as DeleteOptions' propagation says.
  StatusOr<nlohmann::json> Delete(const ResourceInfo& r, const std::string& ns,
                                  const std::string& name, DeleteOptions d = {},
                                  WriteOptions w = {});

  // Events of `plural` after `rv`; OutOfRange when history before it is compacted.
  StatusOr<std::vector<StoredEvent>> EventsSince(const std::string& plural, int64_t rv);
  // Waits until the resourceVersion passes `rv` or `timeout` passes.
  void WaitForChange(int64_t rv, std::chrono::milliseconds timeout);
  // Wakes every waiter (used when watches are dropped or the server stops).
  void NotifyAll();

  int64_t CurrentRv();
  void SetCompactionWindow(size_t events);
  // false: writes of EasyScaleJobs to the main resource skip the CRD's
  // schema (as objects stored under an older, looser CRD would), for tests of
  // the operator's own validation. Status writes are always checked.
  void SetValidateJobSpecs(bool on);
  // What writes without a fieldValidation get (kube's default is Warn).
  void SetDefaultFieldValidation(FieldValidation v);
  // Forgets the whole history: any watch from an older RV gets 410.
  void Compact();

 private:
  using Objects = std::map<std::string, nlohmann::json>;  // "ns/name" -> object
  StatusOr<Objects::iterator> FindLocked(const ResourceInfo& r, const std::string& ns,
                                         const std::string& name);
  // kube's checks of `obj` (its name, namespace and kind-specific fields)
  // after the custom resource's `schemaErrors`: 422 with every cause.
  Status Validate(const ResourceInfo& r, const nlohmann::json& obj,
                  std::vector<schematest::FieldError> schemaErrors = {}) const;
  // Prunes, defaults and checks a custom resource against its CRD (see
  // custom_resource.h); returns the schema's errors for Validate.
  StatusOr<std::vector<schematest::FieldError>> Decode(const ResourceInfo& r, nlohmann::json* obj,
                                                       const nlohmann::json* old, bool statusOnly,
                                                       WriteOptions w) const;
  void Record(const std::string& plural, const std::string& type, const nlohmann::json& obj,
              const nlohmann::json& previous);
  // Commits `obj` replacing `old` (or removes it when its last finalizer went).
  nlohmann::json Commit(const ResourceInfo& r, const std::string& key, nlohmann::json obj,
                        const nlohmann::json& old, WriteOptions w);
  void Remove(const ResourceInfo& r, const std::string& key);
  nlohmann::json DeleteLocked(const ResourceInfo& r, const std::string& key, DeleteOptions d,
                              WriteOptions w);
  // Keys of the objects of `r` that `ownerUid` owns.
  std::vector<std::string> DependentsLocked(const ResourceInfo& r, const std::string& ownerUid);
  bool HasDependentsLocked(const std::string& ownerUid);
  void CollectGarbage(const std::string& ownerUid);
  void Orphan(const std::string& ownerUid);
  nlohmann::json DeleteInForeground(const ResourceInfo& r, const std::string& key,
                                    const std::string& uid);
  // Lets the owners of `removed` that wait in foreground deletion go once
  // their last dependent is gone.
  void ReleaseForegroundOwners(const nlohmann::json& removed);
  void Trim();

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Objects> objects_;  // by plural
  int64_t rv_ = 1;
  int64_t uidCounter_ = 0;
  std::deque<StoredEvent> history_;
  int64_t compactedRv_ = 0;  // events at or below this RV are forgotten
  size_t window_ = 100000;
  bool validateJobSpecs_ = true;
  FieldValidation defaultFieldValidation_ = FieldValidation::kWarn;
};

}  // namespace easyscale::op::testing
