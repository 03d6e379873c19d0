#include "generator.h"

#include <gtest/gtest.h>

#include <map>

namespace easyscale::sim {
namespace {

GeneratorOptions Small(uint64_t seed) {
  GeneratorOptions o;
  o.gpus = 256;
  o.jobs = 80;
  o.days = 2;
  o.seed = seed;
  return o;
}

TEST(GeneratorTest, SameSeedSameTraceOtherSeedOther) {
  EXPECT_EQ(FormatTrace(GenerateTrace(Small(3))), FormatTrace(GenerateTrace(Small(3))));
  EXPECT_NE(FormatTrace(GenerateTrace(Small(3))), FormatTrace(GenerateTrace(Small(4))));
}

TEST(GeneratorTest, FleetJobsAndDiurnalInference) {
  const Trace t = GenerateTrace(Small(1));
  EXPECT_EQ(t.TotalGpus(), 256);
  std::map<std::string, int> types;
  for (const TraceNode& n : t.nodes) types[n.gpuType] += n.gpus;
  EXPECT_EQ(types.size(), 4u);
  ASSERT_EQ(t.jobs.size(), 80u);
  for (const TraceJob& j : t.jobs) {
    EXPECT_LE(j.minWorkers, j.maxWorkers);
    EXPECT_LE(j.maxWorkers, j.ests);
    EXPECT_GT(j.workSamples, 0.0);
    EXPECT_LT(j.submit, t.horizon);
  }
  // Replay the levels: inference at mid-afternoon well above the night.
  std::map<std::string, int> level;
  double afternoon = 0, night = 0;
  size_t k = 0;
  for (double time = 0; time < t.horizon; time += 900) {
    for (; k < t.inference.size() && t.inference[k].time <= time; ++k) {
      level[t.inference[k].node] = t.inference[k].gpus;
    }
    int sum = 0;
    for (const auto& [n, g] : level) sum += g;
    const double hour = std::fmod(time, 86400.0) / 3600.0;
    if (hour >= 13 && hour < 15) afternoon = std::max(afternoon, 1.0 * sum);
    if (hour >= 1 && hour < 3) night = std::max(night, 1.0 * sum);
  }
  EXPECT_GT(afternoon, 1.5 * night);
}

TEST(GeneratorTest, RejectsBadOptions) {
  GeneratorOptions o;
  o.gpus = 0;
  EXPECT_FALSE(ValidateGeneratorOptions(o).ok());
  o = GeneratorOptions{};
  o.days = 0;
  EXPECT_FALSE(ValidateGeneratorOptions(o).ok());
  EXPECT_TRUE(ValidateGeneratorOptions(GeneratorOptions{}).ok());
}

}  // namespace
}  // namespace easyscale::sim
