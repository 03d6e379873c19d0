#include "fake_kubelet.h"

#include <unistd.h>

namespace easyscale::dp::testing {

class FakeKubelet::Registration final : public v1beta1::Registration::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(*req);
    }
    cv_.notify_all();
    return grpc::Status::OK;
  }

  std::vector<v1beta1::RegisterRequest> Wait(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
    return requests_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1beta1::RegisterRequest> requests_;
};

class FakeKubelet::PodResources final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    *out = response_;
    return grpc::Status::OK;
  }

  void Set(v1::ListPodResourcesResponse r) {
    std::lock_guard<std::mutex> lock(mu_);
    response_ = std::move(r);
  }

 private:
  std::mutex mu_;
  v1::ListPodResourcesResponse response_;
};

namespace {

// Stops `server` (if running) and deletes its socket, as a stopping kubelet does.
void StopServing(std::unique_ptr<grpc::Server>* server, const std::string& path) {
  if (*server) {
    (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server->reset();
  }
  unlink(path.c_str());
}

// (Re)starts `server` on a fresh socket at `path`.
void Serve(std::unique_ptr<grpc::Server>* server, const std::string& path, grpc::Service* service) {
  StopServing(server, path);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(service);
  *server = b.BuildAndStart();
}

}  // namespace

FakeKubelet::FakeKubelet(std::string dir)
    : dir_(std::move(dir)),
      registration_(std::make_unique<Registration>()),
      pod_resources_(std::make_unique<PodResources>()) {
  StartPodResources();
}

FakeKubelet::~FakeKubelet() {
  StopRegistration();
  StopPodResources();
}

void FakeKubelet::StartPodResources() {
  Serve(&pod_resources_server_, pod_resources_socket(), pod_resources_.get());
}

void FakeKubelet::StopPodResources() {
  StopServing(&pod_resources_server_, pod_resources_socket());
}

void FakeKubelet::StartRegistration() {
  Serve(&registration_server_, registration_socket(), registration_.get());
}

void FakeKubelet::StopRegistration() { StopServing(&registration_server_, registration_socket()); }

std::vector<v1beta1::RegisterRequest> FakeKubelet::WaitForRegistrations(
    size_t n, std::chrono::milliseconds timeout) {
  return registration_->Wait(n, timeout);
}

void FakeKubelet::SetPodResources(const std::vector<Holding>& holdings) {
  v1::ListPodResourcesResponse r;
  for (const auto& h : holdings) {
    auto* pod = r.add_pod_resources();
    pod->set_name(h.pod);
    pod->set_namespace_(h.ns);
    auto* devices = pod->add_containers()->add_devices();
    devices->set_resource_name(h.resource);
    for (const auto& id : h.device_ids) devices->add_device_ids(id);
  }
  pod_resources_->Set(std::move(r));
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::DialPlugin(
    const std::string& endpoint) const {
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + dir_ + "/" + endpoint, grpc::InsecureChannelCredentials()));
}

}  // namespace easyscale::dp::testing
