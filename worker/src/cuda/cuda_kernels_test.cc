// CI-side tests of the CUDA kernels: the bit-equality checks run when a GPU is
// present and skip otherwise; argument validation runs everywhere (it returns
// before any launch).
#include "cuda_kernels.h"

#include <gtest/gtest.h>

#include <string>

#include "device_buffer.h"
#include "kernel_checks.h"

namespace easyscale::cuda {
namespace {

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (UsableDeviceCount(&why) == 0) GTEST_SKIP() << "needs a CUDA GPU: " << why;
  }
};

void ExpectAllBitEqual(const std::vector<KernelCheck>& checks) {
  EXPECT_FALSE(checks.empty());
  for (const KernelCheck& c : checks) EXPECT_TRUE(c.equal) << c.name << ": " << c.detail;
}

TEST_F(CudaKernels, GemmsMatchCpuBits) { ExpectAllBitEqual(CheckGemms(11)); }
TEST_F(CudaKernels, LayoutKernelsMatchCpuBits) { ExpectAllBitEqual(CheckLayoutKernels(12)); }
TEST_F(CudaKernels, ReductionKernelsMatchCpuBits) { ExpectAllBitEqual(CheckReductionKernels(13)); }
TEST_F(CudaKernels, StepKernelsMatchCpuBits) { ExpectAllBitEqual(CheckStepKernels(14)); }

TEST(CudaKernelArguments, RejectedBeforeAnyLaunch) {
  float* none = nullptr;
  EXPECT_EQ(Gemm(-1, 4, 4, none, 4, none, 4, none, 4, false), cudaErrorInvalidValue);
  EXPECT_EQ(Gemm(4, 4, 8, none, 4, none, 4, none, 4, false), cudaErrorInvalidValue);  // lda < K
  EXPECT_EQ(GemmTiled(4, 8, 4, none, 4, none, 4, none, 8, false), cudaErrorInvalidValue);
  EXPECT_EQ(Gemm(0, 0, 3, none, 3, none, 0, none, 0, false), cudaSuccess);  // nothing to do
  EXPECT_EQ(SoftmaxCrossEntropy(kMaxSoftmaxRows + 1, 10, none, nullptr, none, none),
            cudaErrorInvalidValue);
  EXPECT_EQ(SoftmaxCrossEntropy(4, 0, none, nullptr, none, none), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace easyscale::cuda
