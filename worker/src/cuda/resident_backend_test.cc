// The "cuda" worker backend: the same digest as the CPU for a short job on one
// worker and on a mixed pair (runs with a GPU, skips without); backend names
// are validated everywhere.
#include "resident_backend.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_kernels.h"
#include "device_buffer.h"
#include "easyscale/worker/collective.h"
#include "easyscale/worker/est_worker.h"
#include "testing/threaded_job.h"
#include "testing/threaded_training.h"

namespace easyscale {
namespace {

TEST(KernelBackendNames, UnknownAndUnavailableAreClearErrors) {
  auto cpu = MakeKernelBackend("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(*cpu, nullptr);  // the layers' default CPU kernels
  auto bad = MakeKernelBackend("tpu");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  std::string why;
  if (cuda::UsableDeviceCount(&why) == 0) {
    auto gpu = MakeKernelBackend("cuda");
    EXPECT_TRUE(absl::IsFailedPrecondition(gpu.status())) << gpu.status();
    EXPECT_NE(gpu.status().message().find("no usable GPU"), std::string::npos);
  }
}

// A resident backend on GPU 0 (skips without a GPU).
class ResidentBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda::UsableDeviceCount(&why) == 0) GTEST_SKIP() << "needs a CUDA GPU: " << why;
    auto made = cuda::MakeResidentKernelBackend(0);
    ASSERT_TRUE(made.ok()) << made.status();
    backend_ = std::move(*made);
  }
  std::unique_ptr<KernelBackend> backend_;
};

// A repeatable pass runs, is recorded on its second call and replayed after,
// reading what is in its memory at replay time; other addresses run it again.
TEST_F(ResidentBackendTest, RunRepeatableReplaysTheRecordedPassOnTheSameAddresses) {
  KernelBackend& k = *backend_;
  cuda::DeviceBuffer<float> a(std::vector<float>{1, 2}), b(std::vector<float>{10, 20}), out(2);
  const float* in = a.get();
  int calls = 0;
  const auto pass = [&] {
    ++calls;
    cuda::ThrowIfError(cuda::Add(2, in, b.get(), out.get(), static_cast<cudaStream_t>(k.Stream())),
                       "Add");
  };
  const auto run = [&] {
    const uintptr_t addresses[] = {reinterpret_cast<uintptr_t>(in),
                                   reinterpret_cast<uintptr_t>(b.get()),
                                   reinterpret_cast<uintptr_t>(out.get())};
    const bool replayed = k.RunRepeatable(7, addresses, pass);
    k.Wait();
    return replayed;
  };
  EXPECT_FALSE(run());  // runs
  EXPECT_FALSE(run());  // records and launches the record
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(out.Download(), (std::vector<float>{11, 22}));
  a.Upload({3, 4});
  EXPECT_TRUE(run());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(out.Download(), (std::vector<float>{13, 24}));
  cuda::DeviceBuffer<float> c(std::vector<float>{5, 6});
  in = c.get();
  EXPECT_FALSE(run());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(out.Download(), (std::vector<float>{15, 26}));
}

// Work on a lane's side stream runs after what the lane queued before
// ForkSide and before what it queues after JoinSide: run directly, from a
// recorded pass, on a lane of a fork of one, and on a lane of two side by side
// (where ForkSide gives the lane's own stream); arrays large enough that a
// missing order shows as wrong sums.
TEST_F(ResidentBackendTest, TheSideStreamRunsBetweenItsForkAndJoin) {
  KernelBackend& k = *backend_;
  const size_t n = size_t{1} << 22;
  cuda::DeviceBuffer<float> a(std::vector<float>(n, 1.0f)), b(std::vector<float>(n, 2.0f));
  cuda::DeviceBuffer<float> first(n), beside(n), along(n), last(n);
  const auto pass = [&] {
    const auto st = [&] { return static_cast<cudaStream_t>(k.Stream()); };
    cuda::ThrowIfError(cuda::Add(n, a.get(), b.get(), first.get(), st()), "Add");  // 3
    const auto side = static_cast<cudaStream_t>(k.ForkSide());
    cuda::ThrowIfError(cuda::Add(n, first.get(), b.get(), beside.get(), side), "Add");  // 5
    cuda::ThrowIfError(cuda::Add(n, first.get(), a.get(), along.get(), st()), "Add");   // 4
    k.JoinSide();
    cuda::ThrowIfError(cuda::Add(n, beside.get(), along.get(), last.get(), st()), "Add");  // 9
  };
  const auto check = [&](const char* how) {
    k.Wait();
    EXPECT_EQ(last.Download(), std::vector<float>(n, 9.0f)) << how;
    last.Upload(std::vector<float>(n, 0.0f));
    first.Upload(std::vector<float>(n, 0.0f));
  };
  pass();
  check("queued");
  const uintptr_t addresses[] = {reinterpret_cast<uintptr_t>(last.get())};
  for (int i = 0; i < 3; ++i) {
    k.RunRepeatable(11, addresses, pass);
    check("run, recorded or replayed");
  }
  k.ForkLanes(1);
  k.UseLane(0);
  EXPECT_NE(k.ForkSide(), k.Stream());
  // The GEMM dispatch counts the side stream's products beside the lane's.
  EXPECT_EQ(cuda::SideBySideStreams(), 2);
  k.JoinSide();
  EXPECT_EQ(cuda::SideBySideStreams(), 1);
  pass();
  k.JoinLanes();
  check("on the one lane of a fork");
  k.ForkLanes(2);
  k.UseLane(1);
  EXPECT_EQ(k.ForkSide(), k.Stream());
  EXPECT_EQ(cuda::SideBySideStreams(), 2);  // the lanes'
  k.JoinSide();
  EXPECT_EQ(cuda::SideBySideStreams(), 2);
  pass();
  k.JoinLanes();
  check("on lane 1 of two");
}

// PeakDeviceBytes counts a tensor's mirror from its upload on and keeps the
// most after it is freed (a size above any earlier peak of the process's).
TEST_F(ResidentBackendTest, PeakDeviceBytesCountsTheMirrorsAtTheirMost) {
  KernelBackend& k = *backend_;
  const size_t before = k.PeakDeviceBytes();
  const size_t floats = before / sizeof(float) + (size_t{4} << 20);
  {
    Tensor t({static_cast<int>(floats)});
    k.Upload(t);
    k.Wait();
    EXPECT_GE(k.PeakDeviceBytes(), floats * sizeof(float));
  }
  EXPECT_GE(k.PeakDeviceBytes(), floats * sizeof(float));
}

class CudaBackendTest : public testing::ThreadedTraining {
 protected:
  CudaBackendTest() : ThreadedTraining(4) {}
  void SetUp() override {
    std::string why;
    if (cuda::UsableDeviceCount(&why) == 0) GTEST_SKIP() << "needs a CUDA GPU: " << why;
  }

  // One worker per backend (the ESTs split in halves for two).
  std::string Train(const std::vector<std::string>& backends) {
    const std::vector<std::vector<int>> placement =
        backends.size() == 1 ? std::vector<std::vector<int>>{{0, 1, 2, 3}}
                             : std::vector<std::vector<int>>{{0, 1}, {2, 3}};
    std::vector<ThreadedWorker> workers;
    for (size_t r = 0; r < backends.size(); ++r) workers.push_back({placement[r], backends[r]});
    return ThreadedTraining::Train(workers);
  }
};

// Each hosted EST on a lane of its own: every fixed-point sum folds after the
// passes, into lane 0's arena (EstWorker's sums_in_arena_).
TEST_F(CudaBackendTest, DigestEqualsCpuOnOneWorkerAndMixed) {
  const std::string cpu = Train({"cpu"});
  ASSERT_EQ(cpu.size(), 64u);
  EXPECT_EQ(Train({"cuda"}), cpu);
  EXPECT_EQ(Train({"cpu", "cuda"}), cpu);
}

// One cuda worker keeps parameters, Adam's moments and the sums on the device
// and updates there; two workers update on the host. Generations switching
// between the two hand the state over through snapshots, and every digest is
// the CPU's. The last generation's two lanes run two passes each: the first
// folds its sums in the second, into memory of their own.
TEST_F(CudaBackendTest, TheDeviceUpdateEqualsTheHostsAcrossGenerations) {
  args_.optimizer = "adam";
  args_.weightDecay = 1e-3;
  args_.lrSchedule = "cosine";
  const std::string cpu = Train({"cpu"});
  ASSERT_EQ(cpu.size(), 64u);
  EXPECT_EQ(Train({"cuda"}), cpu);
  auto switching = TrainInThreads(args_, data_, kEsts,
                                  {{0, {{{0, 1, 2, 3}, "cuda"}}},
                                   {1, {{{0, 1}, "cuda"}, {{2, 3}, "cpu"}}},
                                   {3, {{{0, 1, 2, 3}, "cuda", 2}}}});
  ASSERT_TRUE(switching.ok()) << switching.status();
  EXPECT_EQ(*switching, cpu);
}

}  // namespace
}  // namespace easyscale
