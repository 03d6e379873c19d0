// File: worker/src/cuda/stream_scratch.h
//
// Stream-ordered scratch for the kernels that need a few intermediate floats
// (k blocks' partial sums, per-sample results): cudaMallocAsync on the launch's
// stream, so a CUDA graph that captures the launch captures the allocation too.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace easyscale::cuda {

// Runs run(scratch) with `floats` floats of scratch (null for none), freed
// after it on the stream; the first error of the allocation, run or the free.
template <typename Run>
cudaError_t WithStreamScratch(size_t floats, cudaStream_t stream, Run&& run) {
  if (floats == 0) return run(static_cast<float*>(nullptr));
  float* scratch = nullptr;
  cudaError_t err =
      cudaMallocAsync(reinterpret_cast<void**>(&scratch), floats * sizeof(float), stream);
  if (err != cudaSuccess) return err;
  err = run(scratch);
  const cudaError_t freed = cudaFreeAsync(scratch, stream);
  return err != cudaSuccess ? err : freed;
}

}  // namespace easyscale::cuda
