#include "easyscale/worker/local_job.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

TEST(Schedule, Parses) {
  auto s = ParseSchedule("0:8,20:3,45:5", 8, 120);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (std::vector<ScheduleEntry>{{0, 8}, {20, 3}, {45, 5}}));
}

TEST(Schedule, RejectsMalformed) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"5:2", "must start at step 0"},
      {"0:2,10:3,10:4", "steps must increase"},
      {"0:2,x:3", "is not STEP:WORKERS"},
      {"0:0", "is not STEP:WORKERS"},
      {"0:9", "N < P"},
      {"0:2,120:3", "at or past the last step"},
      {"0:2;5:3", "is not STEP:WORKERS"},
  };
  for (const auto& [text, want] : cases) {
    auto s = ParseSchedule(text, 8, 120);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(std::string(s.status().message()).find(want), std::string::npos)
        << text << " -> " << s.status().message();
  }
}

// Regression (issue 16): "0:2," was accepted as "0:2", a stray comma unnoticed.
TEST(Schedule, RejectsEmptyEntries) {
  for (const char* text : {"0:2,", ",0:2", "0:2,,10:3", ","}) {
    auto s = ParseSchedule(text, 8, 120);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().message(),
              "--schedule: empty entry in \"" + std::string(text) + "\" (a stray comma?)");
  }
}

}  // namespace
}  // namespace easyscale
