// NCCL between GPU workers (collective.h's UseDeviceCollective): the int64
// fixed-point sums go through ncclAllReduce, one rank per GPU. The ranks agree
// over the host collective first, which also carries NCCL's unique id.
#include <nccl.h>

#include <cstring>
#include <set>
#include <utility>

#include "device_buffer.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/worker/collective.h"

namespace easyscale {
namespace {

Status NcclStatus(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(what, ": ", ncclGetErrorString(r)));
}

class NcclCollective : public Collective {
 public:
  NcclCollective(std::unique_ptr<Collective> host, ncclComm_t comm, cudaStream_t stream)
      : host_(std::move(host)), comm_(comm), stream_(stream) {}
  ~NcclCollective() override {
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  Status AllreduceSum(std::span<int64_t> data) override {
    if (data.empty()) return absl::OkStatus();
    try {
      buffer_.Resize(data.size());
      const size_t bytes = data.size() * sizeof(int64_t);
      cuda::ThrowIfError(
          cudaMemcpyAsync(buffer_.get(), data.data(), bytes, cudaMemcpyHostToDevice, stream_),
          "copy to device");
      ES_RETURN_IF_ERROR(NcclStatus(ncclAllReduce(buffer_.get(), buffer_.get(), data.size(),
                                                  ncclInt64, ncclSum, comm_, stream_),
                                    "ncclAllReduce"));
      cuda::ThrowIfError(
          cudaMemcpyAsync(data.data(), buffer_.get(), bytes, cudaMemcpyDeviceToHost, stream_),
          "copy to host");
      cuda::ThrowIfError(cudaStreamSynchronize(stream_), "ncclAllReduce");
    } catch (const cuda::CudaError& e) {
      return absl::UnavailableError(std::string("NCCL allreduce failed: ") + e.what());
    }
    return absl::OkStatus();
  }
  Status Barrier() override { return host_->Barrier(); }

 private:
  std::unique_ptr<Collective> host_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  cuda::DeviceBuffer<int64_t> buffer_;
};

// Each rank's slot: on_gpu flag, then its GPU's UUID as two words.
constexpr size_t kSlot = 3;

}  // namespace

StatusOr<std::unique_ptr<Collective>> UseDeviceCollective(std::unique_ptr<Collective> host,
                                                          bool on_gpu, int device) {
  const int rank = host->rank(), size = host->size();
  std::vector<int64_t> slots(kSlot * size, 0);
  int gpu = -1;
  if (on_gpu) {
    try {
      gpu = cuda::SelectDevice(device);
      cudaDeviceProp prop{};
      cuda::ThrowIfError(cudaGetDeviceProperties(&prop, gpu), "cudaGetDeviceProperties");
      slots[kSlot * rank] = 1;
      std::memcpy(&slots[kSlot * rank + 1], prop.uuid.bytes, sizeof prop.uuid.bytes);
    } catch (const cuda::CudaError&) {
      on_gpu = false;  // the peers then keep the host collective too
    }
  }
  ES_RETURN_IF_ERROR(host->AllreduceSum(slots));
  std::set<std::pair<int64_t, int64_t>> gpus;
  for (int r = 0; r < size; ++r) {
    if (slots[kSlot * r] != 1) return host;  // a CPU worker: stage through the host
    gpus.insert({slots[kSlot * r + 1], slots[kSlot * r + 2]});
  }
  if (static_cast<int>(gpus.size()) != size) return host;  // ranks share a GPU: NCCL cannot

  ncclUniqueId id{};
  static_assert(sizeof id.internal % sizeof(int64_t) == 0, "the id travels as int64 words");
  std::vector<int64_t> words(sizeof id.internal / sizeof(int64_t), 0);
  if (rank == 0) {
    ES_RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    std::memcpy(words.data(), id.internal, sizeof id.internal);
  }
  ES_RETURN_IF_ERROR(host->AllreduceSum(words));  // rank 0's id, everyone else adds zeros
  std::memcpy(id.internal, words.data(), sizeof id.internal);
  ncclComm_t comm = nullptr;
  ES_RETURN_IF_ERROR(NcclStatus(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank"));
  cudaStream_t stream = nullptr;
  if (cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      err != cudaSuccess) {
    ncclCommDestroy(comm);
    return absl::UnavailableError(std::string("cudaStreamCreate: ") + cudaGetErrorString(err));
  }
  int version = 0;
  ncclGetVersion(&version);
  LogInfo("worker", "sums through NCCL", {{"ranks", size}, {"gpu", gpu}, {"nccl", version}});
  return std::unique_ptr<Collective>(new NcclCollective(std::move(host), comm, stream));
}

}  // namespace easyscale
