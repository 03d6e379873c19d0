// NVML discovery and XID health through a fake libnvidia-ml loaded with dlopen.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fake_kubelet.h"
#include "plugin_process.h"

namespace easyscale::dp::testing {
namespace {

using std::chrono::seconds;

TEST(FakeNvml, DiscoverOnlyReportsTheGpus) {
  TempDir dir;
  PluginProcess p(dir.path(), {"--discover-only", "--nvml-library", FAKE_NVML_LIBRARY});
  ASSERT_EQ(p.Wait(seconds(20)), 0) << p.Stderr();
  const auto out = nlohmann::json::parse(p.Stdout());
  EXPECT_EQ(out["source"], "nvml");
  EXPECT_EQ(out["note"], "driver 999.99-fake");
  ASSERT_EQ(out["devices"].size(), 2u);
  const auto& gpu = out["devices"][1];
  EXPECT_EQ(gpu["name"], "NVIDIA H200");
  EXPECT_EQ(gpu["type"], "h200");
  EXPECT_EQ(gpu["uuid"], "GPU-fake0000-0000-0000-0000-000000000001");
  EXPECT_EQ(gpu["id"], gpu["uuid"]);
  EXPECT_EQ(gpu["memoryMiB"], 143771);
  EXPECT_EQ(gpu["computeCapability"], "9.0");
  EXPECT_EQ(gpu["numaNode"], -1);
  EXPECT_EQ(gpu["index"], 1);
  EXPECT_EQ(gpu["devicePaths"][0], "/dev/nvidia1");
}

// Reads ListAndWatch until device 1 has `health`.
bool WaitForHealth(v1beta1::DevicePlugin::Stub* stub, const std::string& health) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(15));
  auto reader = stub->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse resp;
  while (reader->Read(&resp)) {
    if (resp.devices_size() == 2 && resp.devices(1).health() == health &&
        resp.devices(0).health() == "Healthy") {
      ctx.TryCancel();
      return true;
    }
  }
  return false;
}

TEST(FakeNvml, CriticalXidMakesAGpuUnhealthyUntilItRecovers) {
  TempDir dir;
  const std::string xid_file = dir.path() + "/xid";
  setenv("FAKE_NVML_XID_FILE", xid_file.c_str(), 1);  // inherited by the child
  FakeKubelet kubelet(dir.path());
  kubelet.StartRegistration();
  PluginProcess p(dir.path(),
                  {"--kubelet-socket", kubelet.registration_socket(), "--nvml-library",
                   FAKE_NVML_LIBRARY, "--xid-recovery-seconds", "1", "--publish", "off"});
  unsetenv("FAKE_NVML_XID_FILE");
  ASSERT_EQ(kubelet.WaitForRegistrations(1, seconds(15)).size(), 1u) << p.Stderr();
  auto stub = kubelet.DialPlugin("easyscale-gpu.sock");
  ASSERT_TRUE(WaitForHealth(stub.get(), "Healthy"));

  dir.Write("xid", "1 13\n");  // an application error: ignored
  ASSERT_TRUE(WaitFor([&] { return dir.Read("xid").empty(); }, seconds(10)));
  dir.Write("xid", "1 79\n");  // GPU fallen off the bus: critical
  EXPECT_TRUE(WaitForHealth(stub.get(), "Unhealthy")) << p.Stderr();
  EXPECT_NE(p.Stderr().find("critical XID 79"), std::string::npos) << p.Stderr();
  EXPECT_EQ(p.Stderr().find("critical XID 13"), std::string::npos);
  // One quiet second later the GPU answers again and is Healthy.
  EXPECT_TRUE(WaitForHealth(stub.get(), "Healthy")) << p.Stderr();
}

}  // namespace
}  // namespace easyscale::dp::testing
