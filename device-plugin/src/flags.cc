#include "flags.h"

#include <cstdlib>

#include "easyscale/common/flags.h"

namespace easyscale::dp {
namespace {

// The flag set over `f`; Usage() and ParseFlags() share it so the help text
// always lists exactly the flags that parse.
FlagSet MakeFlagSet(Flags& f) {
  FlagSet s("easyscale-device-plugin [flags]");
  s.String("kubelet-socket", &f.kubelet_socket,
           "kubelet Registration socket; the plugin socket goes beside it");
  s.String("endpoint", &f.endpoint, "plugin socket file name");
  s.String("inventory-file", &f.inventory_file,
           "JSON GPU inventory instead of NVML (tests, CPU nodes)");
  s.String("nvml-library", &f.nvml_library, "NVML to dlopen");
  s.Bool("health-checks", &f.health_checks, "watch XID events / the inventory file (on|off)");
  s.Int("health-interval-ms", &f.health_interval_ms, "inventory file poll period", 10, 3600000);
  s.Int("xid-recovery-seconds", &f.xid_recovery_seconds,
        "quiet time before an XID-unhealthy GPU is healthy again", 1, 86400);
  s.String("pod-resources-socket", &f.pod_resources_socket, "kubelet pod-resources socket");
  s.StringList("inference-resource", &f.inference_resources, "resource of inference pods");
  s.String("node-name", &f.node_name, "Node to publish on (default $NODE_NAME)");
  s.String("publish-file", &f.publish_file,
           "write the Node patch to PATH instead of the API server");
  s.String("apiserver", &f.apiserver, "API server instead of the in-cluster one (tests)");
  s.String("service-account-dir", &f.service_account_dir, "in-cluster token and ca.crt");
  s.Bool("publish", &f.publish, "publish the node inventory (on|off)");
  s.Int("publish-interval-ms", &f.publish_interval_ms, "pod-resources poll period", 10, 3600000);
  s.Int("watch-interval-ms", &f.watch_interval_ms, "kubelet.sock watch period", 10, 60000);
  s.Int("max-restarts", &f.max_restarts, "gRPC restarts allowed per hour", 0, 1000);
  s.Bool("discover-only", &f.discover_only,
         "print the GPU inventory as JSON and exit (3: no NVML)");
  return s;
}

}  // namespace

std::string Usage() {
  Flags defaults;
  return MakeFlagSet(defaults).Help();
}

StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  if (const char* node = std::getenv("NODE_NAME")) f.node_name = node;
  FlagSet s = MakeFlagSet(f);
  auto rest = s.Parse(argc, argv);
  if (!rest.ok()) return rest.status();
  f.help = s.help_requested();
  if (!rest->empty())
    return absl::InvalidArgumentError("unexpected argument \"" + (*rest)[0] + "\"");
  if (f.endpoint.find('/') != std::string::npos) {
    return absl::InvalidArgumentError("--endpoint: must be a file name, got \"" + f.endpoint +
                                      "\"");
  }
  return f;
}

}  // namespace easyscale::dp
