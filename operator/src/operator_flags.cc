// Flag parsing for easyscale-operator.
#include "operator_flags.h"

#include "easyscale/common/flags.h"
#include "easyscale/common/http_server.h"

namespace easyscale::op {
namespace {

// Longest accepted duration flag: a day.
constexpr double kMaxSeconds = 86400;

// The flag set over `f`; OperatorUsage() and ParseOperatorFlags() share it so
// the help text always lists exactly the flags that parse.
FlagSet MakeFlagSet(OperatorFlags& f) {
  FlagSet s(
      "easyscale-operator [flags]\n\n"
      "Runs the EasyScaleJob controller against a Kubernetes API server.");
  auto seconds = [&s](const std::string& name, double* out, const std::string& help) {
    s.Double(name, out, help + ", in seconds", 0, kMaxSeconds, /*min_exclusive=*/true);
  };
  s.String("kubeconfig", &f.kubeconfig,
           "kubeconfig file (else $KUBECONFIG, in-cluster, ~/.kube/config)");
  s.String("namespace", &f.ns, "manage EasyScaleJobs of this namespace only (default: all)");
  s.Bool("leader-elect", &f.leaderElect, "hold a Lease; only the leader reconciles");
  s.String("lease-name", &f.leaseName, "the Lease");
  s.String("lease-namespace", &f.leaseNamespace,
           "the Lease's namespace (default: the kubeconfig's / pod's namespace)");
  s.String("identity", &f.identity, "Lease holder identity (default: hostname_pid)");
  seconds("lease-duration", &f.leaseDurationSeconds, "Lease duration");
  seconds("renew-deadline", &f.renewDeadlineSeconds, "the leader renews within this");
  seconds("retry-period", &f.retryPeriodSeconds, "Lease acquire / renew retry period");
  s.String("metrics-addr", &f.metricsAddr, "Prometheus /metrics");
  s.String("health-addr", &f.healthAddr, "/healthz and /readyz");
  s.String("control-addr", &f.controlAddr, "worker control endpoint");
  s.String("control-url", &f.controlUrl,
           "the control URL given to workers "
           "(default: http://easyscale-operator.<lease namespace>.svc:<port>)");
  s.Choice("worker-backend", &f.workerBackend,
           "workers' backend; auto: cuda unless the GPU type is cpu", {"auto", "cpu", "cuda"});
  s.String("worker-command", &f.workerCommand, "worker executable in the image");
  s.String("control-key-secret", &f.controlKeySecret,
           "Secret (in the lease namespace) holding the key the per-job control tokens derive "
           "from; created with a random key when missing, shared by every replica");
  s.String("control-key-file", &f.controlKeyFile,
           "the key (>= 32 bytes) from a file instead (default, with neither flag: a random key, "
           "so tokens change with the process)");
  seconds("drain-timeout", &f.drainTimeoutSeconds,
          "wait for a worker to stop its generation at most this");
  seconds("handover-timeout", &f.handoverTimeoutSeconds,
          "keep leaving workers to serve the job's state to a new worker set at most this");
  seconds("max-restart-backoff", &f.maxRestartBackoffSeconds,
          "longest wait before a failed job's next worker set");
  s.Bool("network-policy", &f.networkPolicy,
         "give each job a NetworkPolicy: its workers take traffic only from each other");
  seconds("resync", &f.resyncSeconds, "re-reconcile every job this often");
  seconds("schedule-window", &f.scheduleWindowSeconds,
          "one scheduling cycle serves the cluster changes of this window after the first");
  s.String("log-level", &f.logLevel, "debug | info | warn | error (default: info)");
  return s;
}

}  // namespace

std::string OperatorUsage() {
  OperatorFlags defaults;
  return MakeFlagSet(defaults).Help();
}

StatusOr<OperatorFlags> ParseOperatorFlags(const std::vector<std::string>& args) {
  OperatorFlags f;
  FlagSet s = MakeFlagSet(f);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  auto rest = s.Parse(static_cast<int>(argv.size()), argv.data(), 0);
  if (!rest.ok()) return rest.status();
  f.help = s.help_requested();
  if (f.help) return f;
  if (!rest->empty()) {
    return absl::InvalidArgumentError("unexpected argument \"" + (*rest)[0] + "\"");
  }
  for (const auto& [flag, address] :
       {std::pair<const char*, const std::string&>{"--metrics-addr", f.metricsAddr},
        {"--health-addr", f.healthAddr},
        {"--control-addr", f.controlAddr}}) {
    if (StatusOr<ListenAddress> a = ParseListenAddress(flag, address); !a.ok()) return a.status();
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
