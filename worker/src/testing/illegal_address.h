// File: worker/src/testing/illegal_address.h (test-only, CUDA builds)
//
// The fault a broken kernel or a failing GPU produces: a kernel on `stream`
// writes to an illegal address (sticky: the process's CUDA context is
// unusable after it; the next wait on the device reports it).
#pragma once

#include <cuda_runtime.h>

namespace easyscale {

// The launch's error; the fault itself surfaces at the next synchronisation.
cudaError_t InjectIllegalAddress(cudaStream_t stream);

}  // namespace easyscale
