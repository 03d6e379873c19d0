// gpu_kernel_check: runs every CUDA-vs-CPU bit-equality check and prints one
// line per check; exit 0 when all are equal, 1 when any differs, 2 without a
// GPU. Needs only the CUDA runtime, so it builds on a bare GPU machine.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "device_buffer.h"
#include "kernel_checks.h"

int main(int argc, char** argv) {
  const uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  std::string why;
  if (easyscale::cuda::UsableDeviceCount(&why) == 0) {
    std::fprintf(stderr, "gpu_kernel_check: no GPU: %s\n", why.c_str());
    return 2;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("device: %s (sm_%d%d, %d SMs), seed %llu\n", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, static_cast<unsigned long long>(seed));
  int total = 0, failed = 0;
  for (auto* group : {&easyscale::cuda::CheckGemms, &easyscale::cuda::CheckLayoutKernels,
                      &easyscale::cuda::CheckReductionKernels}) {
    for (const auto& c : group(seed)) {
      ++total;
      failed += !c.equal;
      std::printf("%s %s%s%s\n", c.equal ? "EQUAL " : "DIFFER", c.name.c_str(), c.equal ? "" : ": ",
                  c.detail.c_str());
    }
  }
  std::printf("gpu_kernel_check: %d checks, %d bit-equal, %d differ\n", total, total - failed,
              failed);
  return failed == 0 ? 0 : 1;
}
