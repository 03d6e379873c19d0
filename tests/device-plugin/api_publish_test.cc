// The node inventory reaches the API server as a JSON merge patch on the Node:
// over plain HTTP with --apiserver, and over HTTPS with the in-cluster config
// (KUBERNETES_SERVICE_HOST/PORT, service-account token and CA).
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "easyscale/common/subprocess.h"
#include "fake_kubelet.h"
#include "plugin_process.h"

namespace easyscale::dp::testing {
namespace {

using std::chrono::seconds;

// An API server on 127.0.0.1 that records the first PATCH of a Node, and
// the Authorization of every PATCH.
class RecordingApiServer {
 public:
  explicit RecordingApiServer(std::unique_ptr<httplib::Server> server)
      : server_(std::move(server)) {
    server_->Patch(R"(/api/v1/nodes/([a-z0-9-]+))",
                   [this](const httplib::Request& req, httplib::Response& res) {
                     std::lock_guard<std::mutex> lock(mu_);
                     authorizations_.push_back(req.get_header_value("Authorization"));
                     if (body_.empty()) {
                       path_ = req.path;
                       content_type_ = req.get_header_value("Content-Type");
                       authorization_ = req.get_header_value("Authorization");
                       body_ = req.body;
                     }
                     res.set_content("{}", "application/json");
                   });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
  }
  ~RecordingApiServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  bool WaitForPatch() {
    return WaitFor(
        [&] {
          std::lock_guard<std::mutex> lock(mu_);
          return !body_.empty();
        },
        seconds(15));
  }
  void ExpectInventoryPatch(const std::string& node, const std::string& held_by) {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(path_, "/api/v1/nodes/" + node);
    EXPECT_EQ(content_type_, "application/merge-patch+json");
    const auto patch = nlohmann::json::parse(body_);
    EXPECT_EQ(patch["metadata"]["labels"]["easyscale.io/gpu-type"], "a100");
    const auto gpus = nlohmann::json::parse(
        patch["metadata"]["annotations"]["easyscale.io/gpus"].get<std::string>());
    EXPECT_EQ(gpus[0]["heldBy"], held_by);
  }
  std::string authorization() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorization_;
  }
  bool WaitForPatchAuthorizedBy(const std::string& authorization) {
    return WaitFor(
        [&] {
          std::lock_guard<std::mutex> lock(mu_);
          return !authorizations_.empty() && authorizations_.back() == authorization;
        },
        seconds(15));
  }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::string path_, content_type_, authorization_, body_;
  std::vector<std::string> authorizations_;
};

struct Node {
  TempDir dir;
  FakeKubelet kubelet{dir.path()};
  Node() {
    dir.Write("inv.json", R"({"devices": [{"id": "gpu0", "type": "a100", "index": 0}]})");
    kubelet.StartRegistration();
    kubelet.SetPodResources({{"serving", "bert-1", "nvidia.com/gpu", {"gpu0"}}});
  }
  std::vector<std::string> Args(std::vector<std::string> more) const {
    std::vector<std::string> args = {"--kubelet-socket",
                                     kubelet.registration_socket(),
                                     "--inventory-file",
                                     dir.path() + "/inv.json",
                                     "--pod-resources-socket",
                                     kubelet.pod_resources_socket(),
                                     "--node-name",
                                     "node-a",
                                     "--publish-interval-ms",
                                     "50"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
};

TEST(ApiServerPublish, PatchesTheNodeOverHttp) {
  Node node;
  RecordingApiServer api(std::make_unique<httplib::Server>());
  ASSERT_GT(api.port(), 0);
  PluginProcess p(node.dir.path(),
                  node.Args({"--apiserver", "http://127.0.0.1:" + std::to_string(api.port())}));
  ASSERT_TRUE(api.WaitForPatch()) << p.Stderr();
  api.ExpectInventoryPatch("node-a", "serving/bert-1");
}

// A self-signed certificate for 127.0.0.1 at <dir>/<name>.crt and .key.
void MakeCertificate(const std::string& dir, const std::string& name) {
  StatusOr<CommandResult> r =
      RunCommand({.argv = {"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                           "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                           "-keyout", dir + "/" + name + ".key", "-out", dir + "/" + name + ".crt"},
                  .stderrTo = Output::Pipe()},
                 seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exitCode, 0) << r->err;
}

// Runs the plugin in-cluster style against an HTTPS API server using
// `server_cert`, with the service account trusting `trusted_cert`.
void RunInCluster(const std::string& server_cert, const std::string& trusted_cert,
                  bool expect_patch) {
  Node node;
  const std::string sa = node.dir.path() + "/serviceaccount";
  std::filesystem::create_directory(sa);
  node.dir.Write("serviceaccount/token", "test-token\n");
  MakeCertificate(node.dir.path(), "server");
  MakeCertificate(node.dir.path(), "other");
  std::filesystem::copy_file(node.dir.path() + "/" + trusted_cert + ".crt", sa + "/ca.crt");
  const std::string cert = node.dir.path() + "/" + server_cert;
  RecordingApiServer api(
      std::make_unique<httplib::SSLServer>((cert + ".crt").c_str(), (cert + ".key").c_str()));
  ASSERT_GT(api.port(), 0);
  setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);  // inherited by the child
  setenv("KUBERNETES_SERVICE_PORT", std::to_string(api.port()).c_str(), 1);
  PluginProcess p(node.dir.path(), node.Args({"--service-account-dir", sa}));
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  if (!expect_patch) {
    ASSERT_TRUE(WaitFor(
        [&] {
          return p.Stderr().find("publishing the node inventory failed") != std::string::npos;
        },
        seconds(15)))
        << p.Stderr();
    EXPECT_TRUE(api.authorization().empty());  // nothing reached the server
    return;
  }
  ASSERT_TRUE(api.WaitForPatch()) << p.Stderr();
  api.ExpectInventoryPatch("node-a", "serving/bert-1");
  EXPECT_EQ(api.authorization(), "Bearer test-token");
  // kubelet rotates the service account's token before it expires; the next
  // PATCH (another pod holds the GPU) carries the new one.
  node.dir.Write("serviceaccount/token", "rotated-token\n");
  node.kubelet.SetPodResources({{"serving", "bert-2", "nvidia.com/gpu", {"gpu0"}}});
  EXPECT_TRUE(api.WaitForPatchAuthorizedBy("Bearer rotated-token")) << p.Stderr();
}

TEST(ApiServerPublish, InClusterHttpsWithTokenAndCa) { RunInCluster("server", "server", true); }

TEST(ApiServerPublish, RefusesAnApiServerTheCaDoesNotVouchFor) {
  RunInCluster("server", "other", false);
}

}  // namespace
}  // namespace easyscale::dp::testing
