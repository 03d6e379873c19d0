// The GPU gauges follow their source at every scrape, types that are gone
// included.
#include "controller/metrics.h"

#include <gtest/gtest.h>

namespace easyscale::op {
namespace {

bool Shows(Metrics& m, const std::string& series) {
  return m.Text().find(series + "\n") != std::string::npos;
}

TEST(Metrics, GpuGaugesShowTheSourceAtEachScrape) {
  Metrics m;
  EXPECT_FALSE(Shows(m, R"(easyscale_gpus{gpu_type="a100",state="idle"} 0)"));
  std::map<std::string, GpuCounts> now = {{"a100", {.idle = 1, .training = 2, .inference = 1}},
                                          {"h100", {.idle = 2}}};
  m.SetGpuSource([&] { return now; });
  EXPECT_TRUE(Shows(m, R"(easyscale_gpus{gpu_type="a100",state="training"} 2)"));
  EXPECT_TRUE(Shows(m, R"(easyscale_gpus{gpu_type="h100",state="idle"} 2)"));
  now = {{"a100", {.idle = 4}}};  // the job ended; the h100 node left
  EXPECT_TRUE(Shows(m, R"(easyscale_gpus{gpu_type="a100",state="training"} 0)"));
  EXPECT_TRUE(Shows(m, R"(easyscale_gpus{gpu_type="a100",state="idle"} 4)"));
  EXPECT_EQ(m.Text().find("h100"), std::string::npos);
  m.SetGpuSource(nullptr);
  EXPECT_EQ(m.Text().find("easyscale_gpus{"), std::string::npos);
}

TEST(Metrics, CertifiedStepPerJobUntilTheJobIsForgotten) {
  Metrics m;
  m.SetJobStep("ns/j", 57);
  m.SetJobCertifiedStep("ns/j", 40);
  EXPECT_TRUE(Shows(m, R"(easyscale_job_certified_step{job="ns/j"} 40)"));
  EXPECT_TRUE(Shows(m, R"(easyscale_job_step{job="ns/j"} 57)"));
  m.SetJobCertifiedStep("ns/j", 60);
  EXPECT_TRUE(Shows(m, R"(easyscale_job_certified_step{job="ns/j"} 60)"));
  m.ForgetJob("ns/j");
  EXPECT_EQ(m.Text().find(R"({job="ns/j"})"), std::string::npos);
}

TEST(Metrics, WorkQueueSeriesUnderControllerRuntimesNames) {
  Metrics m;
  WorkQueue q({}, m.Queue("easyscalejob"));
  EXPECT_EQ(m.Queue("easyscalejob"), m.Queue("easyscalejob"));
  q.Add("ns/a");
  q.Add("ns/b");
  EXPECT_TRUE(Shows(m, R"(workqueue_depth{name="easyscalejob"} 2)"));
  EXPECT_TRUE(Shows(m, R"(workqueue_adds_total{name="easyscalejob"} 2)"));
  ASSERT_EQ(q.Get(), "ns/a");
  q.Done("ns/a");
  EXPECT_TRUE(Shows(m, R"(workqueue_depth{name="easyscalejob"} 1)"));
  EXPECT_TRUE(Shows(m, R"(workqueue_queue_duration_seconds_count{name="easyscalejob"} 1)"));
  EXPECT_TRUE(Shows(m, R"(workqueue_work_duration_seconds_count{name="easyscalejob"} 1)"));
  EXPECT_TRUE(Shows(m, R"(workqueue_work_duration_seconds_bucket{name="easyscalejob",le="60"} 1)"));
}

}  // namespace
}  // namespace easyscale::op
