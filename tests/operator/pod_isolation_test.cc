// The pods of a TestCluster with isolatePods share nothing but the network,
// like pods on separate nodes: each has its own address on the pod network,
// reaches the other pods and the host's address there but not the host's
// loopback; an emptyDir is the pod's own, a claim is shared by the pods that
// mount it (read-only when it says so), and nothing of either shows on the
// host; and the cluster leaves no
// namespace or link behind, nor lets dead test processes' leftovers stay.
// Needs root (skipped otherwise; CI runs as root).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "easyscale/common/file_io.h"
#include "easyscale/common/subprocess.h"
#include "pod_network.h"
#include "pod_runtimes.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr char kNeedsRoot[] = "needs root: network namespaces, veth pairs, a bridge and mounts";

json Pod(const std::string& name, std::vector<std::string> command) {
  return {{"metadata", {{"name", name}}},
          {"spec",
           {{"nodeName", "n1"},
            {"containers",
             {{{"name", "main"},
               {"image", "debian"},
               {"command", command},
               {"env",
                {{{"name", "POD_IP"},
                  {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}}}}}}}}}};
}

json ShellPod(const std::string& name, const std::string& script) {
  return Pod(name, {"/bin/sh", "-c", script});
}

class PodIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
    ASSERT_TRUE(c_.StartApiServer().ok());
    ASSERT_TRUE(c_.AddNodes({{"n1", "a100", 1}}).ok());
    c_.StartKubelet(
        std::make_unique<ProcessRuntime>("", c_.dir(), std::map<std::string, std::string>{}));
  }

  void Create(const json& pod) {
    StatusOr<json> created = c_.client().Create(kPods, "default", pod);
    ASSERT_TRUE(created.ok()) << created.status();
  }
  json Get(const std::string& name) {
    StatusOr<json> p = c_.client().Get(kPods, "default", name);
    return p.ok() ? *p : json::object();
  }
  std::string Phase(const std::string& name) {
    return Get(name).value("status", json::object()).value("phase", "");
  }
  // Waits for the pod to end; true when it succeeded.
  bool Succeeds(const std::string& name) {
    Eventually([&] { return Phase(name) == "Succeeded" || Phase(name) == "Failed"; }, 30s);
    return Phase(name) == "Succeeded";
  }
  std::string Log(const std::string& name) {
    StatusOr<std::string> log = ReadFile(c_.dir() + "/" + name + ".log", 1 << 24);
    return log.ok() ? *log : "";
  }

  TestCluster c_{"pod-isolation", {.isolatePods = true}};
};

TEST_F(PodIsolationTest, PodsReachEachOtherAndTheHostButNotTheHostsLoopback) {
  // A server on the host, on every address of the root namespace.
  const std::string hostPort = std::to_string(FreePort());
  StatusOr<Subprocess> host = Subprocess::Start({.argv = {POD_PROBE_BIN, "serve", hostPort},
                                                 .env = {{"POD_IP", c_.hostAddress()}},
                                                 .parentDeathSignal = SIGKILL});
  ASSERT_TRUE(host.ok()) << host.status();

  Create(Pod("server", {POD_PROBE_BIN, "serve", "7000"}));
  ASSERT_TRUE(Eventually([&] { return Phase("server") == "Running"; })) << Get("server");
  const std::string serverIp = Get("server")["status"]["podIP"];
  const std::string subnet = c_.hostAddress().substr(0, c_.hostAddress().rfind('.') + 1);
  EXPECT_EQ(serverIp.rfind(subnet, 0), 0u) << serverIp << " is not on " << subnet << "0/24";
  EXPECT_NE(serverIp, c_.hostAddress());

  // The server answers with its POD_IP: the downward API's address is the real one.
  const std::string probe = POD_PROBE_BIN;
  Create(ShellPod("client", probe + " connect " + serverIp + " 7000 && " + probe + " connect " +
                                c_.hostAddress() + " " + hostPort + " && " + probe +
                                " unreachable 127.0.0.1 " + hostPort));
  EXPECT_TRUE(Succeeds("client")) << Log("client");
  const std::string clientIp = Get("client")["status"]["podIP"];
  EXPECT_EQ(clientIp.rfind(subnet, 0), 0u);
  EXPECT_NE(clientIp, serverIp);
}

TEST_F(PodIsolationTest, EmptyDirIsPrivateAndAClaimIsSharedOnlyByItsPods) {
  const std::string scratch = c_.dir() + "/mnt/scratch";
  const std::string shared = c_.dir() + "/mnt/shared";
  auto withVolumes = [&](json pod, const std::string& claim) {
    pod["spec"]["volumes"] = {
        {{"name", "scratch"}, {"emptyDir", json::object()}},
        {{"name", "shared"}, {"persistentVolumeClaim", {{"claimName", claim}}}}};
    pod["spec"]["containers"][0]["volumeMounts"] = {{{"name", "scratch"}, {"mountPath", scratch}},
                                                    {{"name", "shared"}, {"mountPath", shared}}};
    return pod;
  };
  Create(withVolumes(
      ShellPod("writer", "echo w > " + scratch + "/mine && echo w > " + shared + "/from-writer"),
      "claim-a"));
  ASSERT_TRUE(Succeeds("writer")) << Log("writer");

  // Another pod with the same claim sees the claim's file but not the
  // writer's emptyDir, nor the host folder that holds every pod's volumes.
  Create(withVolumes(
      ShellPod("reader", "test ! -e " + scratch + "/mine && test -e " + shared +
                             "/from-writer && test -z \"$(ls -A " + c_.dir() + "/volumes)\""),
      "claim-a"));
  // A pod with another claim sees neither.
  Create(withVolumes(ShellPod("stranger", "test ! -e " + scratch + "/mine && test ! -e " + shared +
                                              "/from-writer"),
                     "claim-b"));
  EXPECT_TRUE(Succeeds("reader")) << Log("reader");
  EXPECT_TRUE(Succeeds("stranger")) << Log("stranger");

  // The mounts stayed in the pods: the host's mount points are empty.
  EXPECT_TRUE(std::filesystem::is_empty(scratch));
  EXPECT_TRUE(std::filesystem::is_empty(shared));
}

// readOnly in the volumeMount or in the claim's source mounts the claim
// read-only, as kubelet does: its files can be read, nothing written.
TEST_F(PodIsolationTest, AReadOnlyClaimIsReadableButNotWritable) {
  const std::string mount = c_.dir() + "/mnt/models";
  ASSERT_TRUE(MakeDirs(c_.ClaimDir("default", "models")).ok());
  ASSERT_TRUE(WriteFileAtomic(c_.ClaimDir("default", "models") + "/model.onnx", "weights").ok());
  auto withClaim = [&](json pod, bool mountReadOnly, bool sourceReadOnly) {
    pod["spec"]["volumes"] = json::array(
        {{{"name", "models"},
          {"persistentVolumeClaim", {{"claimName", "models"}, {"readOnly", sourceReadOnly}}}}});
    pod["spec"]["containers"][0]["volumeMounts"] =
        json::array({{{"name", "models"}, {"mountPath", mount}, {"readOnly", mountReadOnly}}});
    return pod;
  };
  const std::string readsButCannotWrite = "test \"$(cat " + mount +
                                          "/model.onnx)\" = weights && ! touch " + mount +
                                          "/new 2>/dev/null && ! rm " + mount + "/model.onnx";
  Create(withClaim(ShellPod("mount-ro", readsButCannotWrite), true, false));
  Create(withClaim(ShellPod("source-ro", readsButCannotWrite), false, true));
  // The same claim writable: the check above fails, so it tests the mounts.
  Create(withClaim(ShellPod("writable", "touch " + mount + "/new"), false, false));
  EXPECT_TRUE(Succeeds("mount-ro")) << Log("mount-ro");
  EXPECT_TRUE(Succeeds("source-ro")) << Log("source-ro");
  EXPECT_TRUE(Succeeds("writable")) << Log("writable");
  EXPECT_TRUE(std::filesystem::exists(c_.ClaimDir("default", "models") + "/new"));
  EXPECT_TRUE(std::filesystem::exists(c_.ClaimDir("default", "models") + "/model.onnx"));
}

// Real workers on three nodes, each pod on its own address: they reach the
// operator at the network's host address and each other over the pod network,
// and share only the job's claim.
TEST(IsolatedCluster, RealWorkersTrainOverThePodNetwork) {
  if (geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string worker = WorkerBinary();
  if (worker.empty()) GTEST_SKIP() << "needs easyscale-worker (not built)";
  TestCluster c("isolated-workers", {.isolatePods = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  ASSERT_TRUE(c.AddNodes({{"n1", "a100", 1}, {"n2", "h100", 1}, {"n3", "a100", 1}}).ok());
  OperatorProcess* op = c.StartWithRealWorkers("op", worker);
  ASSERT_TRUE(Eventually([&] { return op->Ready(); })) << op->LogTail();
  const json spec = {{"image", "easyscale/worker:test"},
                     {"ests", 6},
                     {"maxWorkers", 3},
                     {"training", {{"model", "mlp"}, {"steps", 300}, {"checkpointEvery", 20}}},
                     {"checkpoint", {{"claimName", "ckpt"}, {"mountPath", c.dir() + "/ckpt"}}}};
  ASSERT_TRUE(c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", spec)).ok());
  std::set<std::string> ips;  // while they train: each worker pod has an address of its own
  ASSERT_TRUE(Eventually(
      [&] {
        ips.clear();
        for (const json& p : c.WorkerPods("j")) {
          if (p["status"].value("phase", "") == "Running")
            ips.insert(p["status"].value("podIP", ""));
        }
        return ips.size() == 3;
      },
      60s))
      << c.JobStatus("j");
  EXPECT_EQ(ips.count(c.hostAddress()), 0u);
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Succeeded"; }, 90s))
      << c.JobStatus("j") << " in " << c.dir();
  EXPECT_EQ(c.JobStatus("j").value("digest", "").size(), 64u);
}

TEST(PodNetworkCleanup, NothingOfAClusterStaysAndLeftoversOfDeadProcessesGo) {
  if (geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  // What a test process that died would have left: a namespace with a pod's
  // process still in it, and a link, named with its pid.
  StatusOr<Subprocess> gone = Subprocess::Start({.argv = {"true"}});
  ASSERT_TRUE(gone.ok());
  const pid_t dead = gone->pid();
  ASSERT_EQ(gone->Wait(10s), 0);
  const std::string ns = "easyscale-" + std::to_string(dead) + "-0-pod-0";
  const std::string link = "es" + std::to_string(dead) + "h0";
  for (std::vector<std::string> ip :
       {std::vector<std::string>{"ip", "netns", "add", ns},
        {"ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns}}) {
    StatusOr<CommandResult> made = RunCommand({.argv = ip, .stderrTo = Output::Pipe()}, 10s);
    ASSERT_TRUE(made.ok() && made->exitCode == 0) << made.status() << (made.ok() ? made->err : "");
  }
  StatusOr<Subprocess> straggler =
      Subprocess::Start({.argv = {"ip", "netns", "exec", ns, "sleep", "1000"}});
  ASSERT_TRUE(straggler.ok());

  {
    TestCluster c("pod-network-cleanup", {.isolatePods = true});
    ASSERT_TRUE(c.StartApiServer().ok());
    EXPECT_TRUE(PodNetwork::ResourcesOf(dead).empty()) << "leftovers of a dead process stayed";
    EXPECT_EQ(straggler->Wait(5s), 128 + SIGKILL) << "its pod's process is still running";
    ASSERT_TRUE(c.AddNodes({{"n1", "a100", 1}}).ok());
    c.StartKubelet(
        std::make_unique<ProcessRuntime>("", c.dir(), std::map<std::string, std::string>{}));
    for (const char* name : {"a", "b"}) {
      ASSERT_TRUE(c.client().Create(kPods, "default", ShellPod(name, "exec sleep 1000")).ok());
    }
    ASSERT_TRUE(Eventually([&] {
      return PodNetwork::ResourcesOf(getpid()).size() == 4;  // bridge's, 2 pods', host link
    })) << ::testing::PrintToString(PodNetwork::ResourcesOf(getpid()));
  }
  EXPECT_EQ(PodNetwork::ResourcesOf(getpid()), std::vector<std::string>());
}

}  // namespace
}  // namespace easyscale::op::testing
