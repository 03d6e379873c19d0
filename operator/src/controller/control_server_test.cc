// The control endpoint over HTTP: parameter checks, 503 when not serving or
// without a plan, the job's token on every call, 404 for pods in no
// generation, reports only from the plan's pods, the rendezvous store.
#include "controller/control_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>

namespace easyscale::op {
namespace {

using nlohmann::json;

ControlPlan Plan() {
  ControlPlan plan;
  plan.job = "ns/j";
  plan.token = std::string(64, 't');
  plan.generation = 2;
  plan.runningGeneration = 1;
  plan.totalEsts = 4;
  plan.workers = {{"p0", "n1", "cpu", 0, {0, 1}}, {"p1", "n1", "cpu", 1, {2, 3}}};
  plan.draining = {{{"old", "n2", "a100", 1, {2, 3}}, 1, 2, "t"}};
  plan.rendezvousUrl = "http://10.0.0.1:8090";
  plan.rendezvousPrefix = "gen-2-ab";
  plan.checkpointDir = "/ckpt/uid";
  return plan;
}

class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpRoutes routes;
    InstallControlRoutes(routes, &book_,
                         {.serving = [&] { return serving_.load(); },
                          .onReport = [&](const std::string& j) { reported_.push_back(j); }});
    auto server = HttpServer::Start({.name = "control", .address = "127.0.0.1:0"}, routes);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  httplib::Headers Auth(const std::string& token = std::string(64, 't')) {
    return {{kAuthorizationHeader, BearerToken(token)}};
  }
  int Get(const std::string& path, const httplib::Headers& h, std::string* body = nullptr) {
    auto res = client_->Get(path, h);
    if (!res) return 0;
    if (body != nullptr) *body = res->body;
    return res->status;
  }
  int Report(const WorkerReport& r, const httplib::Headers& h) {
    auto res = client_->Post("/v1/report", h, ToJson(r).dump(), "application/json");
    return res ? res->status : 0;
  }

  ControlBook book_;
  std::atomic<bool> serving_{false};
  std::vector<std::string> reported_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ControlServerTest, AnswersAssignmentsOnlyWithTheJobsToken) {
  EXPECT_EQ(Get("/v1/assignment?job=ns/j", Auth()), 400);
  EXPECT_EQ(Get("/v1/assignment?job=ns/j&pod=p0", Auth()), 503);  // not the leader
  serving_ = true;
  EXPECT_EQ(Get("/v1/assignment?job=ns/j&pod=p0", Auth()), 503);  // no plan yet
  book_.Publish(Plan());
  EXPECT_EQ(Get("/v1/assignment?job=ns/j&pod=p1", {}), 401);
  EXPECT_EQ(Get("/v1/assignment?job=ns/j&pod=p1", Auth(std::string(64, 'x'))), 401);
  std::string body;
  ASSERT_EQ(Get("/v1/assignment?job=ns%2Fj&pod=p1", Auth(), &body), 200);
  StatusOr<WorkerAssignment> a = ParseWorkerAssignment(json::parse(body));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->action, WorkerAction::kWait);  // reconcile has not released generation 2
  EXPECT_EQ(a->ests, (std::vector<int>{2, 3}));
  EXPECT_EQ(a->backend, "cpu");
  EXPECT_EQ(a->rendezvous.url, "http://10.0.0.1:8090");
  EXPECT_EQ(a->rendezvous.prefix, "gen-2-ab");
  EXPECT_EQ(a->checkpointDir, "/ckpt/uid");
  ASSERT_EQ(Get("/v1/assignment?job=ns/j&pod=old", Auth(), &body), 200);
  a = ParseWorkerAssignment(json::parse(body));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->action, WorkerAction::kCheckpointAndStop);
  EXPECT_EQ(a->backend, "cuda");  // auto: a GPU type runs the CUDA backend
  EXPECT_EQ(Get("/v1/assignment?job=ns/j&pod=stranger", Auth()), 404);
  EXPECT_EQ(Get("/v1/assignment?job=ns/other&pod=p0", Auth()), 503);  // no such job: no state

  ControlPlan released = Plan();
  released.runningGeneration = 2;
  released.restore = {2, {RestoreFrom::kPeers, 40, {{"old", "http://10.0.0.9:29400"}}}, "t"};
  book_.Publish(released);
  ASSERT_EQ(Get("/v1/assignment?job=ns/j&pod=p0", Auth(), &body), 200);
  a = ParseWorkerAssignment(json::parse(body));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->action, WorkerAction::kRun);
  EXPECT_EQ(a->restore, released.restore.plan);
}

// A forged report (a pod outside the plan, or without the token) changes
// nothing and leaves nothing behind.
TEST_F(ControlServerTest, TakesReportsOnlyFromThePlansPods) {
  serving_ = true;
  book_.Publish(Plan());
  EXPECT_EQ(client_->Post("/v1/report", Auth(), "{}", "application/json")->status, 400);
  WorkerReport r{.job = "ns/j", .pod = "old", .generation = 1, .state = WorkerState::kCheckpointed};
  EXPECT_EQ(Report(r, {}), 401);
  EXPECT_EQ(Report(r, Auth()), 204);
  EXPECT_EQ(Report(r, Auth()), 204);
  EXPECT_EQ(reported_, std::vector<std::string>{"ns/j"});  // only news wakes reconcile
  EXPECT_TRUE(DrainedBy(Plan().draining[0], book_.Reports("ns/j").at("old")));
  WorkerReport forged{.job = "ns/j",
                      .pod = "j-w-9-0",
                      .generation = 2,
                      .state = WorkerState::kSucceeded,
                      .step = 120,
                      .digest = std::string(64, 'f')};
  EXPECT_EQ(Report(forged, Auth()), 403);
  forged.pod = "p0";
  EXPECT_EQ(Report(forged, Auth(std::string(64, 'x'))), 401);
  EXPECT_EQ(book_.Reports("ns/j").size(), 1u);
  for (int i = 0; i < 10000; ++i) {  // distinct unknown callers: nothing is kept
    forged.pod = "made-up-" + std::to_string(i);
    ASSERT_EQ(book_.Record(forged).status().code(), absl::StatusCode::kPermissionDenied);
  }
  EXPECT_EQ(book_.Reports("ns/j").size(), 1u);
  EXPECT_EQ(reported_.size(), 1u);
}

// A certificate is taken when the job asked for it; a malformed one, or one
// for a step the job does not certify, is a 400 naming the field, and the
// report is not kept.
TEST_F(ControlServerTest, TakesCertificatesTheJobAskedForOnly) {
  serving_ = true;
  ControlPlan plan = Plan();
  plan.certificateEvery = 10;
  plan.training.steps = 100;
  book_.Publish(plan);
  auto post = [&](const nlohmann::json& report, std::string* body = nullptr) {
    auto res = client_->Post("/v1/report", Auth(), report.dump(), "application/json");
    if (res && body != nullptr) *body = res->body;
    return res ? res->status : 0;
  };
  WorkerReport r{.job = "ns/j",
                 .pod = "p0",
                 .generation = 2,
                 .state = WorkerState::kRunning,
                 .step = 20,
                 .certificate = {20, std::string(64, 'a')}};
  EXPECT_EQ(post(ToJson(r)), 204);
  EXPECT_EQ(book_.PendingCertificates("ns/j"), std::vector<Certificate>{r.certificate});
  std::string body;
  json bad = ToJson(r);
  bad["certificate"]["digest"] = "not-hex";
  EXPECT_EQ(post(bad, &body), 400);
  EXPECT_NE(body.find("certificate.digest: not a SHA-256 in lowercase hex"), std::string::npos)
      << body;
  r.step = 25;
  r.certificate = {25, std::string(64, 'b')};
  EXPECT_EQ(post(ToJson(r), &body), 400);
  EXPECT_NE(body.find("certificate.step: 25: not a multiple of spec.certificate.everySteps (10)"),
            std::string::npos)
      << body;
  EXPECT_EQ(book_.Reports("ns/j").at("p0").step, 20) << "a refused report is not kept";
  EXPECT_EQ(book_.PendingCertificates("ns/j").size(), 1u);
  book_.Stored("ns/j", 20);
  EXPECT_TRUE(book_.PendingCertificates("ns/j").empty());
}

TEST_F(ControlServerTest, ServesTheNewestGenerationsRendezvousKeys) {
  serving_ = true;
  book_.Publish(Plan());
  auto put = [&](const std::string& key, const std::string& value, const httplib::Headers& h) {
    auto res = client_->Put("/v1/store?job=ns/j&key=" + key, h, value, "application/octet-stream");
    return res ? res->status : 0;
  };
  EXPECT_EQ(put("gen-2-ab/0", "addr", {}), 401);
  EXPECT_EQ(Get("/v1/store?job=ns/j&key=gen-2-ab/0", Auth()), 404);  // not yet
  EXPECT_EQ(put("gen-2-ab/0", std::string("a\0b", 3), Auth()), 204);
  std::string body;
  ASSERT_EQ(Get("/v1/store?job=ns/j&key=gen-2-ab/0", Auth(), &body), 200);
  EXPECT_EQ(body, std::string("a\0b", 3));
  EXPECT_EQ(put("gen-1-ab/0", "stale", Auth()), 409);
  EXPECT_EQ(put("gen-2-ab/big", std::string(100 << 10, 'x'), Auth()), 413);
  ControlPlan next = Plan();
  next.generation = 3;
  next.rendezvousPrefix = "gen-3-ab";
  book_.Publish(next);  // a new generation: the old keys are gone, and say so
  EXPECT_EQ(Get("/v1/store?job=ns/j&key=gen-2-ab/0", Auth()), 409);
}

}  // namespace
}  // namespace easyscale::op
