// Creates or bumps core/v1 Events.
#include "easyscale/operator/event_recorder.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "easyscale/common/log.h"
#include "easyscale/operator/kube_time.h"

namespace easyscale::op {

using nlohmann::json;

EventRecorder::EventRecorder(KubeClient* client, std::string component, std::string host)
    : client_(client), component_(std::move(component)), host_(std::move(host)) {}

void EventRecorder::Record(const json& object, const std::string& type, const std::string& reason,
                           const std::string& message) {
  const json& m = object["metadata"];
  const std::string ns = m.value("namespace", "default");
  const std::string uid = m.value("uid", "");
  const std::string key = absl::StrCat(uid, "/", type, "/", reason, "/", message);
  const std::string now = NowTime();
  std::string name;
  int count = 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = seen_.find(key);
    if (it != seen_.end()) {
      name = it->second.name;
      count = ++it->second.count;
    } else {
      const auto t = std::chrono::system_clock::now().time_since_epoch();
      name = absl::StrFormat("%s.%x%04x", m.value("name", "object"),
                             std::chrono::duration_cast<std::chrono::microseconds>(t).count(),
                             ++counter_ & 0xffff);
      seen_[key] = {name, 1};
    }
  }
  LogInfo("event", message, {{"object", ObjectKey(object)}, {"type", type}, {"reason", reason}});
  if (count > 1) {
    StatusOr<json> patched =
        client_->MergePatch(kEvents, ns, name, {{"count", count}, {"lastTimestamp", now}});
    if (patched.ok()) return;
    if (!absl::IsNotFound(patched.status())) {
      LogWarn("event", "cannot update event", {{"error", patched.status().ToString()}});
      return;
    }
  }
  const json event = {{"apiVersion", "v1"},
                      {"kind", "Event"},
                      {"metadata", {{"name", name}, {"namespace", ns}}},
                      {"involvedObject",
                       {{"apiVersion", object.value("apiVersion", "")},
                        {"kind", object.value("kind", "")},
                        {"name", m.value("name", "")},
                        {"namespace", ns},
                        {"uid", uid},
                        {"resourceVersion", m.value("resourceVersion", "")}}},
                      {"type", type},
                      {"reason", reason},
                      {"message", message},
                      {"source", {{"component", component_}, {"host", host_}}},
                      {"reportingComponent", component_},
                      {"reportingInstance", host_},
                      {"firstTimestamp", now},
                      {"lastTimestamp", now},
                      {"count", count}};
  StatusOr<json> created = client_->Create(kEvents, ns, event);
  if (!created.ok()) {
    LogWarn("event", "cannot create event", {{"error", created.status().ToString()}});
  }
}

}  // namespace easyscale::op
