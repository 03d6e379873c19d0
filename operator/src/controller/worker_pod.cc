// Builds the worker Pod manifest.
#include "controller/worker_pod.h"

#include "absl/strings/str_cat.h"
#include "controller/gpu_inventory.h"

namespace easyscale::op {

using nlohmann::json;

std::string WorkerPodName(const std::string& job, int64_t generation, int index) {
  return absl::StrCat(job, "-w-", generation, "-", index);
}

json BuildWorkerPod(const json& job, const JobSpec& spec, const WorkerRecord& worker,
                    int64_t generation, const WorkerPodOptions& options) {
  const json& m = job["metadata"];
  const std::string name = m.value("name", "");
  const std::string ns = m.value("namespace", "default");
  auto fieldRef = [](const char* path) { return json{{"fieldRef", {{"fieldPath", path}}}}; };
  json env = json::array({
      {{"name", "EASYSCALE_CONTROL_URL"}, {"value", options.controlUrl}},
      {{"name", "EASYSCALE_JOB"}, {"value", ns + "/" + name}},
      {{"name", "EASYSCALE_GPU_TYPE"}, {"value", worker.gpuType}},
      {{"name", "POD_NAME"}, {"valueFrom", fieldRef("metadata.name")}},
      {{"name", "POD_NAMESPACE"}, {"valueFrom", fieldRef("metadata.namespace")}},
      {{"name", "POD_IP"}, {"valueFrom", fieldRef("status.podIP")}},
  });
  json resources = json::object();
  if (worker.gpuType != "cpu") {
    resources = {{"limits", {{kGpuResource, "1"}}}, {"requests", {{kGpuResource, "1"}}}};
  }
  json volume = {{"name", "checkpoint"}};
  if (spec.checkpoint.claimName.empty()) {
    volume["emptyDir"] = json::object();
  } else {
    volume["persistentVolumeClaim"] = {{"claimName", spec.checkpoint.claimName}};
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", worker.pod},
            {"namespace", ns},
            {"labels",
             {{kJobLabel, name},
              {kGenerationLabel, std::to_string(generation)},
              {kRoleLabel, "worker"},
              {kGpuTypeLabel, worker.gpuType}}},
            {"ownerReferences",
             {{{"apiVersion", job.value("apiVersion", "easyscale.io/v1alpha1")},
               {"kind", kJobKind},
               {"name", name},
               {"uid", m.value("uid", "")},
               {"controller", true},
               {"blockOwnerDeletion", true}}}}}},
          {"spec",
           {{"nodeName", worker.node},
            {"restartPolicy", "Never"},
            {"terminationGracePeriodSeconds", 60},
            {"affinity",
             {{"nodeAffinity",
               {{"requiredDuringSchedulingIgnoredDuringExecution",
                 {{"nodeSelectorTerms",
                   {{{"matchExpressions",
                      {{{"key", kGpuTypeLabel},
                        {"operator", "In"},
                        {"values", {worker.gpuType}}}}}}}}}}}}}},
            {"containers",
             {{{"name", "worker"},
               {"image", spec.image},
               {"command", {options.command, "k8s"}},
               {"env", env},
               {"resources", resources},
               {"volumeMounts",
                {{{"name", "checkpoint"}, {"mountPath", spec.checkpoint.mountPath}}}}}}},
            {"volumes", {volume}}}}};
}

}  // namespace easyscale::op
