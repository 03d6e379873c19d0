// The "cuda" worker backend: the same digest as the CPU for a short job on one
// worker and on a mixed pair (runs with a GPU, skips without); backend names
// are validated everywhere.
#include "resident_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "easyscale/worker/collective.h"
#include "easyscale/worker/est_worker.h"
#include "easyscale/worker/threaded_job.h"

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

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda::UsableDeviceCount(&why) == 0) GTEST_SKIP() << "needs a CUDA GPU: " << why;
    root_ =
        (std::filesystem::temp_directory_path() / ("es-cuda-" + std::to_string(getpid()))).string();
    std::filesystem::remove_all(root_);
    data_ = MakeSyntheticDataset(512, 1, 28, 28, 10, 3);
    args_.model = "cnn";
    args_.dataset = "synthetic";
    args_.steps = 4;
    args_.batchPerEst = 4;
    args_.checkpointEvery = 0;
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  // Trains with one worker per backend (ESTs split in halves for two), as threads over Gloo.
  std::string Train(const std::vector<std::string>& backends, const std::string& name) {
    const std::string dir = root_ + "/" + name;
    const std::vector<std::vector<int>> placement =
        backends.size() == 1 ? std::vector<std::vector<int>>{{0, 1, 2, 3}}
                             : std::vector<std::vector<int>>{{0, 1}, {2, 3}};
    std::vector<ThreadedWorker> workers;
    for (size_t r = 0; r < backends.size(); ++r) workers.push_back({placement[r], backends[r]});
    auto digest = TrainInThreads(args_, data_, 4, {{0, workers}}, dir);
    EXPECT_TRUE(digest.ok()) << digest.status();
    return digest.ok() ? *digest : "";
  }

  std::string root_;
  Dataset data_;
  TrainingArgs args_;
};

TEST_F(CudaBackendTest, DigestEqualsCpuOnOneWorkerAndMixed) {
  const std::string cpu = Train({"cpu"}, "cpu");
  ASSERT_EQ(cpu.size(), 64u);
  EXPECT_EQ(Train({"cuda"}, "cuda"), cpu);
  EXPECT_EQ(Train({"cpu", "cuda"}, "mixed"), cpu);
}

}  // namespace
}  // namespace easyscale
