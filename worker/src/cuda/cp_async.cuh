// File: worker/src/cuda/cp_async.cuh
//
// sm_80+ asynchronous copies global -> shared (cp.async) for the kernels that
// stream their operands through shared-memory rings. A source size below the
// copy size zero-fills the rest (0 reads nothing), which covers partial tiles.
// Each thread waits for its own groups only: a warp or block that reads what
// others copied synchronises after the wait.
#pragma once

#include <cuda_runtime.h>

namespace easyscale::cuda {

__device__ __forceinline__ void CpAsync4(float* dst, const float* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void CpAsync16(float* dst, const float* src, int bytes) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most kPending of this thread's committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace easyscale::cuda
