#include "testing/illegal_address.h"

namespace easyscale {
namespace {

__global__ void IllegalAddressKernel(float* p) { p[threadIdx.x] = 1.0f; }

}  // namespace

cudaError_t InjectIllegalAddress(cudaStream_t stream) {
  // An address no allocation can have: the low page is never mapped.
  IllegalAddressKernel<<<1, 32, 0, stream>>>(reinterpret_cast<float*>(0x40));
  return cudaGetLastError();
}

}  // namespace easyscale
