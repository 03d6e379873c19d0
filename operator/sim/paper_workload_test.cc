#include "paper_workload.h"

#include <gtest/gtest.h>

namespace easyscale::sim {
namespace {

constexpr const char* kProfile =
    "model,gpu_type,batch_size,step_seconds,samples_per_epoch\n"
    "# a comment\n"
    "bert,v100,8,0.44,800\n"
    "bert,t4,8,0.66,800\n"
    "resnet50,v100,64,0.25,12800\n";

constexpr const char* kHeader =
    "name,time,application,max_parallelism,batch_size,epochs,"
    "enable_heterogeneous_deterministic,preferred_gpu,\n";

StepProfile Profile() {
  StatusOr<StepProfile> p = ParseStepProfile(kProfile, "p.csv");
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

StatusOr<Trace> Workload(const std::string& rows) {
  return ParsePaperWorkload(kHeader + rows, "w.csv", Profile(), PaperCluster{});
}

TEST(PaperWorkloadTest, ReadsRowsIntoJobsOnTheArtifactsCluster) {
  StatusOr<Trace> t = Workload(
      "r,60,resnet50,32,128,2,0,v100,0.2\n"
      "b,30,bert,16,16,4,40,t4\n");  // 8 fields; a flag of 40 counts as true
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->TotalGpus(), 64);
  EXPECT_EQ(t->nodes.size(), 8u);
  ASSERT_EQ(t->jobs.size(), 2u);
  const TraceJob& b = t->jobs[0];  // sorted by submit time
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.ests, 16);
  EXPECT_EQ(b.maxWorkers, 16);
  EXPECT_DOUBLE_EQ(b.workSamples, 4 * 800.0);
  EXPECT_EQ(b.preferredGpu, "t4");
  EXPECT_EQ(b.gpuTypes, (std::vector<std::string>{"t4", "v100"}));  // profiled types only
  // Step time scales with the batch: 16 samples take 2 x 0.66 s on a t4.
  EXPECT_DOUBLE_EQ(b.speed.at("t4"), 16 / 1.32);
  const TraceJob& r = t->jobs[1];
  EXPECT_EQ(r.gpuTypes, (std::vector<std::string>{"v100"}));  // not heterogeneous
  EXPECT_DOUBLE_EQ(r.speed.at("v100"), 128 / 0.5);
}

TEST(PaperWorkloadTest, ALaterRowWithTheSameNameReplacesTheEarlier) {
  StatusOr<Trace> t = Workload(
      "e,10,bert,8,8,1,1,v100,0\n"
      "e,90,bert,4,8,2,1,v100,0\n");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(t->jobs[0].submit, 90.0);
  EXPECT_EQ(t->jobs[0].ests, 4);
}

TEST(PaperWorkloadTest, RefusesMalformedRowsNamingFileLineAndField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"x,-5,bert,8,8,1,1,v100", "w.csv:2: field 2 (time) must be a number"},
      {"x,5,gpt,8,8,1,1,v100", "w.csv:2: field 3 (application) names no profiled model: 'gpt'"},
      {"x,5,bert,0,8,1,1,v100", "w.csv:2: field 4 (max_parallelism) must be an integer"},
      {"x,5,bert,8,8.5,1,1,v100", "w.csv:2: field 5 (batch_size) must be an integer"},
      {"x,5,bert,8,8,0,1,v100", "w.csv:2: field 6 (epochs) must be a number"},
      {"x,5,bert,8,8,1,yes,v100", "w.csv:2: field 7 (enable_heterogeneous_deterministic)"},
      {"x,5,bert,8,8,1,1,z80", "w.csv:2: field 8 (preferred_gpu) unknown GPU type 'z80'"},
      {"x,5,bert,8,8,1,1,p100", "w.csv:2: field 8 (preferred_gpu) 'p100' is not both"},
      {"x,5,bert,8", "w.csv:2: a row needs 8 fields"},
      {",5,bert,8,8,1,1,v100", "w.csv:2: field 1 (name) must be a non-empty name"},
  };
  for (const auto& [row, message] : cases) {
    StatusOr<Trace> t = Workload(row + "\n");
    ASSERT_FALSE(t.ok()) << row;
    EXPECT_NE(t.status().message().find(message), std::string::npos)
        << row << " -> " << t.status().message();
  }
  StatusOr<Trace> t = ParsePaperWorkload("name,time\n", "w.csv", Profile(), PaperCluster{});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("w.csv:1: header must be"), std::string::npos);
}

TEST(PaperWorkloadTest, RefusesMalformedProfileRows) {
  const std::string header = "model,gpu_type,batch_size,step_seconds,samples_per_epoch\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bert,v100,8,0,800", "p.csv:2: field 4 (step_seconds) must be a number"},
      {"bert,k80,8,1,800", "p.csv:2: field 2 (gpu_type) unknown GPU type 'k80'"},
      {"bert,v100,8,1,800\nbert,v100,8,2,800", "p.csv:3: field 2 (gpu_type) repeats 'v100'"},
      {"bert,v100,8,1,800\nbert,t4,8,2,900", "p.csv:3: field 5 (samples_per_epoch) differs"},
  };
  for (const auto& [rows, message] : cases) {
    StatusOr<StepProfile> p = ParseStepProfile(header + rows + "\n", "p.csv");
    ASSERT_FALSE(p.ok()) << rows;
    EXPECT_NE(p.status().message().find(message), std::string::npos)
        << rows << " -> " << p.status().message();
  }
}

// The bundled data: the artifact's 68 rows name 62 jobs.
TEST(PaperWorkloadTest, BundledWorkloadAndProfileLoad) {
  StatusOr<StepProfile> p = ReadStepProfileFile(EASYSCALE_SIM_PAPER_DIR "/step_profile.csv");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->models.size(), 8u);
  StatusOr<Trace> t =
      ReadPaperWorkloadFile(EASYSCALE_SIM_PAPER_DIR "/workload.csv", *p, PaperCluster{});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->jobs.size(), 62u);
  EXPECT_EQ(t->TotalGpus(), 64);
}

}  // namespace
}  // namespace easyscale::sim
