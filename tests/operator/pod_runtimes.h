// File: tests/operator/pod_runtimes.h
//
// What runs in a pod for the stand-in kubelet:
//  - ProcessRuntime: a real process, e.g. `easyscale-worker k8s`, running the
//    container's command (else the image's entrypoint) and args with the pod's env;
//  - ImageRuntimes: one of those per image, as kubelet runs each pod's image;
//  - ProtocolWorkerRuntime: a thread that speaks the control protocol like a
//    worker (poll the assignment once per mini-batch, train while told Run,
//    checkpoint on a newer generation or CheckpointAndStop, exit on 404),
//    without training anything: for tests and benches of the operator alone.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "easyscale/common/subprocess.h"
#include "stand_in_kubelet.h"

namespace easyscale::op::testing {

class ProcessRuntime : public PodRuntime {
 public:
  // `binary` plays the image: it runs in place of the command's first word,
  // or as the entrypoint of a container without a command; the container's
  // args follow, as kubelet runs them. Empty: the command runs as it is. Output goes to
  // <logDir>/<pod name>.log, `extraEnv` is added to every pod's env, a sandbox is entered between
  // fork and exec, and the processes die with the thread that starts them (the kubelet's).
  ProcessRuntime(std::string binary, std::string logDir,
                 std::map<std::string, std::string> extraEnv);
  Status Start(const nlohmann::json& pod, const std::map<std::string, std::string>& env,
               const PodSandbox* sandbox) override;
  void Signal(const std::string& pod, int signal) override;
  std::optional<int> Exited(const std::string& pod) override;
  void Remove(const std::string& pod) override;

 private:
  std::string binary_;
  std::string logDir_;
  std::map<std::string, std::string> extraEnv_;
  std::mutex mu_;
  std::map<std::string, Subprocess> processes_;
};

// Pods by their container's image repository (the image without its tag),
// each to the runtime that plays that image; a pod of another image only
// holds its GPUs.
class ImageRuntimes : public PodRuntime {
 public:
  explicit ImageRuntimes(std::map<std::string, std::unique_ptr<PodRuntime>> byRepository);
  bool Runs(const nlohmann::json& pod) const override;
  Status Start(const nlohmann::json& pod, const std::map<std::string, std::string>& env,
               const PodSandbox* sandbox) override;
  void Signal(const std::string& pod, int signal) override;
  std::optional<int> Exited(const std::string& pod) override;
  void Remove(const std::string& pod) override;

 private:
  PodRuntime* For(const nlohmann::json& pod) const;
  PodRuntime* Running(const std::string& pod);

  std::map<std::string, std::unique_ptr<PodRuntime>> byRepository_;
  std::mutex mu_;
  std::map<std::string, PodRuntime*> pods_;  // the runtime each started pod runs in
};

// Real `easyscale-worker k8s` pods: `worker` plays the image, and reads the
// digits file installed beside it (<prefix>/data/mnist-digits.esd).
// `sharedNetwork`: pods share the host's addresses, so each worker serves its
// state on a port of its own (EASYSCALE_STATE_PORT=0) instead of the default.
std::unique_ptr<ProcessRuntime> WorkerRuntime(const std::string& worker, const std::string& logDir,
                                              bool sharedNetwork,
                                              std::map<std::string, std::string> env = {});

class ProtocolWorkerRuntime : public PodRuntime {
 public:
  explicit ProtocolWorkerRuntime(std::chrono::milliseconds miniBatch);
  ~ProtocolWorkerRuntime() override;
  // The worker runs in this process, whatever the sandbox.
  Status Start(const nlohmann::json& pod, const std::map<std::string, std::string>& env,
               const PodSandbox* sandbox) override;
  // SIGTERM: the worker reports its checkpoint and leaves at the next
  // mini-batch; SIGKILL: it leaves without a word.
  void Signal(const std::string& pod, int signal) override;
  std::optional<int> Exited(const std::string& pod) override;
  void Remove(const std::string& pod) override;

 private:
  struct Worker {
    std::atomic<bool> stop{false};
    std::atomic<bool> killed{false};
    std::atomic<bool> done{false};
    std::thread thread;
  };
  void Run(Worker* w, std::string url, std::string job, std::string pod, std::string token,
           double samplesPerSecond);

  std::chrono::milliseconds miniBatch_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Worker>> workers_;
};

}  // namespace easyscale::op::testing
