// File: worker/src/testing/threaded_training.h
//
// A test fixture that trains a short synthetic CNN job with its workers as
// threads over Gloo and returns the digest: the placement and backend tests
// compare those digests with each other. Nothing touches the disk.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/threaded_job.h"

namespace easyscale::testing {

class ThreadedTraining : public ::testing::Test {
 protected:
  static constexpr int kEsts = 4;

  explicit ThreadedTraining(int steps) {
    data_ = MakeSyntheticDataset(512, 1, 28, 28, 10, 3);
    args_.model = "cnn";
    args_.dataset = "synthetic";
    args_.steps = steps;
    args_.batchPerEst = 4;
    args_.checkpointEvery = 0;
  }
  // Trains with `workers` (one generation); "" on failure.
  std::string Train(const std::vector<ThreadedWorker>& workers) {
    auto digest = TrainInThreads(args_, data_, kEsts, {{0, workers}});
    EXPECT_TRUE(digest.ok()) << digest.status();
    return digest.ok() ? *digest : "";
  }

  Dataset data_;
  TrainingArgs args_;
};

}  // namespace easyscale::testing
