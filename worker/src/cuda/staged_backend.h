// File: worker/src/cuda/staged_backend.h
//
// The CUDA kernels behind KernelBackend (layers.h) on host tensors: each call
// copies its operands to device memory, runs the CUDA kernel and copies the
// results back. The bits are the CPU's (cuda_kernels.h); the speed is bound by
// the copies. Tensors resident on the device are the next step.
#pragma once

#include <memory>

#include "easyscale/common/status.h"
#include "easyscale/worker/layers.h"

namespace easyscale::cuda {

// Fails (FailedPrecondition, with the reason) when no CUDA device is usable.
StatusOr<std::unique_ptr<KernelBackend>> MakeStagedKernelBackend();

}  // namespace easyscale::cuda
