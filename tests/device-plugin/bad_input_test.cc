// Bad input runs the binary and checks its exit code and message: a clear
// message and a clean exit, or a degraded but correct state.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fake_kubelet.h"
#include "plugin_process.h"

namespace easyscale::dp::testing {
namespace {

using std::chrono::seconds;

struct Result {
  int code;
  std::string out, err;
};

Result RunToExit(const TempDir& dir, const std::vector<std::string>& args) {
  PluginProcess p(dir.path(), args);
  const int code = p.Wait(seconds(20));
  return {code, p.Stdout(), p.Stderr()};
}

TEST(BadInput, MalformedInventoryNamesTheField) {
  TempDir dir;
  dir.Write("inv.json", R"({"devices": [{"id": "gpu0", "type": "h200", "index": 0},
                                        {"id": "gpu1", "type": "h200", "index": 1,
                                         "memoryMiB": -5}]})");
  const Result r = RunToExit(dir, {"--inventory-file", dir.path() + "/inv.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("devices[1].memoryMiB: must be >= 0, got -5"), std::string::npos) << r.err;
}

TEST(BadInput, InventoryThatIsNotJson) {
  TempDir dir;
  dir.Write("inv.json", "devices:\n  - id: gpu0\n");
  const Result r = RunToExit(dir, {"--inventory-file", dir.path() + "/inv.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("inv.json: not valid JSON"), std::string::npos) << r.err;
}

TEST(BadInput, MissingInventoryFile) {
  TempDir dir;
  const Result r = RunToExit(dir, {"--inventory-file", dir.path() + "/absent.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("absent.json"), std::string::npos) << r.err;
}

// Regression (issue 16): --inventory-file /dev/zero grew to gigabytes. Only a
// regular file is read; checked that this fails on the code before the fix.
TEST(BadInput, InventoryThatIsADevice) {
  TempDir dir;
  const Result r = RunToExit(dir, {"--inventory-file", "/dev/zero"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/dev/zero: is a character device, not a regular file"), std::string::npos)
      << r.err;
}

TEST(BadInput, SocketFolderThatDoesNotExist) {
  TempDir dir;
  dir.Write("inv.json", R"({"devices": []})");
  const Result r =
      RunToExit(dir, {"--inventory-file", dir.path() + "/inv.json", "--kubelet-socket",
                      dir.path() + "/no/such/folder/kubelet.sock", "--publish", "off"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("device-plugin folder"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

TEST(BadInput, UnknownOrBadFlags) {
  TempDir dir;
  Result r = RunToExit(dir, {"--watch-interval-ms", "soon"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--watch-interval-ms: must be an integer"), std::string::npos) << r.err;
  r = RunToExit(dir, {"--no-such-flag", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown flag --no-such-flag"), std::string::npos) << r.err;
}

TEST(NvmlMissing, DiscoverOnlySaysSoAndExits3) {
  TempDir dir;
  const Result r =
      RunToExit(dir, {"--discover-only", "--nvml-library", dir.path() + "/libnvidia-ml.so.1"});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("NVML not found"), std::string::npos) << r.err;
  const auto out = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << r.out;
  EXPECT_EQ(out["source"], "none");
  EXPECT_TRUE(out["devices"].empty());
}

TEST(NvmlMissing, ServesZeroDevicesAndSaysWhy) {
  TempDir dir;
  FakeKubelet kubelet(dir.path());
  kubelet.StartRegistration();
  PluginProcess p(dir.path(), {"--kubelet-socket", kubelet.registration_socket(), "--nvml-library",
                               dir.path() + "/libnvidia-ml.so.1", "--publish", "off"});
  ASSERT_EQ(kubelet.WaitForRegistrations(1, seconds(15)).size(), 1u) << p.Stderr();
  auto stub = kubelet.DialPlugin("easyscale-gpu.sock");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
  auto reader = stub->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  EXPECT_EQ(resp.devices_size(), 0);
  ctx.TryCancel();
  EXPECT_NE(p.Stderr().find("advertising 0 devices"), std::string::npos) << p.Stderr();
  EXPECT_NE(p.Stderr().find("NVML not found"), std::string::npos);
}

}  // namespace
}  // namespace easyscale::dp::testing
