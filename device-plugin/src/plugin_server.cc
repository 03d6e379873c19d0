#include "easyscale/device_plugin/plugin_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "device_plugin_service.h"
#include "easyscale/common/log.h"

namespace easyscale::dp {
namespace {

constexpr const char* kLog = "device-plugin";

// A socket file's identity: inode numbers are reused at once on some file
// systems, so the change time tells a recreated socket apart.
struct FileIdentity {
  bool exists = false;
  ino_t inode = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

FileIdentity Identify(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino,
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

}  // namespace

PluginServer::PluginServer(ResourceManager* rm, PluginServerOptions options)
    : rm_(rm),
      options_(std::move(options)),
      dir_(std::filesystem::path(options_.kubelet_socket).parent_path().string()),
      service_(std::make_unique<DevicePluginService>(rm, options_.control_device_paths)) {}

PluginServer::~PluginServer() {
  Stop();
  StopServing();
}

std::string PluginServer::plugin_socket() const {
  return (std::filesystem::path(dir_) / options_.endpoint).string();
}

Status PluginServer::Start() {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir_.empty() ? "." : dir_, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("device-plugin folder \"", dir_,
                     "\" does not exist (is kubelet's device-plugins folder mounted?)"));
  }
  if (Status s = Serve(); !s.ok()) return s;
  if (Status s = DialSelf(); !s.ok()) return s;
  if (Identify(options_.kubelet_socket).exists) {
    if (Status s = Register(); !s.ok()) {
      LogWarn(kLog, "registration failed; retrying", {{"error", std::string(s.message())}});
    }
  } else {
    LogInfo(kLog, "waiting for kubelet", {{"kubelet_socket", options_.kubelet_socket}});
  }
  return absl::OkStatus();
}

Status PluginServer::Serve() {
  std::lock_guard<std::mutex> lock(server_mu_);
  const std::string path = plugin_socket();
  unlink(path.c_str());  // a stale socket from a previous run blocks bind()
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  service_->Reopen();
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve on \"", path, "\""));
  }
  LogInfo(kLog, "serving DevicePlugin", {{"socket", path}});
  return absl::OkStatus();
}

void PluginServer::StopServing() {
  std::lock_guard<std::mutex> lock(server_mu_);
  if (server_ == nullptr) return;
  service_->Shutdown();  // ends ListAndWatch streams so Shutdown does not wait on them
  server_->Shutdown(Deadline(std::chrono::milliseconds(1000)));
  server_.reset();
  unlink(plugin_socket().c_str());
}

Status PluginServer::DialSelf() {
  auto channel = grpc::CreateChannel("unix:" + plugin_socket(), grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(Deadline(options_.rpc_timeout))) {
    return absl::UnavailableError(
        absl::StrCat("own socket \"", plugin_socket(), "\" does not answer"));
  }
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(options_.rpc_timeout));
  v1beta1::Empty empty;
  v1beta1::DevicePluginOptions opts;
  const grpc::Status s = stub->GetDevicePluginOptions(&ctx, empty, &opts);
  if (!s.ok()) return absl::UnavailableError("own socket answers with: " + s.error_message());
  return absl::OkStatus();
}

Status PluginServer::Register() {
  const FileIdentity kubelet = Identify(options_.kubelet_socket);
  auto channel =
      grpc::CreateChannel("unix:" + options_.kubelet_socket, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(options_.rpc_timeout));
  ctx.set_wait_for_ready(true);
  v1beta1::RegisterRequest req;
  req.set_version(kDevicePluginApiVersion);
  req.set_endpoint(options_.endpoint);
  req.set_resource_name(options_.resource_name);
  *req.mutable_options() = DevicePluginService::Options();
  v1beta1::Empty resp;
  const grpc::Status s = stub->Register(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("Register with ", options_.kubelet_socket, ": ", s.error_message()));
  }
  registered_ = true;
  registered_inode_ = kubelet.inode;
  registered_ctime_ns_ = kubelet.ctime_ns;
  ++registrations_;
  LogInfo(kLog, "registered with kubelet",
          {{"resource", options_.resource_name},
           {"endpoint", options_.endpoint},
           {"devices", rm_->Devices().size()}});
  return absl::OkStatus();
}

Status PluginServer::Restart(const char* why) {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(restarts_, [&](auto t) { return now - t > std::chrono::hours(1); });
  restarts_.push_back(now);
  if (static_cast<int>(restarts_.size()) > options_.max_restarts_per_hour) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "gRPC server restarted more than ", options_.max_restarts_per_hour, " times in an hour"));
  }
  LogInfo(kLog, "restarting gRPC server", {{"why", why}});
  StopServing();
  registered_ = false;
  if (Status s = Serve(); !s.ok()) return s;
  if (Status s = DialSelf(); !s.ok()) return s;
  if (Identify(options_.kubelet_socket).exists) return Register();
  return absl::OkStatus();
}

Status PluginServer::Run() {
  bool logged_failure = false;  // log a failing registration once per streak
  while (!stop_) {
    const auto wake = std::chrono::steady_clock::now() + options_.watch_interval;
    while (!stop_ && std::chrono::steady_clock::now() < wake) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (stop_) break;
    const FileIdentity kubelet = Identify(options_.kubelet_socket);
    const bool kubelet_restarted =
        registered_ && kubelet.exists &&
        (kubelet.inode != registered_inode_ || kubelet.ctime_ns != registered_ctime_ns_);
    Status s;
    if (!Identify(plugin_socket()).exists) {
      s = Restart("plugin socket removed");
    } else if (kubelet_restarted) {
      s = Restart("kubelet.sock recreated (kubelet restarted)");
    } else if (!kubelet.exists) {
      registered_ = false;  // kubelet is down; register when it is back
    } else if (!registered_) {
      s = Register();
    }
    if (absl::IsResourceExhausted(s)) {
      StopServing();
      return s;
    }
    if (!s.ok() && !logged_failure) {
      LogWarn(kLog, "kubelet not reachable; retrying", {{"error", std::string(s.message())}});
    }
    logged_failure = !s.ok();
  }
  StopServing();
  return absl::OkStatus();
}

void PluginServer::Stop() {
  stop_ = true;
  service_->Shutdown();
}

}  // namespace easyscale::dp
