// Tensor mirrors (a copy is a host copy; moves carry the device memory) and the
// backend-side step operations every backend implements, on the CPU backend.
#include "easyscale/worker/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "easyscale/worker/backend.h"
#include "easyscale/worker/fixed_point.h"

namespace easyscale {
namespace {

int released = 0;
void CountRelease(void*, size_t) { ++released; }

TEST(DeviceMirror, CopiesStartWithoutOneMovesCarryIt) {
  released = 0;
  static char memory[16];
  {
    Tensor a({2, 2});
    a.mirror.Adopt(memory, sizeof memory, &CountRelease);
    Tensor copy = a;
    EXPECT_EQ(copy.mirror.get(), nullptr);
    EXPECT_EQ(copy.data, a.data);
    Tensor moved = std::move(a);
    EXPECT_EQ(moved.mirror.get(), memory);
    EXPECT_EQ(a.mirror.get(), nullptr);
    copy = moved;  // assignment keeps no stale device copy either
    EXPECT_EQ(copy.mirror.get(), nullptr);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);  // freed once, by the tensor that held it last
}

TEST(CpuBackend, HoldsNoDeviceMemory) {
  KernelBackend& k = CpuKernelBackend();
  Tensor t({1024});
  k.Upload(t);
  EXPECT_EQ(k.PeakDeviceBytes(), 0u);
}

TEST(CpuBackend, AccumulatesSegmentsEndToEndAndFlagsNonFinite) {
  KernelBackend& k = CpuKernelBackend();
  const std::vector<float> g0 = {0.5f, -1.25f}, g1 = {3.0f};
  const float bad[] = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<int64_t> acc(3, 0);
  std::vector<int32_t> flags(2, 0);
  const float* segs[] = {g0.data(), g1.data()};
  const size_t sizes[] = {2, 1};
  k.AccumulateFixedPoint(segs, sizes, 8, acc.data(), flags.data());
  k.AccumulateFixedPoint(segs, sizes, 8, acc.data(), flags.data());
  for (size_t i = 0; i < 3; ++i) {
    const float v = i < 2 ? g0[i] : g1[0];
    int64_t one;
    ASSERT_TRUE(ToFixedPoint(v, 8, &one));
    EXPECT_EQ(acc[i], 2 * one) << i;
  }
  EXPECT_EQ(flags, (std::vector<int32_t>{0, 0}));
  const float* bad_segs[] = {g0.data(), bad};
  const size_t bad_sizes[] = {2, 2};
  std::vector<int64_t> acc2(4, 0);
  k.AccumulateFixedPoint(bad_segs, bad_sizes, 8, acc2.data(), flags.data());
  EXPECT_EQ(flags, (std::vector<int32_t>{0, 1}));
}

// Several sources' segments of the same sizes fold into the same sums, each
// source's flags after the previous one's.
TEST(CpuBackend, AccumulatesSeveralSourcesIntoTheSameSums) {
  KernelBackend& k = CpuKernelBackend();
  const std::vector<float> a0 = {0.5f, -1.25f}, a1 = {3.0f}, b0 = {2.0f, 0.75f};
  const float b1[] = {std::numeric_limits<float>::infinity()};
  const float* segs[] = {a0.data(), a1.data(), b0.data(), b1};
  const size_t sizes[] = {2, 1};
  std::vector<int64_t> acc(3, 0);
  std::vector<int32_t> flags(4, 0);
  k.AccumulateFixedPoint(segs, sizes, 8, acc.data(), flags.data());
  std::vector<int64_t> one_by_one(3, 0);
  std::vector<int32_t> unused(2, 0);
  k.AccumulateFixedPoint(std::span(segs, 2), sizes, 8, one_by_one.data(), unused.data());
  k.AccumulateFixedPoint(std::span(segs + 2, 2), sizes, 8, one_by_one.data(), unused.data());
  EXPECT_EQ(acc, one_by_one);
  int64_t half, two;
  ASSERT_TRUE(ToFixedPoint(0.5f, 8, &half));
  ASSERT_TRUE(ToFixedPoint(2.0f, 8, &two));
  EXPECT_EQ(acc[0], half + two);
  EXPECT_EQ(flags, (std::vector<int32_t>{0, 0, 0, 1}));
}

TEST(CpuBackend, LossGoesToItsOutputAndCopyZeroWork) {
  KernelBackend& k = CpuKernelBackend();
  const float logits[] = {1.0f, 2.0f, 0.5f, 0.5f};
  const int32_t labels[] = {1, 0};
  float dlogits[4], loss = -1.0f;
  k.SoftmaxCrossEntropy(2, 2, logits, labels, dlogits, &loss);
  EXPECT_GT(loss, 0.0f);
  EXPECT_TRUE(std::isfinite(loss));
  float dst[4];
  k.Copy(sizeof logits, logits, dst);
  EXPECT_EQ(std::vector<float>(dst, dst + 4), std::vector<float>(logits, logits + 4));
  k.Zero(sizeof dst, dst);
  EXPECT_EQ(std::vector<float>(dst, dst + 4), std::vector<float>(4, 0.0f));
  Tensor t({3});
  EXPECT_EQ(k.At(t), t.ptr());  // the CPU computes on the host elements themselves
}

}  // namespace
}  // namespace easyscale
