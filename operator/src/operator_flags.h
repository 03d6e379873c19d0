// File: operator/src/operator_flags.h
//
// Command-line flags of easyscale-operator, parsed by the common FlagSet:
// --name=value or --name value; errors are one line naming the flag.
#pragma once

#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::op {

struct OperatorFlags {
  std::string kubeconfig;
  std::string ns;  // jobs' namespace; empty = all
  bool leaderElect = false;
  std::string leaseName = "easyscale-operator";
  std::string leaseNamespace;  // default: the config's namespace
  std::string identity;        // default: hostname_pid
  double leaseDurationSeconds = 15;
  double renewDeadlineSeconds = 10;
  double retryPeriodSeconds = 2;
  std::string metricsAddr = ":8080";
  std::string healthAddr = ":8081";
  std::string controlAddr = ":8090";
  std::string
      controlUrl;  // what workers dial; default http://easyscale-operator.<lease ns>.svc:<port>
  std::string workerBackend = "auto";
  std::string workerCommand = "easyscale-worker";
  std::string controlKeySecret;
  std::string controlKeyFile;
  double drainTimeoutSeconds = 30;
  double handoverTimeoutSeconds = 30;
  double maxRestartBackoffSeconds = 60;
  bool networkPolicy = true;
  double resyncSeconds = 2;
  double scheduleWindowSeconds = 0.1;
  std::string logLevel;
  bool help = false;
};

// The --help text; it lists exactly the flags that parse.
std::string OperatorUsage();

StatusOr<OperatorFlags> ParseOperatorFlags(const std::vector<std::string>& args);

}  // namespace easyscale::op
