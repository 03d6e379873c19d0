#include "flags.h"

#include <cstdlib>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace easyscale::dp {
namespace {

Status ParseInt(const std::string& flag, const std::string& text, int min, int max, int* out) {
  int v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < min || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": must be an integer in [", min, ", ", max, "], got \"", text, "\""));
  }
  *out = v;
  return absl::OkStatus();
}

Status ParseOnOff(const std::string& flag, const std::string& text, bool* out) {
  if (text != "on" && text != "off") {
    return absl::InvalidArgumentError(flag + ": must be on or off, got \"" + text + "\"");
  }
  *out = text == "on";
  return absl::OkStatus();
}

}  // namespace

std::string Usage() {
  return R"(usage: easyscale-device-plugin [flags]
  --kubelet-socket PATH        kubelet Registration socket; the plugin socket goes beside it
                               (default /var/lib/kubelet/device-plugins/kubelet.sock)
  --endpoint NAME              plugin socket file name (default easyscale-gpu.sock)
  --inventory-file PATH        JSON GPU inventory instead of NVML (tests, CPU nodes)
  --nvml-library PATH          NVML to dlopen (default libnvidia-ml.so.1)
  --health-checks on|off       watch XID events / the inventory file (default on)
  --health-interval-ms N       inventory file poll period (default 1000)
  --xid-recovery-seconds N     quiet time before an XID-unhealthy GPU is healthy again (300)
  --pod-resources-socket PATH  (default /var/lib/kubelet/pod-resources/kubelet.sock)
  --inference-resource NAME    resource of inference pods; repeatable (default nvidia.com/gpu)
  --node-name NAME             Node to publish on (default $NODE_NAME)
  --publish-file PATH          write the Node patch to PATH instead of the API server
  --apiserver URL              API server instead of the in-cluster one (tests)
  --service-account-dir PATH   in-cluster token and ca.crt
                               (default /var/run/secrets/kubernetes.io/serviceaccount)
  --publish on|off             publish the node inventory (default on)
  --publish-interval-ms N      pod-resources poll period (default 5000)
  --watch-interval-ms N        kubelet.sock watch period (default 500)
  --max-restarts N             gRPC restarts allowed per hour (default 5)
  --discover-only              print the GPU inventory as JSON and exit (3: no NVML)
)";
}

StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  if (const char* node = std::getenv("NODE_NAME")) f.node_name = node;
  bool inference_given = false;
  const std::map<std::string, std::string*> strings = {
      {"--kubelet-socket", &f.kubelet_socket},
      {"--endpoint", &f.endpoint},
      {"--inventory-file", &f.inventory_file},
      {"--nvml-library", &f.nvml_library},
      {"--pod-resources-socket", &f.pod_resources_socket},
      {"--node-name", &f.node_name},
      {"--publish-file", &f.publish_file},
      {"--apiserver", &f.apiserver},
      {"--service-account-dir", &f.service_account_dir}};
  struct IntFlag {
    int* out;
    int min, max;
  };
  const std::map<std::string, IntFlag> ints = {
      {"--health-interval-ms", {&f.health_interval_ms, 10, 3600000}},
      {"--xid-recovery-seconds", {&f.xid_recovery_seconds, 1, 86400}},
      {"--publish-interval-ms", {&f.publish_interval_ms, 10, 3600000}},
      {"--watch-interval-ms", {&f.watch_interval_ms, 10, 60000}},
      {"--max-restarts", {&f.max_restarts, 0, 1000}}};
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    if (name == "--discover-only") {
      f.discover_only = true;
      continue;
    }
    if (name == "--help" || name == "-h") {
      f.help = true;
      continue;
    }
    std::string value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(name + ": needs a value");
    }
    if (auto s = strings.find(name); s != strings.end()) {
      if (value.empty()) return absl::InvalidArgumentError(name + ": must not be empty");
      *s->second = value;
    } else if (auto n = ints.find(name); n != ints.end()) {
      if (Status st = ParseInt(name, value, n->second.min, n->second.max, n->second.out); !st.ok())
        return st;
    } else if (name == "--health-checks") {
      if (Status st = ParseOnOff(name, value, &f.health_checks); !st.ok()) return st;
    } else if (name == "--publish") {
      if (Status st = ParseOnOff(name, value, &f.publish); !st.ok()) return st;
    } else if (name == "--inference-resource") {
      if (!inference_given) f.inference_resources.clear();
      inference_given = true;
      f.inference_resources.push_back(value);
    } else {
      return absl::InvalidArgumentError("unknown flag " + name);
    }
  }
  if (f.endpoint.find('/') != std::string::npos) {
    return absl::InvalidArgumentError("--endpoint: must be a file name, got \"" + f.endpoint +
                                      "\"");
  }
  return f;
}

}  // namespace easyscale::dp
