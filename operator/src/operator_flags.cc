// Flag parsing for easyscale-operator.
#include "operator_flags.h"

#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"

namespace easyscale::op {

const char* kOperatorUsage = R"(usage: easyscale-operator [flags]

Runs the EasyScaleJob controller against a Kubernetes API server.

  --kubeconfig PATH        kubeconfig file (else $KUBECONFIG, in-cluster, ~/.kube/config)
  --namespace NS           manage EasyScaleJobs of NS only (default: all namespaces)
  --leader-elect[=BOOL]    hold a Lease; only the leader reconciles (default false)
  --lease-name NAME        the Lease (default easyscale-operator)
  --lease-namespace NS     its namespace (default: the kubeconfig's / pod's namespace)
  --identity ID            holder identity (default: hostname_pid)
  --lease-duration SEC     (default 15)   --renew-deadline SEC (default 10)
  --retry-period SEC       (default 2)
  --metrics-addr ADDR      Prometheus /metrics (default :8080)
  --health-addr ADDR       /healthz and /readyz (default :8081)
  --control-addr ADDR      worker control endpoint (default :8090)
  --control-url URL        the control URL given to workers
                           (default http://easyscale-operator.<lease namespace>.svc:<port>)
  --worker-backend B       auto | cpu | cuda (default auto: cuda unless the GPU type is cpu)
  --worker-command CMD     worker executable in the image (default easyscale-worker)
  --drain-timeout SEC      wait for a worker's checkpoint at most this long (default 30)
  --resync SEC             re-reconcile every job this often (default 2)
  --log-level LEVEL        debug | info | warn | error
  --help                   this text
)";

StatusOr<OperatorFlags> ParseOperatorFlags(const std::vector<std::string>& args) {
  OperatorFlags f;
  auto str = [](std::string* out) {
    return [out](const std::string& flag, const std::string& v) -> Status {
      if (v.empty()) return absl::InvalidArgumentError(flag + ": needs a value");
      *out = v;
      return absl::OkStatus();
    };
  };
  auto seconds = [](double* out) {
    return [out](const std::string& flag, const std::string& v) -> Status {
      double d = 0;
      if (!absl::SimpleAtod(v, &d) || !(d > 0) || d > 86400) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, ": want seconds in (0, 86400], got \"", v, "\""));
      }
      *out = d;
      return absl::OkStatus();
    };
  };
  using Setter = std::function<Status(const std::string&, const std::string&)>;
  const std::map<std::string, Setter> valued = {
      {"--kubeconfig", str(&f.kubeconfig)},
      {"--namespace", str(&f.ns)},
      {"--lease-name", str(&f.leaseName)},
      {"--lease-namespace", str(&f.leaseNamespace)},
      {"--identity", str(&f.identity)},
      {"--lease-duration", seconds(&f.leaseDurationSeconds)},
      {"--renew-deadline", seconds(&f.renewDeadlineSeconds)},
      {"--retry-period", seconds(&f.retryPeriodSeconds)},
      {"--metrics-addr", str(&f.metricsAddr)},
      {"--health-addr", str(&f.healthAddr)},
      {"--control-addr", str(&f.controlAddr)},
      {"--control-url", str(&f.controlUrl)},
      {"--worker-backend",
       [&f](const std::string& flag, const std::string& v) -> Status {
         if (v != "auto" && v != "cpu" && v != "cuda") {
           return absl::InvalidArgumentError(flag + ": want auto, cpu or cuda, got \"" + v + "\"");
         }
         f.workerBackend = v;
         return absl::OkStatus();
       }},
      {"--worker-command", str(&f.workerCommand)},
      {"--drain-timeout", seconds(&f.drainTimeoutSeconds)},
      {"--resync", seconds(&f.resyncSeconds)},
      {"--log-level", str(&f.logLevel)},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::string value;
    bool hasValue = false;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      hasValue = true;
    }
    if (name == "--help" || name == "-h") {
      f.help = true;
      continue;
    }
    if (name == "--leader-elect") {
      if (!hasValue || value == "true") {
        f.leaderElect = true;
      } else if (value == "false") {
        f.leaderElect = false;
      } else {
        return absl::InvalidArgumentError("--leader-elect: want true or false, got \"" + value +
                                          "\"");
      }
      continue;
    }
    auto it = valued.find(name);
    if (it == valued.end()) {
      return absl::InvalidArgumentError("unknown flag \"" + args[i] + "\" (see --help)");
    }
    if (!hasValue) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(name + ": needs a value");
      value = args[++i];
    }
    if (Status s = it->second(name, value); !s.ok()) return s;
  }
  if (f.renewDeadlineSeconds >= f.leaseDurationSeconds) {
    return absl::InvalidArgumentError("--renew-deadline: must be less than --lease-duration");
  }
  if (f.retryPeriodSeconds >= f.renewDeadlineSeconds) {
    return absl::InvalidArgumentError("--retry-period: must be less than --renew-deadline");
  }
  return f;
}

}  // namespace easyscale::op
