// File: worker/src/cuda/kernel_checks.h
//
// Bit-equality checks of every CUDA kernel against its CPU twin, on random
// inputs of the CNN's shapes (per-EST batch 16 and whole-step batch 128) and on
// awkward sizes (not multiples of any tile, unaligned leading dimensions,
// accumulate, K = 0). Shared by the GoogleTest suite (CI, skips without a GPU)
// and the standalone gpu_kernel_check program run on the lent GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace easyscale::cuda {

struct KernelCheck {
  std::string name;  // kernel and shape, e.g. "Gemm/tiled 130x257x67"
  bool equal = false;
  std::string detail;  // first differing element, or the CUDA error
};

// The groups of checks; each returns one entry per (kernel, shape).
std::vector<KernelCheck> CheckGemms(uint64_t seed);
std::vector<KernelCheck> CheckLayoutKernels(uint64_t seed);
std::vector<KernelCheck> CheckReductionKernels(uint64_t seed);
// The step's own kernels against the CPU backend's: the sums' decode and the
// optimizers' updates.
std::vector<KernelCheck> CheckStepKernels(uint64_t seed);

}  // namespace easyscale::cuda
