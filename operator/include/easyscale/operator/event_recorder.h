// File: easyscale/operator/event_recorder.h
//
// core/v1 Events about an object, as `kubectl describe` shows them. A repeat
// of the same (object, type, reason, message) raises the existing Event's count
// instead of creating another, like client-go's aggregation. Events are best
// effort: failures are logged, never returned.
//   recorder.Normal(job, "ScaledOut", "2 -> 3 workers");
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "easyscale/operator/kube_client.h"

namespace easyscale::op {

class EventRecorder {
 public:
  EventRecorder(KubeClient* client, std::string component, std::string host);

  void Normal(const nlohmann::json& object, const std::string& reason, const std::string& message) {
    Record(object, "Normal", reason, message);
  }
  void Warning(const nlohmann::json& object, const std::string& reason,
               const std::string& message) {
    Record(object, "Warning", reason, message);
  }
  void Record(const nlohmann::json& object, const std::string& type, const std::string& reason,
              const std::string& message);

 private:
  struct Seen {
    std::string name;
    int count = 0;
  };
  KubeClient* client_;
  std::string component_;
  std::string host_;
  std::mutex mu_;
  std::map<std::string, Seen> seen_;  // uid/type/reason/message -> Event
  uint64_t counter_ = 0;
};

}  // namespace easyscale::op
