// File: worker/src/testing/threaded_training.h
//
// A test fixture that trains a short synthetic CNN job with its workers as
// threads over Gloo and returns the digest: the placement and backend tests
// compare those digests with each other.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "easyscale/worker/threaded_job.h"

namespace easyscale::testing {

class ThreadedTraining : public ::testing::Test {
 protected:
  static constexpr int kEsts = 4;

  // `prefix` names the fixture's temporary folder (one per process).
  explicit ThreadedTraining(const std::string& prefix, int steps) {
    root_ = (std::filesystem::temp_directory_path() / (prefix + std::to_string(getpid()))).string();
    data_ = MakeSyntheticDataset(512, 1, 28, 28, 10, 3);
    args_.model = "cnn";
    args_.dataset = "synthetic";
    args_.steps = steps;
    args_.batchPerEst = 4;
    args_.checkpointEvery = 0;
  }
  void SetUp() override { std::filesystem::remove_all(root_); }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // Trains with `workers` (one generation) into root_/name; "" on failure.
  std::string Train(const std::vector<ThreadedWorker>& workers, const std::string& name) {
    auto digest = TrainInThreads(args_, data_, kEsts, {{0, workers}}, root_ + "/" + name);
    EXPECT_TRUE(digest.ok()) << digest.status();
    return digest.ok() ? *digest : "";
  }

  std::string root_;
  Dataset data_;
  TrainingArgs args_;
};

}  // namespace easyscale::testing
