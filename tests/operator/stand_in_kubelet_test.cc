// The stand-in kubelet against the test API server, with shell pods on the
// host and isolated: what the container's end writes (phase,
// containerStatuses), secretKeyRef resolved through the API server, and
// deletion: SIGTERM, SIGKILL after the pod's grace, then the deletion confirmed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "pod_runtimes.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A pod on n1 whose container runs `script` with /bin/sh.
json ShellPod(const std::string& name, const std::string& script, int graceSeconds = 30) {
  return {{"metadata", {{"name", name}}},
          {"spec",
           {{"nodeName", "n1"},
            {"terminationGracePeriodSeconds", graceSeconds},
            {"containers",
             {{{"name", "main"}, {"image", "debian"}, {"command", {"/bin/sh", "-c", script}}}}}}}};
}

// Pods on the host, and isolated pods (which need root).
class KubeletTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam() && geteuid() != 0) GTEST_SKIP() << "isolated pods need root";
    ASSERT_TRUE(c_.StartApiServer().ok());
    ASSERT_TRUE(c_.AddNodes({{"n1", "a100", 1}}).ok());
    c_.StartKubelet(
        std::make_unique<ProcessRuntime>("", c_.dir(), std::map<std::string, std::string>{}));
  }

  void Create(const json& pod) { ASSERT_TRUE(c_.client().Create(kPods, "default", pod).ok()); }
  json Pod(const std::string& name) {
    StatusOr<json> p = c_.client().Get(kPods, "default", name);
    return p.ok() ? *p : json();
  }
  std::string Phase(const std::string& name) {
    const json p = Pod(name);
    return p.is_object() ? p["status"].value("phase", "") : "gone";
  }
  json ContainerState(const std::string& name) {
    const json p = Pod(name);
    if (!p.is_object() || !p["status"].contains("containerStatuses")) return json::object();
    return p["status"]["containerStatuses"][0]["state"];
  }

  TestCluster c_{"kubelet", {.isolatePods = GetParam()}};
};

TEST_P(KubeletTest, ExitCodesReachContainerStatuses) {
  Create(ShellPod("ok", "exit 0"));
  Create(ShellPod("bad", "exit 3"));
  ASSERT_TRUE(Eventually([&] { return Phase("ok") == "Succeeded"; })) << Pod("ok");
  ASSERT_TRUE(Eventually([&] { return Phase("bad") == "Failed"; })) << Pod("bad");
  EXPECT_EQ(ContainerState("ok")["terminated"]["exitCode"], 0);
  EXPECT_EQ(ContainerState("ok")["terminated"]["reason"], "Completed");
  EXPECT_EQ(ContainerState("bad")["terminated"]["exitCode"], 3);
  EXPECT_EQ(ContainerState("bad")["terminated"]["reason"], "Error");
}

TEST_P(KubeletTest, SecretKeyRefIsReadFromTheApiServer) {
  json pod = ShellPod("reader", "test \"$TOKEN\" = s3cret");
  pod["spec"]["containers"][0]["env"] = {
      {{"name", "TOKEN"},
       {"valueFrom", {{"secretKeyRef", {{"name", "creds"}, {"key", "token"}}}}}}};
  Create(pod);
  // No such Secret yet: the pod waits, saying why.
  ASSERT_TRUE(Eventually([&] {
    return ContainerState("reader").value("waiting", json::object()).value("reason", "") ==
           "CreateContainerConfigError";
  })) << Pod("reader");
  EXPECT_EQ(Phase("reader"), "Pending");
  const json secret = {{"metadata", {{"name", "creds"}}}, {"stringData", {{"token", "s3cret"}}}};
  ASSERT_TRUE(c_.client().Create(kSecrets, "default", secret).ok());
  ASSERT_TRUE(Eventually([&] { return Phase("reader") == "Succeeded"; })) << Pod("reader");
}

TEST_P(KubeletTest, DeletionSendsSigtermThenSigkillAfterTheGrace) {
  const auto ready = [&](const std::string& pod) { return c_.dir() + "/" + pod + ".ready"; };
  Create(ShellPod("ignores-term",
                  "trap '' TERM; touch " + ready("ignores-term") + "; exec sleep 1000", 2));
  Create(ShellPod("obeys-term", "trap 'exit 0' TERM; touch " + ready("obeys-term") +
                                    "; while :; do sleep 0.05; done"));
  ASSERT_TRUE(Eventually([&] {
    return std::filesystem::exists(ready("ignores-term")) &&
           std::filesystem::exists(ready("obeys-term"));
  }));

  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(c_.client().Delete(kPods, "default", "ignores-term").ok());
  ASSERT_TRUE(c_.client().Delete(kPods, "default", "obeys-term").ok());
  // Gone as soon as it exits, long before its 30 s grace.
  ASSERT_TRUE(Eventually([&] { return Phase("obeys-term") == "gone"; }, 5s));
  EXPECT_NE(Phase("ignores-term"), "gone");
  ASSERT_TRUE(Eventually([&] { return Phase("ignores-term") == "gone"; }, 10s));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 2s);  // its grace
  EXPECT_LT(took, 6s);
}

// As kubelet's admission: a worker pod bound to a node whose GPUs are all in
// use fails at once (OutOfeasyscale.io/gpu, no container started).
TEST_P(KubeletTest, AWorkerPodBoundToAFullNodeIsRejected) {
  json first = ShellPod("w1", "sleep 60", 0);
  first["metadata"]["labels"] = {{"easyscale.io/role", "worker"}, {"easyscale.io/job", "j"}};
  Create(first);
  ASSERT_TRUE(Eventually([&] { return Phase("w1") == "Running"; })) << Pod("w1");
  json second = first;
  second["metadata"]["name"] = "w2";
  Create(second);
  ASSERT_TRUE(Eventually([&] { return Phase("w2") == "Failed"; })) << Pod("w2");
  const json status = Pod("w2")["status"];
  EXPECT_EQ(status.value("reason", ""), "OutOfeasyscale.io/gpu");
  EXPECT_EQ(status.value("message", ""),
            "Pod was rejected: Node didn't have enough resource: easyscale.io/gpu, requested: 1, "
            "used: 1, capacity: 1");
  EXPECT_FALSE(status.contains("containerStatuses"));
  EXPECT_EQ(Phase("w1"), "Running");
}

INSTANTIATE_TEST_SUITE_P(Pods, KubeletTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Isolated" : "OnTheHost"; });

}  // namespace
}  // namespace easyscale::op::testing
