// Builds the worker Pod manifest and the job's Secret, NetworkPolicy and
// certificate ConfigMap.
#include "controller/worker_pod.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "controller/certificate_history.h"
#include "controller/control_token.h"
#include "controller/gpu_inventory.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

json OwnerReference(const json& job) {
  const json& m = job["metadata"];
  return json::array({{{"apiVersion", job.value("apiVersion", "easyscale.io/v1alpha1")},
                       {"kind", kJobKind},
                       {"name", m.value("name", "")},
                       {"uid", m.value("uid", "")},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}});
}

json JobMetadata(const json& job, const std::string& name) {
  const json& m = job["metadata"];
  return {{"name", name},
          {"namespace", m.value("namespace", "default")},
          {"labels", {{kJobLabel, m.value("name", "")}}},
          {"ownerReferences", OwnerReference(job)}};
}

}  // namespace

std::string WorkerPodName(const std::string& job, int64_t generation, int index) {
  return absl::StrCat(job, "-w-", generation, "-", index);
}

std::string DurableCheckpointDir(const JobSpec& spec, const std::string& uid) {
  if (spec.checkpoint.claimName.empty()) return "";
  return spec.checkpoint.mountPath + "/" + uid;
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
      {{"name", kControlTokenEnv},
       {"valueFrom",
        {{"secretKeyRef",
          {{"name", ControlSecretName(name, m.value("uid", ""))}, {"key", kControlTokenKey}}}}}},
      {{"name", "POD_NAME"}, {"valueFrom", fieldRef("metadata.name")}},
      {{"name", "POD_NAMESPACE"}, {"valueFrom", fieldRef("metadata.namespace")}},
      {{"name", "POD_IP"}, {"valueFrom", fieldRef("status.podIP")}},
  });
  json requests = spec.worker.requests;
  json limits = spec.worker.limits;
  if (worker.gpuType != "cpu") {
    requests[kGpuResource] = "1";
    limits[kGpuResource] = "1";
  }
  json resources = json::object();
  if (!requests.empty()) resources["requests"] = requests;
  if (!limits.empty()) resources["limits"] = limits;
  // restricted Pod Security Standard: non-root, no privilege escalation, no
  // capabilities, the runtime's seccomp profile; a read-only root (a k8s
  // worker writes files only on claims: durable checkpoints, the trained model).
  json mounts = json::array({{{"name", kShmVolumeName}, {"mountPath", kShmMountPath}}});
  json volumes =
      json::array({{{"name", kShmVolumeName},
                    {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", spec.worker.shmSize}}}}});
  if (!spec.checkpoint.claimName.empty()) {
    mounts.push_back({{"name", kCheckpointVolumeName}, {"mountPath", spec.checkpoint.mountPath}});
    volumes.push_back({{"name", kCheckpointVolumeName},
                       {"persistentVolumeClaim", {{"claimName", spec.checkpoint.claimName}}}});
  }
  // The user's model, data and output. readOnly in both places, as kubelet
  // wants it: the claim's source (the volume is attached read-only) and the
  // mount (the container cannot write it).
  for (const JobVolume& v : spec.worker.volumes) {
    mounts.push_back({{"name", v.name}, {"mountPath", v.mountPath}, {"readOnly", v.readOnly}});
    volumes.push_back(
        {{"name", v.name},
         {"persistentVolumeClaim", {{"claimName", v.claimName}, {"readOnly", v.readOnly}}}});
  }
  json container = {
      {"name", "worker"},
      {"image", spec.image},
      {"command", {options.command, "k8s"}},
      {"env", env},
      {"ports", {{{"name", "state"}, {"containerPort", kWorkerStatePort}, {"protocol", "TCP"}}}},
      {"resources", resources},
      {"volumeMounts", mounts},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"runAsNonRoot", true},
        {"capabilities", {{"drop", {"ALL"}}}},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}}};
  json nodeSelector = spec.worker.nodeSelector;
  nodeSelector[kGpuTypeLabel] = worker.gpuType;
  json podSpec = {{"nodeName", worker.node},
                  {"restartPolicy", "Never"},
                  {"terminationGracePeriodSeconds", options.terminationGracePeriodSeconds},
                  {"automountServiceAccountToken", false},
                  {"enableServiceLinks", false},
                  {"nodeSelector", nodeSelector},
                  {"securityContext",
                   {{"runAsNonRoot", true},
                    {"runAsUser", kWorkerUid},
                    {"runAsGroup", kWorkerUid},
                    {"fsGroup", kWorkerUid},
                    {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
                  {"containers", {container}},
                  {"volumes", volumes}};
  if (!spec.worker.tolerations.empty()) podSpec["tolerations"] = spec.worker.tolerations;
  if (!spec.worker.serviceAccountName.empty()) {
    podSpec["serviceAccountName"] = spec.worker.serviceAccountName;
  }
  if (!spec.worker.imagePullSecrets.empty()) {
    json secrets = json::array();
    for (const std::string& s : spec.worker.imagePullSecrets) secrets.push_back({{"name", s}});
    podSpec["imagePullSecrets"] = secrets;
  }
  json metadata = JobMetadata(job, worker.pod);
  metadata["labels"][kGenerationLabel] = std::to_string(generation);
  metadata["labels"][kRoleLabel] = "worker";
  metadata["labels"][kGpuTypeLabel] = worker.gpuType;
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", podSpec}};
}

json BuildControlSecret(const json& job, const std::string& token) {
  const json& m = job["metadata"];
  return {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata", JobMetadata(job, ControlSecretName(m.value("name", ""), m.value("uid", "")))},
      {"type", "Opaque"},
      {"data", {{kControlTokenKey, absl::Base64Escape(token)}}}};
}

json BuildWorkerNetworkPolicy(const json& job) {
  const std::string name = job["metadata"].value("name", "");
  const json workers = {{"matchLabels", {{kJobLabel, name}, {kRoleLabel, "worker"}}}};
  return {{"apiVersion", "networking.k8s.io/v1"},
          {"kind", "NetworkPolicy"},
          {"metadata", JobMetadata(job, name + "-workers")},
          {"spec",
           {{"podSelector", workers},
            {"policyTypes", {"Ingress"}},
            {"ingress", {{{"from", {{{"podSelector", workers}}}}}}}}}};
}

json BuildCertificateConfigMap(const json& job, const std::vector<Certificate>& history) {
  return {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata", JobMetadata(job, CertificateConfigMapName(job["metadata"].value("name", "")))},
      {"data", {{kCertificatesKey, FormatCertificateHistory(history)}}}};
}

}  // namespace easyscale::op
