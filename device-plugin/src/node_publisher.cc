#include "easyscale/device_plugin/node_publisher.h"

#include <httplib.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/log.h"

namespace easyscale::dp {
namespace {

constexpr const char* kLog = "device-plugin";

class FilePublisher : public NodePublisher {
 public:
  explicit FilePublisher(std::string path) : path_(std::move(path)) {}
  Status Publish(const nlohmann::json& patch) override {
    return WriteFileAtomic(path_, patch.dump(2) + "\n");
  }
  std::string Describe() const override { return "file " + path_; }

 private:
  std::string path_;
};

class ApiServerPublisher : public NodePublisher {
 public:
  explicit ApiServerPublisher(ApiServerConfig config) : config_(std::move(config)) {}

  Status Publish(const nlohmann::json& patch) override {
    httplib::Client client(config_.url);
    if (!client.is_valid()) return absl::InvalidArgumentError("bad API server URL " + config_.url);
    client.set_connection_timeout(5);
    client.set_read_timeout(10);
    if (!config_.ca_path.empty()) client.set_ca_cert_path(config_.ca_path.c_str());
    client.enable_server_certificate_verification(true);
    if (!config_.token_path.empty()) {
      ES_ASSIGN_OR_RETURN(const std::string token, ReadTokenFile(config_.token_path));
      client.set_bearer_token_auth(token.c_str());
    }
    const std::string path = "/api/v1/nodes/" + config_.node_name;
    auto res = client.Patch(path.c_str(), patch.dump(), "application/merge-patch+json");
    if (!res) {
      return absl::UnavailableError(
          absl::StrCat("PATCH ", config_.url, path, ": ", httplib::to_string(res.error())));
    }
    if (res->status == 409 || res->status == 429 || res->status >= 500) {
      return absl::UnavailableError(absl::StrCat("PATCH ", path, ": HTTP ", res->status));
    }
    if (res->status < 200 || res->status >= 300) {
      return absl::FailedPreconditionError(
          absl::StrCat("PATCH ", path, ": HTTP ", res->status, ": ", res->body.substr(0, 300)));
    }
    return absl::OkStatus();
  }
  std::string Describe() const override {
    return "node " + config_.node_name + " at " + config_.url;
  }

 private:
  ApiServerConfig config_;
};

}  // namespace

std::unique_ptr<NodePublisher> MakeFilePublisher(std::string path) {
  return std::make_unique<FilePublisher>(std::move(path));
}

std::unique_ptr<NodePublisher> MakeApiServerPublisher(ApiServerConfig config) {
  return std::make_unique<ApiServerPublisher>(std::move(config));
}

StatusOr<ApiServerConfig> LoadApiServerConfig(const std::string& node_name,
                                              const std::string& url_override,
                                              const std::string& service_account_dir) {
  if (node_name.empty()) {
    return absl::InvalidArgumentError(
        "--node-name (or NODE_NAME) is required to publish on the Node");
  }
  ApiServerConfig c;
  c.node_name = node_name;
  if (!url_override.empty()) {
    if (url_override.rfind("http://", 0) != 0 && url_override.rfind("https://", 0) != 0) {
      return absl::InvalidArgumentError("--apiserver: must start with http:// or https://, got \"" +
                                        url_override + "\"");
    }
    c.url = url_override;
    return c;
  }
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr) {
    return absl::FailedPreconditionError(
        "not in a cluster: KUBERNETES_SERVICE_HOST/PORT unset (use --apiserver or --publish-file)");
  }
  const std::string h = host;
  c.url = absl::StrCat("https://", h.find(':') != std::string::npos ? "[" + h + "]" : h, ":", port);
  c.token_path = service_account_dir + "/token";
  if (StatusOr<std::string> token = ReadTokenFile(c.token_path); !token.ok()) {
    return token.status();
  }
  c.ca_path = service_account_dir + "/ca.crt";
  return c;
}

InventoryReporter::InventoryReporter(ResourceManager* rm, std::unique_ptr<PodResourcesClient> pods,
                                     std::unique_ptr<NodePublisher> publisher,
                                     std::chrono::milliseconds interval)
    : rm_(rm), pods_(std::move(pods)), publisher_(std::move(publisher)), interval_(interval) {}

InventoryReporter::~InventoryReporter() { Stop(); }

Status InventoryReporter::ReportOnce() {
  auto holders = pods_->List();
  if (holders.ok()) {
    holders_ = std::move(*holders);
    have_holders_ = true;
  } else if (!have_holders_) {
    // Without one answer every GPU would look idle and be offered to training.
    return holders.status();
  } else {
    LogWarn(kLog, "pod-resources unavailable; publishing the last known holders",
            {{"error", std::string(holders.status().message())}});
  }
  const std::vector<NodeGpu> gpus = JoinHolders(rm_->Devices(), holders_);
  std::map<std::string, std::string> inference;
  for (const NodeGpu& g : gpus) {
    if (g.held_by) inference[g.device.id] = *g.held_by;
  }
  rm_->SetInferenceHolders(std::move(inference));
  if (publisher_ == nullptr) return absl::OkStatus();
  const nlohmann::json patch = NodeInventoryPatch(gpus);
  if (last_published_ && *last_published_ == patch) return absl::OkStatus();
  if (Status s = publisher_->Publish(patch); !s.ok()) return s;
  last_published_ = patch;
  LogInfo(kLog, "node inventory published",
          {{"to", publisher_->Describe()}, {"inference_held", holders_.inference.size()}});
  return absl::OkStatus();
}

void InventoryReporter::Start() {
  stop_ = false;
  thread_ = std::thread([this] {
    std::string last_error;  // log a failure when it starts or changes, not every round
    while (!stop_) {
      const uint64_t seen = rm_->Version();
      const Status s = ReportOnce();
      const std::string error = s.ok() ? "" : std::string(s.message());
      if (!error.empty() && error != last_error) {
        LogWarn(kLog, "publishing the node inventory failed; retrying", {{"error", error}});
      }
      last_error = error;
      // Sleep for the interval, but publish a health change at once.
      const auto wake = std::chrono::steady_clock::now() + interval_;
      while (!stop_ && std::chrono::steady_clock::now() < wake) {
        if (rm_->WaitForChange(seen, std::chrono::milliseconds(20)) != seen) break;
      }
    }
  });
}

void InventoryReporter::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace easyscale::dp
