#include "easyscale/common/job_spec.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

nlohmann::json Valid() {
  return {{"image", "easyscale/worker:0.1"},
          {"ests", 8},
          {"minWorkers", 1},
          {"maxWorkers", 4},
          {"gpuTypes", {"a100", "t4"}}};
}

TEST(JobSpec, ParsesAndDefaults) {
  auto s = ParseJobSpec(Valid());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ests, 8);
  EXPECT_EQ(s->maxWorkers, 4);
  EXPECT_EQ(s->training.model, "cnn");
  auto j = Valid();
  j.erase("maxWorkers");
  EXPECT_EQ(ParseJobSpec(j)->maxWorkers, 8);
}

TEST(JobSpec, RoundTrips) {
  auto s = ParseJobSpec(Valid());
  ASSERT_TRUE(s.ok());
  auto again = ParseJobSpec(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*s, *again);
}

struct BadCase {
  const char* field;
  nlohmann::json value;
  const char* want;
};

TEST(JobSpec, RejectsBadFieldsNamingThem) {
  const BadCase cases[] = {
      {"ests", 0, "spec.ests: must be >= 1"},
      {"ests", "8", "spec.ests: must be an integer"},
      {"image", "", "spec.image: must not be empty"},
      {"minWorkers", 5, "spec.minWorkers: must be <= maxWorkers"},
      {"maxWorkers", 9, "spec.maxWorkers: must be <= ests"},
      {"gpuTypes", {"a100", "z80"}, "spec.gpuTypes[1]: unknown GPU type \"z80\""},
      {"training", {{"model", "resnet"}}, "spec.training.model: must be one of mlp, cnn"},
      {"training", {{"steps", 0}}, "spec.training.steps: must be >= 1"},
  };
  for (const auto& c : cases) {
    auto j = Valid();
    j[c.field] = c.value;
    auto s = ParseJobSpec(j);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_NE(std::string(s.status().message()).find(c.want), std::string::npos)
        << s.status().message();
  }
  auto j = Valid();
  j.erase("image");
  EXPECT_EQ(ParseJobSpec(j).status().message(), "spec.image: is required");
  EXPECT_FALSE(ParseJobSpec(nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace easyscale
