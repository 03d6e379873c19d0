// What the operator writes to status must pass the CRD's status schema: a real
// API server prunes unknown status fields (a new leader would lose them) and
// rejects values outside the schema with 422.
#include <gtest/gtest.h>

#include "controller/job_status.h"
#include "shapes_fixture.h"
#include "test_support.h"

namespace easyscale::deploytest {
namespace {

using nlohmann::json;

class OperatorStatus : public ShapesTest {
 protected:
  std::vector<std::string> Check(const op::JobStatus& status) {
    json job = {{"apiVersion", "easyscale.io/v1alpha1"},
                {"kind", "EasyScaleJob"},
                {"metadata", {{"name", "demo"}, {"namespace", "default"}}},
                {"spec", {{"image", "easyscale/worker:0.1"}, {"ests", 8}}},
                {"status", op::ToJson(status)}};
    const json written = job["status"];
    auto errors = shapes_->Validate(&job);
    // Nothing the operator wrote may be pruned away.
    for (const auto& [key, value] : written.items()) {
      if (!value.is_null() && !job["status"].contains(key))
        errors.push_back("status." + key + " pruned");
    }
    return errors;
  }
};

TEST_F(OperatorStatus, FreshStatusIsAccepted) {
  EXPECT_EQ(Check(op::JobStatus{}), std::vector<std::string>{});
}

TEST_F(OperatorStatus, FullStatusIsAcceptedWithNothingPruned) {
  op::JobStatus s;
  s.phase = op::JobPhase::kScaling;
  s.observedGeneration = 2;
  s.generation = 5;
  s.runningGeneration = 4;
  s.workers = {{"demo-w-5-0", "node-a", "a100", 0, {0, 1, 2, 3}},
               {"demo-w-5-1", "node-b", "t4", 1, {4, 5, 6, 7}}};
  s.draining = {{{"demo-w-4-2", "node-b", "t4", 2, {6, 7}}, 4, 3, "2026-12-02T14:00:00Z"}};
  s.step = 57;
  s.preemptions = 2;
  s.scaleEvents = 4;
  s.speed = {{"a100", 812.5}, {"t4", 210.0}};
  s.digest = std::string(64, 'a');
  s.testAccuracy = 0.97;
  s.output = {.path = "/models/demo",
              .onnxSha256 = std::string(64, 'b'),
              .safetensorsSha256 = std::string(64, 'c')};
  s.certificate = {50, std::string(64, 'd')};
  s.startTime = "2026-12-02T13:00:00Z";
  s.completionTime = "2026-12-02T14:10:00Z";
  s.everPreempted = true;
  s.handover = {{{"demo-w-4-3", "node-c", "a100", 3, {7}}, 4, 4, "2026-12-02T14:00:00Z"}};
  s.restore = {5,
               {RestoreFrom::kPeers, 57, {{"demo-w-4-3", "http://10.0.0.7:29400"}}},
               "2026-12-02T14:00:01Z"};
  s.restarts = 2;
  s.failuresInARow = 1;
  s.restartAfter = "2026-12-02T14:00:03Z";
  s.failedGeneration = 4;
  s.progressPercentage = 47;
  s.estimatedRemainingSeconds = 312;
  op::SetCondition(s.conditions, "Valid", true, "Valid", "spec accepted", 2);
  op::SetCondition(s.conditions, "Restarting", true, "PeerLost", "worker demo-w-4-1 ...", 2);
  EXPECT_EQ(Check(s), std::vector<std::string>{});
}

// Every phase the operator writes is in the schema's enum.
TEST_F(OperatorStatus, EveryPhaseIsAccepted) {
  for (op::JobPhase phase : {op::JobPhase::kPending, op::JobPhase::kRunning, op::JobPhase::kScaling,
                             op::JobPhase::kPreempted, op::JobPhase::kSuspended,
                             op::JobPhase::kSucceeded, op::JobPhase::kFailed}) {
    op::JobStatus s;
    s.phase = phase;
    EXPECT_EQ(Check(s), std::vector<std::string>{}) << op::PhaseName(phase);
  }
}

// The digest fields hold SHA-256s: anything else is refused by the schema.
TEST_F(OperatorStatus, OutputDigestsMustBeSha256) {
  op::JobStatus s;
  s.output = {.path = "/models/demo", .safetensorsSha256 = "not-a-digest"};
  EXPECT_NE(Check(s), std::vector<std::string>{});
  s.output.safetensorsSha256 = std::string(64, 'c');  // a built-in model: no ONNX digest
  EXPECT_EQ(Check(s), std::vector<std::string>{});
}

// status.certificate holds a step >= 1 and a SHA-256, as the schema says.
TEST_F(OperatorStatus, CertificateMustBeAStepAndASha256) {
  op::JobStatus s;
  s.certificate = {40, "not-a-digest"};
  EXPECT_NE(Check(s), std::vector<std::string>{});
  s.certificate = {40, std::string(64, 'e')};
  EXPECT_EQ(Check(s), std::vector<std::string>{});
}

}  // namespace
}  // namespace easyscale::deploytest
