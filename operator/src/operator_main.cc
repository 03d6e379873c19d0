// easyscale-operator: wires the client, informers, controller, leader election
// and the health, metrics and control endpoints; exits 1 when leadership is lost.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "controller/control_server.h"
#include "controller/job_controller.h"
#include "controller/metrics.h"
#include "easyscale/common/http_server.h"
#include "easyscale/common/log.h"
#include "easyscale/operator/event_recorder.h"
#include "easyscale/operator/kube_config.h"
#include "easyscale/operator/leader_election.h"
#include "operator_flags.h"

namespace easyscale::op {
namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::string DefaultIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "_" + std::to_string(getpid());
}

int Run(const OperatorFlags& flags) {
  if (!flags.logLevel.empty()) {
    LogLevel level;
    if (!ParseLogLevel(flags.logLevel, &level)) {
      std::fprintf(stderr, "easyscale-operator: --log-level: unknown level \"%s\"\n",
                   flags.logLevel.c_str());
      return 2;
    }
    SetLogLevel(level);
  }
  // Signals are taken by sigwait below; every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  StatusOr<KubeConfig> config = LoadKubeConfig(flags.kubeconfig);
  if (!config.ok()) {
    std::fprintf(stderr, "easyscale-operator: %s\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  StatusOr<std::unique_ptr<KubeClient>> client = KubeClient::Create(*config);
  if (!client.ok()) {
    std::fprintf(stderr, "easyscale-operator: %s\n",
                 std::string(client.status().message()).c_str());
    return 2;
  }
  StatusOr<ListenAddress> control = ParseListenAddress("--control-addr", flags.controlAddr);
  if (!control.ok()) {
    std::fprintf(stderr, "easyscale-operator: %s\n",
                 std::string(control.status().message()).c_str());
    return 2;
  }
  // Flags win; then what the Deployment sets (POD_NAME, POD_NAMESPACE,
  // EASYSCALE_CONTROL_URL); then defaults.
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  std::string identity = flags.identity.empty() ? env("POD_NAME") : flags.identity;
  if (identity.empty()) identity = DefaultIdentity();
  std::string leaseNs = flags.leaseNamespace.empty() ? env("POD_NAMESPACE") : flags.leaseNamespace;
  if (leaseNs.empty()) leaseNs = config->defaultNamespace;
  std::string controlUrl =
      flags.controlUrl.empty() ? env("EASYSCALE_CONTROL_URL") : flags.controlUrl;
  if (controlUrl.empty()) {
    controlUrl = "http://easyscale-operator." + leaseNs + ".svc:" + std::to_string(control->port);
  }

  StatusOr<ControlTokens> tokens = ControlTokens::Random();
  if (!flags.controlKeySecret.empty()) {
    tokens = ControlTokens::FromSecret(**client, leaseNs, flags.controlKeySecret);
  } else if (!flags.controlKeyFile.empty()) {
    tokens = ControlTokens::FromFile(flags.controlKeyFile);
  } else if (flags.leaderElect) {
    LogWarn("operator",
            "neither --control-key-secret nor --control-key-file: this replica's control tokens "
            "are its own, so workers "
            "are refused after a leader change until their pods restart");
  }
  if (!tokens.ok()) {
    std::fprintf(stderr, "easyscale-operator: %s\n",
                 std::string(tokens.status().message()).c_str());
    return 2;
  }

  Metrics metrics;
  EventRecorder recorder(client->get(), "easyscale-operator", identity);
  ControllerOptions options;
  options.ns = flags.ns;
  options.pod.controlUrl = controlUrl;
  options.pod.command = flags.workerCommand;
  // After SIGTERM a worker finishes its step and hands its state over, which
  // the operator waits for up to the drain timeout.
  options.pod.terminationGracePeriodSeconds = static_cast<int>(flags.drainTimeoutSeconds) + 10;
  options.workerBackend = flags.workerBackend;
  options.drainTimeout = Ms(flags.drainTimeoutSeconds);
  options.handoverTimeout = Ms(flags.handoverTimeoutSeconds);
  options.maxRestartBackoff = Ms(flags.maxRestartBackoffSeconds);
  options.resyncPeriod = Ms(flags.resyncSeconds);
  options.scheduleWindow = Ms(flags.scheduleWindowSeconds);
  options.networkPolicy = flags.networkPolicy;
  JobController controller(client->get(), &recorder, &metrics, std::move(*tokens), options);

  std::atomic<bool> leading{!flags.leaderElect};
  std::atomic<bool> lost{false};
  auto ready = [&] { return leading.load() && controller.HasSynced(); };

  // Each server holds its own connection limits and timeouts: a flood of
  // clients on one port cannot starve the others (HttpServerOptions' defaults).
  std::vector<std::unique_ptr<HttpServer>> servers;
  auto start = [&](const std::string& name, const std::string& address, HttpRoutes routes) {
    StatusOr<std::unique_ptr<HttpServer>> s =
        HttpServer::Start({.name = name, .address = address}, std::move(routes));
    if (!s.ok()) {
      std::fprintf(stderr, "easyscale-operator: %s\n", std::string(s.status().message()).c_str());
      return false;
    }
    servers.push_back(std::move(*s));
    return true;
  };
  // Handlers refer only to what was declared before `servers`, which outlives them.
  HttpRoutes health;
  health.Handle("GET", "/healthz", [](const HttpRequest&) { return HttpResponse{.body = "ok\n"}; });
  health.Handle("GET", "/readyz", [&](const HttpRequest&) {
    if (ready()) return HttpResponse{.body = "ok\n"};
    return HttpResponse{.status = 503,
                        .body = leading ? "caches not synced\n" : "not the leader\n"};
  });
  HttpRoutes metricsRoutes;
  metricsRoutes.Handle("GET", "/metrics", [&](const HttpRequest&) {
    return HttpResponse{.contentType = "text/plain; version=0.0.4", .body = metrics.Text()};
  });
  HttpRoutes controlRoutes;
  InstallControlRoutes(
      controlRoutes, &controller.book(),
      {.serving = ready, .onReport = [&](const std::string& job) { controller.queue().Add(job); }});
  const bool listening = start("health", flags.healthAddr, std::move(health)) &&
                         start("metrics", flags.metricsAddr, std::move(metricsRoutes)) &&
                         start("control", flags.controlAddr, std::move(controlRoutes));
  if (!listening) return 2;

  controller.StartInformers();
  auto startActing = [&] {
    while (!controller.HasSynced() && !lost)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    controller.StartWorker();
  };
  std::unique_ptr<LeaderElector> elector;
  std::thread acting;
  if (flags.leaderElect) {
    LeaderElectionConfig le;
    le.ns = leaseNs;
    le.name = flags.leaseName;
    le.identity = identity;
    le.leaseDuration = Ms(flags.leaseDurationSeconds);
    le.renewDeadline = Ms(flags.renewDeadlineSeconds);
    le.retryPeriod = Ms(flags.retryPeriodSeconds);
    le.onStartedLeading = [&] {
      leading = true;
      acting = std::thread(startActing);
    };
    le.onStoppedLeading = [&] {
      leading = false;
      lost = true;
      kill(getpid(), SIGTERM);  // wake the main thread: stop acting and exit
    };
    le.onNewLeader = [](const std::string& id) {
      LogInfo("operator", "leader is", {{"identity", id}});
    };
    elector = std::make_unique<LeaderElector>(client->get(), le);
    elector->Start();
  } else {
    acting = std::thread(startActing);
  }
  LogInfo("operator", "started",
          {{"identity", identity},
           {"leaderElect", flags.leaderElect},
           {"controlUrl", options.pod.controlUrl}});
  int sig = 0;
  sigwait(&signals, &sig);
  const bool leadershipLost = lost.load();
  LogInfo("operator", leadershipLost ? "leadership lost; exiting" : "shutting down",
          {{"signal", sig}});
  lost = true;
  leading = false;
  if (acting.joinable()) acting.join();
  controller.Stop();
  if (elector) elector->Stop();  // releases the Lease if we still hold it
  servers.clear();
  return leadershipLost ? 1 : 0;
}

}  // namespace
}  // namespace easyscale::op

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  easyscale::StatusOr<easyscale::op::OperatorFlags> flags = easyscale::op::ParseOperatorFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "easyscale-operator: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  if (flags->help) {
    std::printf("%s", easyscale::op::OperatorUsage().c_str());
    return 0;
  }
  return easyscale::op::Run(*flags);
}
