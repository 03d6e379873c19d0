// gpu_kernel_check [SEED [all|gemm|layout|reduction]]: runs the CUDA-vs-CPU
// bit-equality checks and prints one line per check; exit 0 when all are
// equal, 1 when any differs, 2 without a GPU, 3 on bad arguments. Needs only
// the CUDA runtime, so it builds on a bare GPU machine.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "device_buffer.h"
#include "kernel_checks.h"

int main(int argc, char** argv) {
  const uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  const std::string only = argc > 2 ? argv[2] : "all";
  using Group = std::vector<easyscale::cuda::KernelCheck> (*)(uint64_t);
  const std::vector<std::pair<std::string, Group>> groups = {
      {"gemm", &easyscale::cuda::CheckGemms},
      {"layout", &easyscale::cuda::CheckLayoutKernels},
      {"reduction", &easyscale::cuda::CheckReductionKernels},
      {"step", &easyscale::cuda::CheckStepKernels}};
  if (only != "all" && only != "gemm" && only != "layout" && only != "reduction") {
    std::fprintf(stderr, "gpu_kernel_check: group \"%s\": want all, gemm, layout or reduction\n",
                 only.c_str());
    return 3;
  }
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
  for (const auto& [name, group] : groups) {
    if (only != "all" && only != name) continue;
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
