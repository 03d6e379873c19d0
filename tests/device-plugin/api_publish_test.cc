// The node inventory reaches the API server as a JSON merge patch on the Node.
#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "fake_kubelet.h"
#include "plugin_process.h"

namespace easyscale::dp::testing {
namespace {

using std::chrono::seconds;

TEST(ApiServerPublish, PatchesTheNode) {
  TempDir dir;
  dir.Write("inv.json", R"({"devices": [{"id": "gpu0", "type": "a100", "index": 0}]})");
  FakeKubelet kubelet(dir.path());
  kubelet.StartRegistration();
  kubelet.SetPodResources({{"serving", "bert-1", "nvidia.com/gpu", {"gpu0"}}});

  std::mutex mu;
  std::string path, content_type, body;
  httplib::Server api;
  api.Patch(R"(/api/v1/nodes/([a-z0-9-]+))",
            [&](const httplib::Request& req, httplib::Response& res) {
              std::lock_guard<std::mutex> lock(mu);
              path = req.path;
              content_type = req.get_header_value("Content-Type");
              body = req.body;
              res.set_content("{}", "application/json");
            });
  const int port = api.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread server([&] { api.listen_after_bind(); });

  PluginProcess p(dir.path(), {"--kubelet-socket", kubelet.registration_socket(),
                               "--inventory-file", dir.path() + "/inv.json",
                               "--pod-resources-socket", kubelet.pod_resources_socket(),
                               "--apiserver", "http://127.0.0.1:" + std::to_string(port),
                               "--node-name", "node-a", "--publish-interval-ms", "50"});
  const bool got = WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return !body.empty();
      },
      seconds(15));
  api.stop();
  server.join();
  ASSERT_TRUE(got) << p.Stderr();
  EXPECT_EQ(path, "/api/v1/nodes/node-a");
  EXPECT_EQ(content_type, "application/merge-patch+json");
  const auto patch = nlohmann::json::parse(body);
  EXPECT_EQ(patch["metadata"]["labels"]["easyscale.io/gpu-type"], "a100");
  const auto gpus = nlohmann::json::parse(
      patch["metadata"]["annotations"]["easyscale.io/gpus"].get<std::string>());
  EXPECT_EQ(gpus[0]["heldBy"], "serving/bert-1");
}

}  // namespace
}  // namespace easyscale::dp::testing
