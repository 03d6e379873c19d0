// The garbage collector's part of the store: dependents of a deleted owner are
// deleted after it (background), before it (foreground), or kept without
// their reference to it (orphan). Objects own each other through
// metadata.ownerReferences (by uid), across kinds.
#include <algorithm>

#include "easyscale/operator/kube_time.h"
#include "object_store.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

// The finalizer of an owner that waits for its dependents (foreground deletion).
constexpr const char* kForegroundDeletion = "foregroundDeletion";

}  // namespace

bool ObjectStore::HasDependentsLocked(const std::string& ownerUid) {
  const auto& all = ServedResources();
  return std::any_of(all.begin(), all.end(),
                     [&](const ResourceInfo& r) { return !DependentsLocked(r, ownerUid).empty(); });
}

json ObjectStore::DeleteInForeground(const ResourceInfo& r, const std::string& key,
                                     const std::string& uid) {
  const json old = objects_[r.resource.plural][key];
  json next = old;
  json& m = next["metadata"];
  const json finalizers = m.value("finalizers", json::array());
  if (std::find(finalizers.begin(), finalizers.end(), kForegroundDeletion) == finalizers.end()) {
    m["finalizers"].push_back(kForegroundDeletion);
  }
  if (!m.contains("deletionTimestamp")) m["deletionTimestamp"] = NowTime();
  m["deletionGracePeriodSeconds"] = 0;
  const json waiting = Commit(r, key, std::move(next), old, {});
  CollectGarbage(uid);  // the last dependent's removal releases the owner
  return waiting;
}

void ObjectStore::ReleaseForegroundOwners(const json& removed) {
  for (const json& ref : removed["metadata"].value("ownerReferences", json::array())) {
    const std::string uid = ref.value("uid", "");
    if (HasDependentsLocked(uid)) continue;
    for (const ResourceInfo& r : ServedResources()) {
      for (auto& [key, owner] : objects_[r.resource.plural]) {
        json finalizers = owner["metadata"].value("finalizers", json::array());
        if (owner["metadata"].value("uid", "") != uid ||
            std::find(finalizers.begin(), finalizers.end(), kForegroundDeletion) ==
                finalizers.end()) {
          continue;
        }
        const std::string ownerKey = key;  // the map entry may go in Commit
        const json old = owner;
        json next = owner;
        finalizers.erase(std::find(finalizers.begin(), finalizers.end(), kForegroundDeletion));
        next["metadata"]["finalizers"] = finalizers;
        if (finalizers.empty()) next["metadata"].erase("finalizers");
        Commit(r, ownerKey, std::move(next), old, {});  // removes it when no finalizer is left
        return;
      }
    }
  }
}

std::vector<std::string> ObjectStore::DependentsLocked(const ResourceInfo& r,
                                                       const std::string& ownerUid) {
  std::vector<std::string> dependents;
  for (const auto& [key, obj] : objects_[r.resource.plural]) {
    const json refs = obj["metadata"].value("ownerReferences", json::array());
    if (std::any_of(refs.begin(), refs.end(),
                    [&](const json& ref) { return ref.value("uid", "") == ownerUid; })) {
      dependents.push_back(key);
    }
  }
  return dependents;
}

// Deletes the dependents of an owner that is gone or waits for them;
// dependents with finalizers start terminating.
void ObjectStore::CollectGarbage(const std::string& ownerUid) {
  if (ownerUid.empty()) return;
  for (const ResourceInfo& r : ServedResources()) {
    for (const std::string& key : DependentsLocked(r, ownerUid)) {
      if (objects_[r.resource.plural].count(key) == 0) continue;  // collected on the way
      if (objects_[r.resource.plural][key]["metadata"].contains("deletionTimestamp")) continue;
      DeleteLocked(r, key, {}, {});
    }
  }
}

// Orphan propagation: each dependent loses its references to the owner (and
// the field, when none is left) and stays.
void ObjectStore::Orphan(const std::string& ownerUid) {
  if (ownerUid.empty()) return;
  for (const ResourceInfo& r : ServedResources()) {
    for (const std::string& key : DependentsLocked(r, ownerUid)) {
      const json old = objects_[r.resource.plural][key];
      json next = old;
      json& refs = next["metadata"]["ownerReferences"];
      refs.erase(std::remove_if(refs.begin(), refs.end(),
                                [&](const json& ref) { return ref.value("uid", "") == ownerUid; }),
                 refs.end());
      if (refs.empty()) next["metadata"].erase("ownerReferences");
      Commit(r, key, std::move(next), old, {});
    }
  }
}

}  // namespace easyscale::op::testing
