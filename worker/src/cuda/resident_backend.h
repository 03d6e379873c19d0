// File: worker/src/cuda/resident_backend.h
//
// The "cuda" backend: KernelBackend (backend.h) on tensors whose mirrors live
// in device memory, the step's own kernels from cuda_kernels.h, and the
// current lane's stream for the graph ops' CUDA halves. Every kernel and copy
// is queued in program order on the current lane's stream (8 lanes, so a
// step's ESTs run side by side), and a step runs without waiting until its
// fixed-point sums are downloaded; the bits are the CPU's.
// A device error throws CudaError naming the call that saw it (device errors
// are asynchronous: the call that reports one may not be the one that caused it).
#pragma once

#include <memory>

#include "easyscale/common/status.h"
#include "easyscale/worker/backend.h"

namespace easyscale::cuda {

// On GPU `device` modulo the device count. Fails (FailedPrecondition, with the
// reason) when no CUDA device is usable.
StatusOr<std::unique_ptr<KernelBackend>> MakeResidentKernelBackend(int device);

}  // namespace easyscale::cuda
