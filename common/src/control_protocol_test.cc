#include "easyscale/common/control_protocol.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

WorkerAssignment Sample() {
  WorkerAssignment a;
  a.job = "default/mnist";
  a.generation = 3;
  a.rank = 1;
  a.worldSize = 2;
  a.totalEsts = 8;
  a.ests = {4, 5, 6, 7};
  a.rendezvous.path = "/ckpt/rdzv";
  a.rendezvous.prefix = "gen-3";
  a.checkpointDir = "/ckpt";
  return a;
}

TEST(ControlProtocol, AssignmentRoundTrips) {
  auto parsed = ParseWorkerAssignment(ToJson(Sample()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, Sample());
}

TEST(ControlProtocol, ReportRoundTrips) {
  WorkerReport r;
  r.job = "default/mnist";
  r.generation = 2;
  r.state = WorkerState::kSucceeded;
  r.step = 120;
  r.digest = std::string(64, 'a');
  auto parsed = ParseWorkerReport(ToJson(r));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, r);
}

TEST(ControlProtocol, RejectsWrongVersionAndBadFields) {
  auto j = ToJson(Sample());
  j["apiVersion"] = "easyscale.io/control/v0";
  EXPECT_TRUE(absl::IsFailedPrecondition(ParseWorkerAssignment(j).status()));
  j = ToJson(Sample());
  j["rank"] = 2;
  EXPECT_NE(std::string(ParseWorkerAssignment(j).status().message()).find("rank"),
            std::string::npos);
  j = ToJson(Sample());
  j["ests"] = {5, 4};
  EXPECT_FALSE(ParseWorkerAssignment(j).ok());
  j = ToJson(Sample());
  j["rendezvous"]["path"] = "";
  EXPECT_FALSE(ParseWorkerAssignment(j).ok());
  EXPECT_FALSE(ParseWorkerReport({{"apiVersion", kControlApiVersion},
                                  {"job", "a"},
                                  {"generation", 1},
                                  {"rank", 0},
                                  {"state", "Dancing"}})
                   .ok());
}

}  // namespace
}  // namespace easyscale
