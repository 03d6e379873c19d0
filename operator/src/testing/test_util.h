// File: operator/src/testing/test_util.h
//
// Small helpers shared by the operator's tests: polling with a deadline and
// the manifests tests create (nodes with GPUs, inference pods, jobs).
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace easyscale::op::testing {

// Polls `cond` every 5 ms until it holds or `limit` passes; returns its last value.
inline bool Eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

inline nlohmann::json PlainPod(const std::string& name,
                               nlohmann::json labels = nlohmann::json::object()) {
  return {{"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

// A node as the device plugin labels it.
inline nlohmann::json GpuNode(const std::string& name, const std::string& type, int count) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/hostname", name},
              {"easyscale.io/gpu-type", type},
              {"easyscale.io/gpu-count", std::to_string(count)}}}}},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

// An inference pod bound to `node` asking for `gpus` nvidia.com/gpu.
inline nlohmann::json InferencePod(const std::string& name, const std::string& node, int gpus) {
  return {{"metadata", {{"name", name}, {"labels", {{"app", "inference"}}}}},
          {"spec",
           {{"nodeName", node},
            {"containers",
             {{{"name", "server"},
               {"image", "inference:latest"},
               {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}}};
}

inline nlohmann::json EasyScaleJob(const std::string& name, nlohmann::json spec) {
  return {{"apiVersion", "easyscale.io/v1alpha1"},
          {"kind", "EasyScaleJob"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

}  // namespace easyscale::op::testing
