// The chart as a user installs it, and the operator as its Deployment runs it:
// `helm install` of charts/easyscale into the test API server; an operator pod
// made from the rendered Deployment's pod template, as the ReplicaSet
// controller and the scheduler would, run by the stand-in kubelet from the
// container's args and env alone, in-cluster (service account token and
// ca.crt, KUBERNETES_SERVICE_HOST/PORT) on a pod network of its own; worker
// pods reaching it through the control Service's name. An EasyScaleJob applied
// with kubectl runs to Succeeded with the fixed run's digest, through a
// `kubectl drain` of one worker's node (an eviction, which is no failure of
// the job), and `kubectl get esj` shows the CRD's printer columns. Needs root
// (CI is root), helm and kubectl (scripts/install-deps.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_split.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/subprocess.h"
#include "pod_runtimes.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const Resource kDeployments{"apps", "v1", "deployments", "Deployment"};
constexpr const char* kNamespace = "easyscale-system";
// The chart's images, as a user's nodes would pull them (values.yaml defaults).
constexpr const char* kOperatorImage = "docker.io/easyscale/easyscale-operator";
constexpr const char* kWorkerImage = "docker.io/easyscale/easyscale-worker";

std::string Tool(const std::string& name) {
  return std::string(EASYSCALE_SOURCE_DIR) + "/third_party/tools/" + name;
}

class HelmDeployedOperator : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for the pods' namespaces (CI runs as root)";
    for (const char* tool : {"helm", "kubectl"}) {
      if (access(Tool(tool).c_str(), X_OK) != 0) {
        GTEST_SKIP() << Tool(tool) << " is not installed (scripts/install-deps.sh)";
      }
    }
    worker_ = WorkerBinary();
    ASSERT_FALSE(worker_.empty()) << "easyscale-worker is not built";
  }

  // Runs helm or kubectl with the cluster's kubeconfig; the output, or the
  // exit code and stderr as the failure.
  static StatusOr<std::string> Run(TestCluster& c, const std::string& tool,
                                   std::vector<std::string> args) {
    args.insert(args.begin(), {Tool(tool), "--kubeconfig", c.kubeconfig()});
    StatusOr<CommandResult> r = RunCommand(
        {.argv = std::move(args), .stdoutTo = Output::Pipe(), .stderrTo = Output::Pipe()}, 60s);
    if (!r.ok()) return r.status();
    if (r->exitCode != 0) {
      return absl::InternalError(tool + ": exit " + std::to_string(r->exitCode) + ": " + r->err);
    }
    return r->out;
  }

  std::string worker_;
};

// The pod the ReplicaSet controller makes from the Deployment's template,
// bound to `node` as the scheduler would bind it.
json PodFromTemplate(const json& deployment, const std::string& node) {
  const json& tmpl = deployment["spec"]["template"];
  json labels = tmpl["metadata"].value("labels", json::object());
  labels["pod-template-hash"] = "5c9d8f7b6";
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", deployment["metadata"].value("name", "") + "-5c9d8f7b6-x2k7q"},
                {"namespace", deployment["metadata"].value("namespace", "")},
                {"labels", labels}}},
              {"spec", tmpl["spec"]}};
  if (tmpl["metadata"].contains("annotations")) {
    pod["metadata"]["annotations"] = tmpl["metadata"]["annotations"];
  }
  pod["spec"]["nodeName"] = node;
  return pod;
}

TEST_F(HelmDeployedOperator, JobAppliedWithKubectlSucceedsWithTheFixedRunDigest) {
  TestCluster c("helm-deploy", {.isolatePods = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  const int64_t steps = 1200;
  const std::string reference = FixedRunDigest(worker_, c.dir(), steps);
  ASSERT_EQ(reference.size(), 64u) << "the fixed 8-worker run printed no digest";
  ASSERT_TRUE(c.AddNodes({{"n1", "h100", 1}, {"n2", "h100", 1}}).ok());

  // One replica: the stand-in kubelet runs no readiness probes, so the control
  // Service's name resolves to the one operator pod. CPU workers: no GPU here.
  StatusOr<std::string> installed =
      Run(c, "helm",
          {"install", "easyscale", std::string(EASYSCALE_SOURCE_DIR) + "/charts/easyscale",
           "--namespace", kNamespace, "--create-namespace", "--set", "operator.replicas=1", "--set",
           "operator.extraArgs={--worker-backend=cpu}"});
  ASSERT_TRUE(installed.ok()) << installed.status();

  std::map<std::string, std::unique_ptr<PodRuntime>> images;
  images[kOperatorImage] = std::make_unique<ProcessRuntime>(OperatorBinary(), c.dir(),
                                                            std::map<std::string, std::string>());
  images[kWorkerImage] = WorkerRuntime(worker_, c.dir(), false);
  c.StartKubelet(std::make_unique<ImageRuntimes>(std::move(images)));

  StatusOr<json> deployment = c.client().Get(kDeployments, kNamespace, "easyscale-operator");
  ASSERT_TRUE(deployment.ok()) << deployment.status();
  const json& container = (*deployment)["spec"]["template"]["spec"]["containers"][0];
  EXPECT_FALSE(container.contains("command")) << "the image's entrypoint runs the operator";
  EXPECT_EQ(container.value("image", ""), std::string(kOperatorImage) + ":0.1.0");
  const json pod = PodFromTemplate(*deployment, "n1");
  const std::string podName = pod["metadata"]["name"];
  ASSERT_TRUE(c.client().Create(kPods, kNamespace, pod).ok());
  const std::string operatorLog = c.dir() + "/" + podName + ".log";
  auto log = [&] { return ReadFile(operatorLog, 1 << 20).value_or("(no log)"); };

  // It found the API server in-cluster and leads under its pod name in its
  // own namespace (the Lease), both from what the kubelet gave the pod.
  ASSERT_TRUE(Eventually(
      [&] {
        StatusOr<json> lease = c.client().Get(kLeases, kNamespace, "easyscale-operator");
        return lease.ok() && (*lease)["spec"].value("holderIdentity", "") == podName;
      },
      30s))
      << log();

  const std::string manifest = c.dir() + "/job.yaml";
  ASSERT_TRUE(WriteFileAtomic(manifest,
                              "apiVersion: easyscale.io/v1alpha1\n"
                              "kind: EasyScaleJob\n"
                              "metadata:\n"
                              "  name: mnist\n"
                              "  namespace: default\n"
                              "spec:\n"
                              "  image: " +
                                  std::string(kWorkerImage) +
                                  ":0.1.0\n"
                                  "  ests: 8\n"
                                  "  maxWorkers: 2\n"
                                  "  training:\n"
                                  "    model: mlp\n"
                                  "    steps: " +
                                  std::to_string(steps) + "\n")
                  .ok());
  StatusOr<std::string> applied = Run(c, "kubectl", {"apply", "-f", manifest});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(*applied, "easyscalejob.easyscale.io/mnist created\n");

  // The cluster evicts the worker on n2 (as the autoscaler or a node-pressure
  // eviction would, through pods/eviction): a new worker takes its place, from
  // the job's state, and no failure is counted.
  auto running = [&](int64_t minStep) {
    return Eventually(
        [&] {
          const json st = c.JobStatus("mnist");
          return st.value("workerCount", 0) == 2 && st.value("step", int64_t{0}) >= minStep &&
                 st.value("runningGeneration", 0) == st.value("generation", 0);
        },
        60s);
  };
  ASSERT_TRUE(running(20)) << c.JobStatus("mnist").dump() << "\n" << log();
  // The worker on n2 now (a pod the status names may be gone or not yet made).
  auto evictTheWorkerOnN2 = [&]() -> Status {
    const json workers = c.JobStatus("mnist")["workers"];
    for (const json& w : workers) {
      if (w.value("node", "") != "n2") continue;
      const std::string pod = w.value("pod", "");
      const std::string file = c.dir() + "/eviction.json";
      ES_RETURN_IF_ERROR(
          WriteFileAtomic(file, json{{"apiVersion", "policy/v1"},
                                     {"kind", "Eviction"},
                                     {"metadata", {{"name", pod}, {"namespace", "default"}}}}
                                    .dump()));
      return Run(c, "kubectl",
                 {"create", "--raw", "/api/v1/namespaces/default/pods/" + pod + "/eviction", "-f",
                  file})
          .status();
    }
    return absl::NotFoundError("no worker on n2: " + workers.dump());
  };
  Status evicted;
  ASSERT_TRUE(Eventually([&] { return (evicted = evictTheWorkerOnN2()).ok(); }, 30s))
      << evicted << "\n"
      << Run(c, "kubectl", {"get", "pods", "-A", "-o", "wide"}).value_or("?");
  ASSERT_TRUE(Eventually([&] { return c.EventCount("mnist", "WorkerDisrupted") >= 1; }, 30s))
      << log();
  const int64_t step = c.JobStatus("mnist").value("step", int64_t{0});
  ASSERT_TRUE(running(step + 20)) << c.JobStatus("mnist").dump() << "\n" << log();
  EXPECT_EQ(c.JobStatus("mnist").value("restarts", 0), 0) << "an eviction is no failure";

  // Node maintenance: kubectl cordons n2 and evicts the worker there. The
  // job goes on on n1 alone.
  StatusOr<std::string> drained =
      Run(c, "kubectl",
          {"drain", "n2", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s"});
  ASSERT_TRUE(drained.ok()) << drained.status() << "\n" << log();
  EXPECT_NE(drained->find("evicted"), std::string::npos) << *drained;
  EXPECT_NE(drained->find("node/n2 drained"), std::string::npos) << *drained;

  ASSERT_TRUE(
      Eventually([&] { return c.JobStatus("mnist").value("phase", "") == "Succeeded"; }, 120s))
      << c.JobStatus("mnist").dump() << "\n"
      << log();
  EXPECT_EQ(c.JobStatus("mnist").value("digest", ""), reference);
  EXPECT_LT(c.JobStatus("mnist")["restore"].value("step", int64_t{0}), steps)
      << "the drain came after the last step";
  EXPECT_EQ(c.JobStatus("mnist").value("restarts", 0), 0) << "a drain is no failure";
  // The workers reached the operator by the control Service's name.
  for (const json& w : c.WorkerPods("mnist")) {
    for (const json& e : w["spec"]["containers"][0]["env"]) {
      if (e.value("name", "") == "EASYSCALE_CONTROL_URL") {
        EXPECT_EQ(e.value("value", ""),
                  "http://easyscale-operator-control.easyscale-system.svc:8090");
      }
    }
  }

  StatusOr<std::string> table = Run(c, "kubectl", {"get", "esj"});
  ASSERT_TRUE(table.ok()) << table.status();
  const std::vector<std::string> lines = absl::StrSplit(*table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << *table;
  const std::vector<std::string> header = absl::StrSplit(lines[0], ' ', absl::SkipEmpty());
  EXPECT_EQ(header,
            (std::vector<std::string>{"NAME", "PHASE", "ESTS", "WORKERS", "GPU", "TYPES", "STEP",
                                      "PROGRESS", "ETA", "CERTIFIED", "PREEMPTIONS", "AGE"}))
      << *table;
  const std::vector<std::string> row = absl::StrSplit(lines[1], ' ', absl::SkipEmpty());
  ASSERT_GE(row.size(), 5u) << *table;
  EXPECT_EQ(row[0], "mnist");
  EXPECT_EQ(row[1], "Succeeded");
  EXPECT_EQ(row[2], "8");
  EXPECT_NE(lines[1].find(" " + std::to_string(steps) + " "), std::string::npos) << *table;
  EXPECT_NE(lines[1].find(" 100 "), std::string::npos) << "progress: " << *table;
}

}  // namespace
}  // namespace easyscale::op::testing
