"""The chart's Deployment end to end. The case runs operator_helm_deploy_test
(tests/operator/helm_deploy_test.cc): a whole test cluster, with the stand-in
kubelet running the operator pod and real worker pods, which is C++ test code."""

import os
import subprocess

from harness import Skipped, case, check


@case("`helm install` of charts/easyscale; the operator run from the rendered Deployment's pod "
      "(in-cluster: service account token and ca.crt, KUBERNETES_SERVICE_HOST); `kubectl apply` "
      "of an EasyScaleJob; `kubectl get esj`",
      "the operator leads (its Lease, under its pod name); worker pods reach it by the control "
      "Service's name; the job Succeeded with the fixed run's digest; the printer columns "
      "(NAME PHASE ESTS WORKERS GPU TYPES STEP PREEMPTIONS AGE)",
      cluster=True, timeout=300)
def helm_deployment_runs_job(args):
    binary = args.cluster_test
    if not binary or not os.access(binary, os.X_OK):
        raise Skipped("operator_helm_deploy_test is not built (the operator is not)")
    if os.geteuid() != 0:
        raise Skipped("needs root for the pods' namespaces (CI runs as root)")
    p = subprocess.run([binary, "--gtest_brief=1"], capture_output=True, text=True, timeout=280)
    check(p.returncode == 0, f"operator_helm_deploy_test: exit {p.returncode}: {p.stdout[-2000:]}")
    check("[  PASSED  ] 1 test" in p.stdout, f"no test passed: {p.stdout[-2000:]}")
