#include "trace.h"

#include <gtest/gtest.h>

#include "generator.h"

namespace easyscale::sim {
namespace {

constexpr const char* kHeader =
    "easyscale-trace,1\n"
    "node,n1,a100,8\n";

TEST(TraceTest, RoundTripsThroughCsv) {
  GeneratorOptions o;
  o.gpus = 40;
  o.jobs = 12;
  o.days = 0.5;
  const Trace t = GenerateTrace(o);
  const std::string csv = FormatTrace(t);
  StatusOr<Trace> back = ParseTrace(csv, "gen");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(FormatTrace(*back), csv);
  EXPECT_EQ(back->TotalGpus(), 40);
  EXPECT_EQ(back->jobs.size(), 12u);
  EXPECT_DOUBLE_EQ(back->horizon, 43200.0);
}

TEST(TraceTest, ParsesEveryRecordType) {
  StatusOr<Trace> t = ParseTrace(std::string(kHeader) +
                                     "# a comment\n"
                                     "horizon,7200\n"
                                     "inference,60,n1,3\n"
                                     "job,10,j1,8,2,4,1,1000,a100|v100,a100=2.5\n"
                                     "job,5,j0,1,1,1,0,10,*,-\n",
                                 "t");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->horizon, 7200.0);
  ASSERT_EQ(t->inference.size(), 1u);
  EXPECT_EQ(t->inference[0].gpus, 3);
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].name, "j0");  // sorted by submit time
  const TraceJob& j = t->jobs[1];
  EXPECT_EQ(j.ests, 8);
  EXPECT_EQ(j.minWorkers, 2);
  EXPECT_EQ(j.maxWorkers, 4);
  EXPECT_EQ(j.priority, 1);
  EXPECT_EQ(j.gpuTypes, (std::vector<std::string>{"a100", "v100"}));
  EXPECT_DOUBLE_EQ(j.speed.at("a100"), 2.5);
}

void ExpectError(const std::string& body, const std::string& where, const std::string& what) {
  StatusOr<Trace> t = ParseTrace(std::string(kHeader) + body, "bad.csv");
  ASSERT_FALSE(t.ok()) << body;
  const std::string msg(t.status().message());
  EXPECT_NE(msg.find(where), std::string::npos) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
}

TEST(TraceTest, MalformedLinesNameTheLineAndField) {
  ExpectError("job,0,j,x,1,1,0,10,*,-\n", "bad.csv:3:", "field 4 (ests)");
  ExpectError("job,0,j,4,3,2,0,10,*,-\n", "bad.csv:3:", "field 6 (maxWorkers)");
  ExpectError("job,0,j,4,1,2,0,0,*,-\n", "bad.csv:3:", "field 8 (work_samples)");
  ExpectError("job,0,j,4,1,2,0,10,b200,-\n", "bad.csv:3:", "unknown GPU type 'b200'");
  ExpectError("job,0,j,4,1,2,0,10,*,a100=fast\n", "bad.csv:3:", "field 10 (speeds)");
  ExpectError("\n# ok\ninference,10,n9,1\n", "bad.csv:5:", "field 3 (node)");
  ExpectError("inference,10,n1,9\n", "bad.csv:3:", "field 4 (gpus)");
  ExpectError("inference,-1,n1,1\n", "bad.csv:3:", "field 2 (time_s)");
  ExpectError("node,n1,a100,8\n", "bad.csv:3:", "repeats node");
  ExpectError("job,0,j,1,1,1,0,10,*,-\njob,0,j,1,1,1,0,10,*,-\n", "bad.csv:4:", "repeats job");
  ExpectError("node,n2,a100\n", "bad.csv:3:", "needs 3 fields");
  ExpectError("gpu,n2\n", "bad.csv:3:", "field 1 (record)");
  StatusOr<Trace> t = ParseTrace("node,n1,a100,8\n", "nomagic.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("nomagic.csv:1:"), std::string::npos);
}

// Regression (issue 16): "horizon,1e300" was accepted, and the SVG plot then
// looped forever drawing a tick a day. The inputs that size the work are bounded.
TEST(TraceTest, InputsThatSizeTheWorkAreBounded) {
  ExpectError("horizon,1e300\n",
              "bad.csv:3:", "field 2 (seconds) must be a number in [1, 315360000]");
  ExpectError("inference,1e12,n1,1\n", "bad.csv:3:", "field 2 (time_s) must be a number in [0, ");
  ExpectError("job,1e12,j,1,1,1,0,10,*,-\n", "bad.csv:3:", "field 2 (submit_s)");
  ExpectError("job,0,j,1,1,1,0,1e300,*,-\n", "bad.csv:3:", "field 8 (work_samples)");
  ExpectError("job,0,j,1,1,1,0,10,*,a100=1e300\n", "bad.csv:3:", "field 10 (speeds)");
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "node,m" + std::to_string(i) + ",a100,1024\n";
  ExpectError(many, "bad.csv:", "more than 1000000 GPUs");
}

}  // namespace
}  // namespace easyscale::sim
