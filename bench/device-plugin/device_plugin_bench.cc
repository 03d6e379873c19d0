// device_plugin_bench: what kubelet waits for, measured over the plugin's real
// Unix socket with an 8-GPU inventory (two NUMA nodes):
//   allocate        Allocate of 2 GPUs, round trip
//   preferred       GetPreferredAllocation of 4 out of 8, round trip
//   health_to_watch SetHealth (as a health provider does) until the
//                   ListAndWatch stream delivers the new list
// Prints one JSON line per measurement: p50/p99/max in microseconds.
//   device_plugin_bench [--iterations N]
#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin_v1beta1.grpc.pb.h"
#include "easyscale/common/log.h"
#include "easyscale/device_plugin/plugin_server.h"

namespace easyscale::dp {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<GpuDevice> EightGpus() {
  std::vector<GpuDevice> out;
  for (int i = 0; i < 8; ++i) {
    GpuDevice d;
    d.id = "gpu" + std::to_string(i);
    d.uuid = "GPU-" + std::to_string(i);
    d.type = "h200";
    d.index = i;
    d.numa_node = i / 4;
    d.device_paths = {"/dev/nvidia" + std::to_string(i)};
    out.push_back(d);
  }
  return out;
}

void Report(const std::string& name, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[static_cast<size_t>(q * (us.size() - 1))]; };
  std::cout << nlohmann::json{{"bench", "device_plugin"}, {"measure", name},
                              {"n", us.size()},           {"p50_us", at(0.5)},
                              {"p99_us", at(0.99)},       {"max_us", us.back()}}
                   .dump()
            << std::endl;
}

template <typename Fn>
std::vector<double> Time(int n, Fn fn) {
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    fn(i);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return us;
}

int Main(int argc, char** argv) {
  int iterations = 2000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--iterations") iterations = std::max(10, std::atoi(argv[++i]));
  }
  SetLogLevel(LogLevel::kError);  // the health toggles would log every change
  char tmpl[] = "/tmp/esdp-bench.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  DeviceTable rm(EightGpus());
  PluginServerOptions opts;
  opts.kubelet_socket = dir + "/kubelet.sock";  // absent: the plugin serves but does not register
  PluginServer server(&rm, opts);
  if (Status s = server.Start(); !s.ok()) {
    std::cerr << s << std::endl;
    return 1;
  }
  auto stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + server.plugin_socket(), grpc::InsecureChannelCredentials()));

  v1beta1::AllocateRequest alloc;
  alloc.add_container_requests()->add_devices_ids("gpu2");
  alloc.mutable_container_requests(0)->add_devices_ids("gpu3");
  Report("allocate", Time(iterations, [&](int) {
           grpc::ClientContext ctx;
           v1beta1::AllocateResponse resp;
           if (!stub->Allocate(&ctx, alloc, &resp).ok()) std::abort();
         }));

  v1beta1::PreferredAllocationRequest pref;
  auto* c = pref.add_container_requests();
  for (int i = 7; i >= 0; --i) c->add_available_deviceids("gpu" + std::to_string(i));
  c->set_allocation_size(4);
  Report("preferred", Time(iterations, [&](int) {
           grpc::ClientContext ctx;
           v1beta1::PreferredAllocationResponse resp;
           if (!stub->GetPreferredAllocation(&ctx, pref, &resp).ok()) std::abort();
         }));

  grpc::ClientContext watch_ctx;
  auto reader = stub->ListAndWatch(&watch_ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse resp;
  if (!reader->Read(&resp)) return 1;  // the initial list
  Report("health_to_watch", Time(std::min(iterations, 500), [&](int i) {
           const bool healthy = i % 2 == 1;
           rm.SetHealth("gpu5", healthy, "bench");
           if (!reader->Read(&resp) || (resp.devices(5).health() == kHealthy) != healthy) {
             std::abort();
           }
         }));
  watch_ctx.TryCancel();
  server.Stop();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace easyscale::dp

int main(int argc, char** argv) { return easyscale::dp::Main(argc, argv); }
