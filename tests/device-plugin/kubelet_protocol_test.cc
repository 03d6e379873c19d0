// The test plays kubelet: Registration and pod-resources servers on real Unix
// sockets in a temp folder, and the plugin binary runs as a child process.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fake_kubelet.h"
#include "plugin_process.h"

namespace easyscale::dp::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kEndpoint = "easyscale-gpu.sock";

// Three H200s: two on NUMA node 0, one on node 1.
std::string Inventory(bool gpu1_healthy) {
  nlohmann::json devices = nlohmann::json::array();
  for (int i = 0; i < 3; ++i) {
    devices.push_back({{"id", "gpu" + std::to_string(i)},
                       {"type", "h200"},
                       {"index", i},
                       {"uuid", "GPU-" + std::to_string(i)},
                       {"memoryMiB", 143771},
                       {"computeCapability", "9.0"},
                       {"numaNode", i < 2 ? 0 : 1},
                       {"healthy", i != 1 || gpu1_healthy},
                       {"devicePaths", {"/dev/nvidia" + std::to_string(i)}}});
  }
  return nlohmann::json{{"devices", devices}}.dump();
}

class KubeletProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("inventory.json", Inventory(true));
    kubelet_.StartRegistration();
    plugin_ = std::make_unique<PluginProcess>(
        dir_.path(),
        std::vector<std::string>{"--kubelet-socket", kubelet_.registration_socket(),         //
                                 "--inventory-file", dir_.path() + "/inventory.json",        //
                                 "--health-interval-ms", "50",                               //
                                 "--pod-resources-socket", kubelet_.pod_resources_socket(),  //
                                 "--publish-file", dir_.path() + "/node.json",               //
                                 "--publish-interval-ms", "50",                              //
                                 "--watch-interval-ms", "50"});
    ASSERT_EQ(kubelet_.WaitForRegistrations(1, seconds(15)).size(), 1u) << plugin_->Stderr();
    stub_ = kubelet_.DialPlugin(kEndpoint);
  }

  // Reads ListAndWatch responses until `want` holds (or the deadline).
  bool WatchUntil(const std::function<bool(const v1beta1::ListAndWatchResponse&)>& want) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    auto reader = stub_->ListAndWatch(&ctx, v1beta1::Empty());
    v1beta1::ListAndWatchResponse resp;
    while (reader->Read(&resp)) {
      if (want(resp)) {
        ctx.TryCancel();
        return true;
      }
    }
    return false;
  }

  // Opens a ListAndWatch stream for the test (ended at TearDown) and reads
  // its first response.
  bool OpenWatch(v1beta1::ListAndWatchResponse* first) {
    watch_ctx_.set_deadline(std::chrono::system_clock::now() + seconds(20));
    watch_ = stub_->ListAndWatch(&watch_ctx_, v1beta1::Empty());
    return watch_->Read(first);
  }
  void TearDown() override {
    if (watch_ != nullptr) watch_ctx_.TryCancel();
  }

  nlohmann::json PublishedGpus() {
    const std::string text = dir_.Read("node.json");
    const auto patch = nlohmann::json::parse(text, nullptr, false);
    if (patch.is_discarded() || !patch.contains("metadata")) return nullptr;
    return nlohmann::json::parse(
        patch["metadata"]["annotations"]["easyscale.io/gpus"].get<std::string>());
  }

  TempDir dir_;
  FakeKubelet kubelet_{dir_.path()};
  std::unique_ptr<PluginProcess> plugin_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  grpc::ClientContext watch_ctx_;
  std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>> watch_;
};

TEST_F(KubeletProtocolTest, RegistersWithVersionEndpointAndResource) {
  const auto regs = kubelet_.WaitForRegistrations(1, seconds(1));
  EXPECT_EQ(regs[0].version(), "v1beta1");
  EXPECT_EQ(regs[0].endpoint(), kEndpoint);
  EXPECT_EQ(regs[0].resource_name(), "easyscale.io/gpu");
  EXPECT_TRUE(regs[0].options().get_preferred_allocation_available());

  grpc::ClientContext ctx;
  v1beta1::DevicePluginOptions opts;
  ASSERT_TRUE(stub_->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &opts).ok());
  EXPECT_TRUE(opts.get_preferred_allocation_available());
}

TEST_F(KubeletProtocolTest, ListAndWatchSendsTheDeviceList) {
  EXPECT_TRUE(WatchUntil([](const v1beta1::ListAndWatchResponse& r) {
    if (r.devices_size() != 3) return false;
    for (int i = 0; i < 3; ++i) {
      const auto& d = r.devices(i);
      if (d.id() != "gpu" + std::to_string(i) || d.health() != "Healthy") return false;
      if (d.topology().nodes_size() != 1 || d.topology().nodes(0).id() != (i < 2 ? 0 : 1)) {
        return false;
      }
    }
    return true;
  }));
}

TEST_F(KubeletProtocolTest, HealthChangeReachesListAndWatchAndRecovers) {
  v1beta1::ListAndWatchResponse resp;
  ASSERT_TRUE(OpenWatch(&resp));
  ASSERT_EQ(resp.devices(1).health(), "Healthy");

  dir_.Write("inventory.json", Inventory(false));
  ASSERT_TRUE(watch_->Read(&resp));  // the stream pushes the change unasked
  EXPECT_EQ(resp.devices(1).health(), "Unhealthy");
  EXPECT_EQ(resp.devices(0).health(), "Healthy");

  dir_.Write("inventory.json", "{not json");  // a broken edit keeps the last health
  dir_.Write("inventory.json", Inventory(true));
  ASSERT_TRUE(watch_->Read(&resp));
  EXPECT_EQ(resp.devices(1).health(), "Healthy");  // Unhealthy is not one-way
}

TEST_F(KubeletProtocolTest, AllocateValidAndUnknownDevices) {
  {
    grpc::ClientContext ctx;
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    c->add_devices_ids("gpu0");
    c->add_devices_ids("gpu2");
    v1beta1::AllocateResponse resp;
    ASSERT_TRUE(stub_->Allocate(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.container_responses_size(), 1);
    const auto& r = resp.container_responses(0);
    EXPECT_EQ(r.envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-0,GPU-2");
    EXPECT_EQ(r.envs().at("CUDA_VISIBLE_DEVICES"), "GPU-0,GPU-2");
    EXPECT_EQ(r.envs().at("EASYSCALE_GPU_TYPE"), "h200");
    ASSERT_EQ(r.devices_size(), 2);
    EXPECT_EQ(r.devices(0).host_path(), "/dev/nvidia0");
    EXPECT_EQ(r.devices(1).container_path(), "/dev/nvidia2");
    EXPECT_EQ(r.annotations().at("easyscale.io/gpu-ids"), "gpu0,gpu2");
  }
  {
    grpc::ClientContext ctx;
    v1beta1::AllocateRequest req;
    req.add_container_requests()->add_devices_ids("gpu-does-not-exist");
    v1beta1::AllocateResponse resp;
    const grpc::Status s = stub_->Allocate(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("gpu-does-not-exist"), std::string::npos);
  }
  // Still serving after the bad request.
  grpc::ClientContext ctx;
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("gpu1");
  v1beta1::AllocateResponse resp;
  EXPECT_TRUE(stub_->Allocate(&ctx, req, &resp).ok());
}

TEST_F(KubeletProtocolTest, PreferredAllocationKeepsOneNumaNode) {
  grpc::ClientContext ctx;
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const char* id : {"gpu2", "gpu1", "gpu0"}) c->add_available_deviceids(id);
  c->set_allocation_size(2);
  v1beta1::PreferredAllocationResponse resp;
  ASSERT_TRUE(stub_->GetPreferredAllocation(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& ids = resp.container_responses(0).deviceids();
  ASSERT_EQ(ids.size(), 2);
  EXPECT_EQ(ids[0], "gpu0");
  EXPECT_EQ(ids[1], "gpu1");

  grpc::ClientContext bad_ctx;
  c->set_allocation_size(9);
  EXPECT_EQ(stub_->GetPreferredAllocation(&bad_ctx, req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(KubeletProtocolTest, ReRegistersWhenKubeletRestarts) {
  kubelet_.StopRegistration();  // kubelet stops: its socket goes away
  std::this_thread::sleep_for(milliseconds(200));
  kubelet_.StartRegistration();  // and comes back on a new socket
  const auto regs = kubelet_.WaitForRegistrations(2, seconds(15));
  ASSERT_EQ(regs.size(), 2u) << plugin_->Stderr();
  EXPECT_EQ(regs[1].resource_name(), "easyscale.io/gpu");

  // A restart between two polls (socket replaced at once) is noticed too.
  kubelet_.StartRegistration();
  ASSERT_EQ(kubelet_.WaitForRegistrations(3, seconds(15)).size(), 3u) << plugin_->Stderr();

  stub_ = kubelet_.DialPlugin(kEndpoint);  // the plugin still serves after restarting
  EXPECT_TRUE(WatchUntil([](const auto& r) { return r.devices_size() == 3; }));
}

TEST_F(KubeletProtocolTest, PublishesWhichPodsHoldGpus) {
  ASSERT_TRUE(WaitFor([&] { return PublishedGpus().is_array(); }, seconds(10)));
  EXPECT_TRUE(PublishedGpus()[1]["heldBy"].is_null());

  // An inference pod takes GPU-1 through the NVIDIA plugin, a training pod gpu2 through ours.
  kubelet_.SetPodResources({{"serving", "llm-0", "nvidia.com/gpu", {"GPU-1"}},
                            {"jobs", "mnist-w0", "easyscale.io/gpu", {"gpu2"}},
                            {"other", "fpga", "example.com/fpga", {"gpu0"}}});
  ASSERT_TRUE(
      WaitFor([&] { return PublishedGpus()[1]["heldBy"] == "serving/llm-0"; }, seconds(10)));
  auto gpus = PublishedGpus();
  EXPECT_TRUE(gpus[0]["heldBy"].is_null());  // other resources are not inference
  EXPECT_EQ(gpus[2]["trainingPod"], "jobs/mnist-w0");
  EXPECT_EQ(gpus[1]["type"], "h200");
  EXPECT_EQ(gpus[1]["memoryMiB"], 143771);

  const auto patch = nlohmann::json::parse(dir_.Read("node.json"));
  EXPECT_EQ(patch["metadata"]["labels"]["easyscale.io/gpu-type"], "h200");
  EXPECT_EQ(patch["metadata"]["labels"]["easyscale.io/gpu-count"], "3");

  kubelet_.SetPodResources({});  // the inference pod goes away
  ASSERT_TRUE(WaitFor([&] { return PublishedGpus()[1]["heldBy"].is_null(); }, seconds(10)));
  EXPECT_TRUE(PublishedGpus()[2]["trainingPod"].is_null());

  dir_.Write("inventory.json", Inventory(false));  // health changes are published too
  ASSERT_TRUE(WaitFor([&] { return PublishedGpus()[1]["healthy"] == false; }, seconds(10)));
  EXPECT_EQ(PublishedGpus()[0]["healthy"], true);
  EXPECT_EQ(
      nlohmann::json::parse(dir_.Read("node.json"))["metadata"]["labels"]["easyscale.io/gpu-count"],
      "2");
}

// kubelet counts and allocates easyscale.io/gpu from what ListAndWatch says,
// knowing nothing of the NVIDIA plugin's nvidia.com/gpu on the same GPUs: a GPU
// an inference pod holds is advertised Unhealthy until the pod lets it go, so
// no worker is admitted to it or given it.
TEST_F(KubeletProtocolTest, AGpuInferenceHoldsIsNotOfferedToKubelet) {
  v1beta1::ListAndWatchResponse resp;
  ASSERT_TRUE(OpenWatch(&resp));
  ASSERT_EQ(resp.devices(1).health(), "Healthy");

  kubelet_.SetPodResources({{"serving", "llm-0", "nvidia.com/gpu", {"GPU-1"}},
                            {"jobs", "mnist-w0", "easyscale.io/gpu", {"gpu2"}}});
  ASSERT_TRUE(watch_->Read(&resp));  // pushed unasked, within a publish interval
  EXPECT_EQ(resp.devices(0).health(), "Healthy");
  EXPECT_EQ(resp.devices(1).health(), "Unhealthy");
  EXPECT_EQ(resp.devices(2).health(), "Healthy");  // a worker's GPU is kubelet's to count
  // The published inventory keeps the GPU's own health; the holder says why.
  ASSERT_TRUE(
      WaitFor([&] { return PublishedGpus()[1]["heldBy"] == "serving/llm-0"; }, seconds(10)));
  EXPECT_EQ(PublishedGpus()[1]["healthy"], true);

  kubelet_.SetPodResources({});  // inference lets the GPU go
  ASSERT_TRUE(watch_->Read(&resp));
  EXPECT_EQ(resp.devices(1).health(), "Healthy");
}

TEST_F(KubeletProtocolTest, KeepsTheHoldersViewWhilePodResourcesIsDown) {
  ASSERT_TRUE(WaitFor([&] { return PublishedGpus().is_array(); }, seconds(10)));
  // kubelet restarts: pod-resources is gone for a while, the holders view is kept.
  kubelet_.SetPodResources({{"serving", "llm-0", "nvidia.com/gpu", {"GPU-0"}}});
  ASSERT_TRUE(
      WaitFor([&] { return PublishedGpus()[0]["heldBy"] == "serving/llm-0"; }, seconds(10)));
  kubelet_.StopPodResources();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(PublishedGpus()[0]["heldBy"], "serving/llm-0");
  kubelet_.SetPodResources({});
  kubelet_.StartPodResources();  // back: the view catches up within seconds
  EXPECT_TRUE(WaitFor([&] { return PublishedGpus()[0]["heldBy"].is_null(); }, seconds(10)))
      << plugin_->Stderr();
}

TEST(PodResources, NothingIsPublishedBeforeTheFirstAnswer) {
  TempDir dir;
  dir.Write("inventory.json", Inventory(true));
  FakeKubelet kubelet(dir.path());
  kubelet.StartRegistration();
  kubelet.StopPodResources();
  PluginProcess p(
      dir.path(),
      {"--kubelet-socket", kubelet.registration_socket(), "--inventory-file",
       dir.path() + "/inventory.json", "--pod-resources-socket", kubelet.pod_resources_socket(),
       "--publish-file", dir.path() + "/node.json", "--publish-interval-ms", "50"});
  ASSERT_EQ(kubelet.WaitForRegistrations(1, seconds(15)).size(), 1u) << p.Stderr();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Publishing all GPUs as idle would hand inference GPUs to training.
  EXPECT_EQ(dir.Read("node.json"), "");
  EXPECT_NE(p.Stderr().find("pod-resources List"), std::string::npos) << p.Stderr();
  kubelet.StartPodResources();
  EXPECT_TRUE(WaitFor([&] { return !dir.Read("node.json").empty(); }, seconds(10))) << p.Stderr();
}

TEST(KubeletRestarts, AreCappedAndThenTheBinaryExits) {
  TempDir dir;
  dir.Write("inventory.json", Inventory(true));
  FakeKubelet kubelet(dir.path());
  kubelet.StartRegistration();
  PluginProcess p(dir.path(), {"--kubelet-socket", kubelet.registration_socket(),
                               "--inventory-file", dir.path() + "/inventory.json", "--publish",
                               "off", "--watch-interval-ms", "50", "--max-restarts", "1"});
  ASSERT_EQ(kubelet.WaitForRegistrations(1, seconds(15)).size(), 1u) << p.Stderr();
  kubelet.StartRegistration();  // restart 1: allowed
  ASSERT_EQ(kubelet.WaitForRegistrations(2, seconds(15)).size(), 2u) << p.Stderr();
  kubelet.StartRegistration();  // restart 2: over the cap
  EXPECT_EQ(p.Wait(seconds(15)), 1);
  EXPECT_NE(p.Stderr().find("restarted more than 1 times in an hour"), std::string::npos)
      << p.Stderr();
}

}  // namespace
}  // namespace easyscale::dp::testing
