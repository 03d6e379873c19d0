// The objects the operator creates for a job, against their Kubernetes shapes
// and the `restricted` Pod Security Standard (as the API server's
// PodSecurity admission checks it): the worker Pod for GPU and CPU workers,
// with and without a checkpoint claim, with the job's volumes and with the
// spec's pod settings, the
// control-token Secret and the worker NetworkPolicy.
#include "controller/worker_pod.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "controller/control_token.h"
#include "shapes_fixture.h"

namespace easyscale::deploytest {
namespace {

using nlohmann::json;

const json kJob = {
    {"apiVersion", "easyscale.io/v1alpha1"},
    {"kind", "EasyScaleJob"},
    {"metadata",
     {{"name", "mnist"}, {"namespace", "ml"}, {"uid", "0b7f1c2e-2d7a-4c55-9e8e-6a4f1d2f9a10"}}}};

JobSpec Spec(const json& extra = json::object()) {
  json spec = {{"image", "registry.example.com/easyscale-worker:0.1.0"}, {"ests", 8}};
  spec.update(extra);
  StatusOr<JobSpec> s = ParseJobSpec(spec);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : JobSpec{};
}

// The restricted profile's checks (kubernetes.io/docs/concepts/security/pod-security-standards).
std::vector<std::string> RestrictedViolations(const json& pod) {
  std::vector<std::string> v;
  const json& spec = pod["spec"];
  for (const char* host : {"hostNetwork", "hostPID", "hostIPC"}) {
    if (spec.value(host, false)) v.push_back(std::string(host) + " set");
  }
  static const std::set<std::string> kVolumeTypes = {
      "configMap", "csi",   "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
      "projected", "secret"};
  for (const json& vol : spec.value("volumes", json::array())) {
    for (const auto& [key, value] : vol.items()) {
      if (key != "name" && kVolumeTypes.count(key) == 0) v.push_back("volume type " + key);
    }
  }
  const json& podSc = spec.value("securityContext", json::object());
  const std::string podSeccomp = podSc.value("seccompProfile", json::object()).value("type", "");
  for (const json& c : spec["containers"]) {
    const json& sc = c.value("securityContext", json::object());
    const std::string name = c.value("name", "");
    if (sc.value("privileged", false)) v.push_back(name + ": privileged");
    if (sc.value("allowPrivilegeEscalation", true)) v.push_back(name + ": privilege escalation");
    if (!(sc.value("runAsNonRoot", false) || podSc.value("runAsNonRoot", false))) {
      v.push_back(name + ": runAsNonRoot not true");
    }
    if (sc.value("runAsUser", 1) == 0 || podSc.value("runAsUser", 1) == 0) {
      v.push_back(name + ": runs as root");
    }
    const std::string seccomp =
        sc.value("seccompProfile", json::object()).value("type", podSeccomp);
    if (seccomp != "RuntimeDefault" && seccomp != "Localhost") v.push_back(name + ": seccomp");
    const json caps = sc.value("capabilities", json::object());
    if (caps.value("drop", json::array()) != json::array({"ALL"})) {
      v.push_back(name + ": capabilities not dropped");
    }
    for (const json& add : caps.value("add", json::array())) {
      if (add != "NET_BIND_SERVICE") v.push_back(name + ": adds " + add.get<std::string>());
    }
    for (const json& p : c.value("ports", json::array())) {
      if (p.contains("hostPort")) v.push_back(name + ": hostPort");
    }
  }
  return v;
}

class OperatorObjects : public ShapesTest {
 protected:
  json Pod(const JobSpec& spec, const std::string& gpuType) {
    const op::WorkerRecord w{"mnist-w-3-0", "node-a", gpuType, 0, {0, 1, 2, 3}};
    json pod = op::BuildWorkerPod(kJob, spec, w, 3,
                                  {.controlUrl = "http://easyscale-operator-control.es.svc:8090"});
    EXPECT_EQ(shapes_->Validate(&pod), std::vector<std::string>{}) << pod.dump(1);
    EXPECT_EQ(RestrictedViolations(pod), std::vector<std::string>{});
    return pod;
  }
};

TEST_F(OperatorObjects, GpuWorkerPodIsRestrictedAndRequestsItsGpu) {
  const json pod = Pod(Spec(), "a100");
  const json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["resources"]["limits"]["easyscale.io/gpu"], "1");
  EXPECT_EQ(c["resources"]["requests"]["cpu"], "1");
  EXPECT_EQ(c["resources"]["requests"]["memory"], "2Gi");
  EXPECT_EQ(c["resources"]["limits"]["memory"], "4Gi");
  EXPECT_EQ(pod["spec"]["nodeSelector"]["easyscale.io/gpu-type"], "a100");
  EXPECT_EQ(pod["spec"]["automountServiceAccountToken"], false);
  EXPECT_EQ(c["ports"][0]["containerPort"], op::kWorkerStatePort);
  // No claim: nothing but /dev/shm; the state moves over the network.
  std::set<std::string> volumes;
  for (const json& v : pod["spec"]["volumes"]) volumes.insert(v["name"]);
  EXPECT_EQ(volumes, (std::set<std::string>{"shm"}));
  EXPECT_EQ(pod["spec"]["volumes"][0]["emptyDir"]["medium"], "Memory");
  EXPECT_EQ(pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "1Gi");
}

TEST_F(OperatorObjects, CpuWorkerPodWithClaimAndPodSettings) {
  const JobSpec spec = Spec(
      {{"checkpoint", {{"claimName", "mnist-ckpt"}, {"mountPath", "/ckpt"}}},
       {"worker",
        {{"resources",
          {{"requests", {{"cpu", "3"}, {"memory", "6Gi"}}}, {"limits", {{"cpu", "4"}}}}},
         {"tolerations", {{{"key", "spot"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}},
         {"nodeSelector", {{"topology.kubernetes.io/zone", "z1"}}},
         {"imagePullSecrets", {{{"name", "regcred"}}}},
         {"serviceAccountName", "trainer"},
         {"shmSize", "8Gi"}}}});
  const json pod = Pod(spec, "cpu");
  const json& c = pod["spec"]["containers"][0];
  EXPECT_FALSE(c["resources"]["limits"].contains("easyscale.io/gpu"));
  EXPECT_EQ(c["resources"]["requests"], json({{"cpu", "3"}, {"memory", "6Gi"}}));
  EXPECT_EQ(c["resources"]["limits"], json({{"cpu", "4"}}));
  EXPECT_EQ(pod["spec"]["tolerations"][0]["key"], "spot");
  EXPECT_EQ(pod["spec"]["nodeSelector"],
            json({{"topology.kubernetes.io/zone", "z1"}, {"easyscale.io/gpu-type", "cpu"}}));
  EXPECT_EQ(pod["spec"]["imagePullSecrets"][0]["name"], "regcred");
  EXPECT_EQ(pod["spec"]["serviceAccountName"], "trainer");
  EXPECT_EQ(pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "8Gi");
  EXPECT_EQ(pod["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"], "mnist-ckpt");
  EXPECT_EQ(c["volumeMounts"][1]["mountPath"], "/ckpt");
  EXPECT_EQ(op::DurableCheckpointDir(spec, kJob["metadata"]["uid"]),
            "/ckpt/0b7f1c2e-2d7a-4c55-9e8e-6a4f1d2f9a10");
}

// The user's claims (model and data read-only, output writable) beside the
// operator's own mounts, readOnly in the claim's source and in the mount.
TEST_F(OperatorObjects, WorkerPodMountsTheJobsVolumes) {
  const JobSpec spec =
      Spec({{"training", {{"model", "file"}, {"modelFile", "/models/resnet18.onnx"}}},
            {"checkpoint", {{"claimName", "mnist-ckpt"}, {"mountPath", "/ckpt"}}},
            {"worker",
             {{"volumes",
               {{{"name", "models"},
                 {"claimName", "team-models"},
                 {"mountPath", "/models"},
                 {"readOnly", true}},
                {{"name", "output"}, {"claimName", "team-output"}, {"mountPath", "/output"}}}}}}});
  const json pod = Pod(spec, "a100");
  std::map<std::string, json> volumes, mounts;
  for (const json& v : pod["spec"]["volumes"]) volumes[v["name"]] = v;
  for (const json& m : pod["spec"]["containers"][0]["volumeMounts"]) mounts[m["name"]] = m;
  EXPECT_EQ(volumes.size(), 4u) << pod["spec"]["volumes"];
  EXPECT_EQ(volumes["models"]["persistentVolumeClaim"],
            json({{"claimName", "team-models"}, {"readOnly", true}}));
  EXPECT_EQ(mounts["models"],
            json({{"name", "models"}, {"mountPath", "/models"}, {"readOnly", true}}));
  EXPECT_EQ(volumes["output"]["persistentVolumeClaim"],
            json({{"claimName", "team-output"}, {"readOnly", false}}));
  EXPECT_EQ(mounts["output"]["readOnly"], false);
  EXPECT_EQ(mounts["output"]["mountPath"], "/output");
  EXPECT_EQ(mounts["checkpoint"]["mountPath"], "/ckpt");
  EXPECT_EQ(mounts["shm"]["mountPath"], "/dev/shm");
}

TEST_F(OperatorObjects, BadPodSettingsAreRejectedNamingTheField) {
  const std::pair<const char*, std::string> cases[] = {
      {R"({"resources": {"requests": {"nvidia.com/gpu": "1"}}})",
       "spec.worker.resources.requests.nvidia.com/gpu: unsupported resource"},
      {R"({"resources": {"limits": {"memory": "lots"}}})",
       "spec.worker.resources.limits.memory: \"lots\" is not a quantity"},
      {R"({"tolerations": [{"operator": "Equal", "value": "x"}]})",
       "spec.worker.tolerations[0].operator: must be Exists when key is empty"},
      {R"({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]})",
       "spec.worker.tolerations[0].value: must be empty when operator is Exists"},
      {R"({"nodeSelector": {"easyscale.io/gpu-type": "a100"}})",
       "spec.worker.nodeSelector.easyscale.io/gpu-type: easyscale.io/ labels are the operator's"},
      {R"({"serviceAccountName": "Not_A_Name"})", "spec.worker.serviceAccountName: not a DNS-1123"},
      {R"({"shmSize": "1Gx"})", "spec.worker.shmSize: \"1Gx\" is not a quantity"},
      {R"({"volumes": [{"name": "shm", "claimName": "c", "mountPath": "/c"}]})",
       "spec.worker.volumes[0].name: \"shm\" is the operator's own volume"},
      {R"({"volumes": [{"name": "d", "claimName": "c", "mountPath": "/dev"}]})",
       "spec.worker.volumes[0].mountPath: \"/dev\" overlaps the operator's mount at /dev/shm"},
      {R"({"volumes": [{"name": "a", "claimName": "c", "mountPath": "/a"},
                       {"name": "b", "claimName": "c", "mountPath": "/a/b"}]})",
       "spec.worker.volumes[1].mountPath: \"/a/b\" overlaps spec.worker.volumes[0].mountPath"},
  };
  for (const auto& [worker, want] : cases) {
    const json spec = {{"image", "w"}, {"ests", 2}, {"worker", json::parse(worker)}};
    StatusOr<JobSpec> s = ParseJobSpec(spec);
    ASSERT_FALSE(s.ok()) << spec.dump();
    EXPECT_EQ(std::string(s.status().message()).rfind(want, 0), 0u) << s.status().message();
  }
}

TEST_F(OperatorObjects, SecretAndNetworkPolicyHaveTheirShapes) {
  json secret = op::BuildControlSecret(kJob, std::string(64, 'a'));
  EXPECT_EQ(shapes_->Validate(&secret), std::vector<std::string>{});
  EXPECT_EQ(secret["metadata"]["name"], "mnist-control-0b7f1c2e");
  json policy = op::BuildWorkerNetworkPolicy(kJob);
  EXPECT_EQ(shapes_->Validate(&policy), std::vector<std::string>{});
  EXPECT_EQ(policy["metadata"]["ownerReferences"][0]["uid"], kJob["metadata"]["uid"]);
}

TEST_F(OperatorObjects, CertificateHistoryConfigMapHasItsShape) {
  json history = op::BuildCertificateConfigMap(kJob, {{20, std::string(64, 'a')}});
  EXPECT_EQ(shapes_->Validate(&history), std::vector<std::string>{});
  EXPECT_EQ(history["metadata"]["ownerReferences"][0]["uid"], kJob["metadata"]["uid"]);
}

}  // namespace
}  // namespace easyscale::deploytest
