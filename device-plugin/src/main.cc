// easyscale-device-plugin: advertises the node's GPUs to kubelet as
// easyscale.io/gpu and publishes which GPUs inference pods hold.
// Exit codes: 0 clean stop, 1 runtime failure, 2 bad flags or input,
// 3 --discover-only without a usable NVML.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <thread>

#include "easyscale/common/job_spec.h"
#include "easyscale/common/log.h"
#include "easyscale/device_plugin/file_inventory.h"
#include "easyscale/device_plugin/node_publisher.h"
#include "easyscale/device_plugin/plugin_server.h"
#include "flags.h"
#include "nvml_discovery.h"

namespace easyscale::dp {
namespace {

constexpr const char* kLog = "device-plugin";
constexpr int kExitRuntime = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitNoNvml = 3;

// What the node has, from the inventory file or NVML; `nvml` stays loaded for
// health checks.
struct Discovery {
  std::string source;  // "file", "nvml" or "none"
  std::string note;    // why "none", or the driver version
  std::vector<GpuDevice> devices;
  std::shared_ptr<nvml::Library> nvml;
};

StatusOr<Discovery> Discover(const Flags& f) {
  Discovery d;
  if (!f.inventory_file.empty()) {
    auto devices = LoadInventoryFile(f.inventory_file);
    if (!devices.ok()) return devices.status();
    d.source = "file";
    d.devices = std::move(*devices);
    return d;
  }
  auto lib = nvml::Library::Load(f.nvml_library);
  if (!lib.ok()) {
    d.source = "none";
    d.note = std::string(lib.status().message());
    return d;
  }
  d.nvml = std::move(*lib);
  auto inv = DiscoverNvmlGpus(*d.nvml);
  if (!inv.ok()) {
    d.source = "none";
    d.note = "NVML loaded but discovery failed: " + std::string(inv.status().message());
    d.nvml.reset();
    return d;
  }
  d.source = "nvml";
  d.note = "driver " + inv->driver_version;
  d.devices = std::move(inv->devices);
  return d;
}

std::unique_ptr<HealthProvider> MakeHealthProvider(const Flags& f, const Discovery& d) {
  if (!f.health_checks) return MakeNoopHealthProvider();
  if (d.source == "file") {
    return MakeFileHealthProvider(f.inventory_file,
                                  std::chrono::milliseconds(f.health_interval_ms));
  }
  if (d.nvml) return MakeNvmlHealthProvider(d.nvml, std::chrono::seconds(f.xid_recovery_seconds));
  return MakeNoopHealthProvider();
}

// nullptr with a logged reason when the inventory is not published.
StatusOr<std::unique_ptr<NodePublisher>> MakePublisher(const Flags& f) {
  if (!f.publish_file.empty()) return MakeFilePublisher(f.publish_file);
  if (!f.publish) return std::unique_ptr<NodePublisher>();
  auto config = LoadApiServerConfig(f.node_name, f.apiserver, f.service_account_dir);
  if (config.ok()) return MakeApiServerPublisher(std::move(*config));
  if (!f.apiserver.empty()) return config.status();  // asked for explicitly: bad input
  LogWarn(kLog, "node inventory not published", {{"why", std::string(config.status().message())}});
  return std::unique_ptr<NodePublisher>();
}

std::vector<std::string> PresentPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> present;
  for (const auto& p : paths) {
    if (access(p.c_str(), F_OK) == 0) present.push_back(p);
  }
  return present;
}

int DiscoverOnly(const Flags& f, const Discovery& d) {
  nlohmann::json out = InventoryToJson(d.devices);
  out["source"] = d.source;
  out["nvmlLibrary"] = f.inventory_file.empty() ? nlohmann::json(f.nvml_library) : nullptr;
  out["note"] = d.note;
  std::cout << out.dump(2) << std::endl;
  if (d.source == "none") {
    std::cerr << "easyscale-device-plugin: " << d.note << std::endl;
    return kExitNoNvml;
  }
  return 0;
}

int Serve(const Flags& f, const Discovery& d) {
  DeviceTable rm(d.devices);
  PluginServerOptions opts;
  opts.kubelet_socket = f.kubelet_socket;
  opts.endpoint = f.endpoint;
  opts.resource_name = kGpuResource;
  opts.watch_interval = std::chrono::milliseconds(f.watch_interval_ms);
  opts.max_restarts_per_hour = f.max_restarts;
  if (d.source == "nvml") {
    opts.control_device_paths =
        PresentPaths({"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"});
  }
  auto publisher = MakePublisher(f);
  if (!publisher.ok()) {
    std::cerr << "easyscale-device-plugin: " << publisher.status().message() << std::endl;
    return kExitBadInput;
  }
  PluginServer server(&rm, opts);
  if (Status s = server.Start(); !s.ok()) {
    std::cerr << "easyscale-device-plugin: " << s.message() << std::endl;
    return absl::IsFailedPrecondition(s) ? kExitBadInput : kExitRuntime;
  }
  auto health = MakeHealthProvider(f, d);
  if (Status s = health->Start(&rm); !s.ok()) {
    LogWarn(kLog, "health checks off", {{"error", std::string(s.message())}});
    health = MakeNoopHealthProvider();
  }
  // Runs without a publisher too: kubelet must still learn which GPUs inference holds.
  PodResourcesOptions pods;
  pods.socket = f.pod_resources_socket;
  pods.inference_resources = f.inference_resources;
  pods.training_resource = kGpuResource;
  InventoryReporter reporter(&rm, std::make_unique<PodResourcesClient>(pods), std::move(*publisher),
                             std::chrono::milliseconds(f.publish_interval_ms));
  reporter.Start();
  // SIGINT/SIGTERM are blocked in every thread (see main) and taken here.
  std::thread signals([&server] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    LogInfo(kLog, "stopping", {{"signal", sig}});
    server.Stop();
  });
  const Status run = server.Run();
  if (!run.ok()) kill(getpid(), SIGTERM);  // release the signal thread
  signals.join();
  reporter.Stop();
  health->Stop();
  if (!run.ok()) {
    std::cerr << "easyscale-device-plugin: " << run.message() << std::endl;
    return kExitRuntime;
  }
  return 0;
}

int Main(int argc, char** argv) {
  auto flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "easyscale-device-plugin: " << flags.status().message() << "\n" << Usage();
    return kExitBadInput;
  }
  if (flags->help) {
    std::cout << Usage();
    return 0;
  }
  auto d = Discover(*flags);
  if (!d.ok()) {
    std::cerr << "easyscale-device-plugin: " << d.status().message() << std::endl;
    return kExitBadInput;
  }
  if (flags->discover_only) return DiscoverOnly(*flags, *d);
  if (d->source == "none") {
    LogWarn(kLog, "no GPU inventory: advertising 0 devices", {{"why", d->note}});
  } else {
    LogInfo(kLog, "GPU inventory",
            {{"source", d->source}, {"devices", d->devices.size()}, {"note", d->note}});
  }
  return Serve(*flags, *d);
}

}  // namespace
}  // namespace easyscale::dp

int main(int argc, char** argv) {
  // Block the stop signals before any thread starts, so only sigwait sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return easyscale::dp::Main(argc, argv);
}
