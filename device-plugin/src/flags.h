// Internal: the command line of easyscale-device-plugin, read once at startup.
#pragma once

#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::dp {

struct Flags {
  std::string kubelet_socket = "/var/lib/kubelet/device-plugins/kubelet.sock";
  std::string endpoint = "easyscale-gpu.sock";
  std::string inventory_file;
  std::string nvml_library = "libnvidia-ml.so.1";
  bool health_checks = true;
  int health_interval_ms = 1000;
  int xid_recovery_seconds = 300;
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::vector<std::string> inference_resources = {"nvidia.com/gpu"};
  std::string node_name;  // default: $NODE_NAME
  std::string publish_file;
  std::string apiserver;
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  bool publish = true;
  int publish_interval_ms = 5000;
  int watch_interval_ms = 500;
  int max_restarts = 5;
  bool discover_only = false;
  bool help = false;
};

// "--name value" or "--name=value"; InvalidArgument names the flag.
StatusOr<Flags> ParseFlags(int argc, char** argv);
std::string Usage();

}  // namespace easyscale::dp
