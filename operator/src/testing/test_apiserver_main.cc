// easyscale-test-apiserver: the test API server as a process, for trying the
// operator and kubectl-like clients by hand.
//   easyscale-test-apiserver --port 6443 --tls --kubeconfig /tmp/kc
// It prints its URL on the first line of stdout once it answers.
#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "test_apiserver.h"

int main(int argc, char** argv) {
  easyscale::op::testing::TestApiServerOptions o;
  std::string kubeconfig;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "easyscale-test-apiserver: %s: needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tls") {
      o.tls = true;
    } else if (a == "--port") {
      if (!absl::SimpleAtoi(value("--port"), &o.port) || o.port < 0 || o.port > 65535) {
        std::fprintf(stderr, "easyscale-test-apiserver: --port: want 0..65535\n");
        return 2;
      }
    } else if (a == "--compaction-window") {
      if (!absl::SimpleAtoi(value("--compaction-window"), &o.compactionWindow) ||
          o.compactionWindow == 0) {
        std::fprintf(stderr, "easyscale-test-apiserver: --compaction-window: want a count > 0\n");
        return 2;
      }
    } else if (a == "--token") {
      o.token = value("--token");
    } else if (a == "--kubeconfig") {
      kubeconfig = value("--kubeconfig");
    } else if (a == "--help") {
      std::printf(
          "usage: easyscale-test-apiserver [--port N] [--tls] [--token T] [--kubeconfig OUT]\n"
          "                                [--compaction-window EVENTS]\n"
          "  --compaction-window: changes kept for watches to resume from; a watch\n"
          "                       from an older resourceVersion gets 410 Expired\n");
      return 0;
    } else {
      std::fprintf(stderr, "easyscale-test-apiserver: unknown flag \"%s\"\n", a.c_str());
      return 2;
    }
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto server = easyscale::op::testing::TestApiServer::Start(o);
  if (!server.ok()) {
    std::fprintf(stderr, "easyscale-test-apiserver: %s\n", server.status().ToString().c_str());
    return 1;
  }
  if (!kubeconfig.empty()) {
    easyscale::Status s = (*server)->WriteKubeconfig(kubeconfig);
    if (!s.ok()) {
      std::fprintf(stderr, "easyscale-test-apiserver: --kubeconfig: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("%s\n", (*server)->url().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  return 0;
}
