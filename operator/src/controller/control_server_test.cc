// The control endpoint over HTTP: parameter checks, 503 when not serving or
// without a plan, 404 for pods in no generation, and report hand-off.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#include "controller/control_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>

#include "controller/http_endpoint.h"

namespace easyscale::op {
namespace {

using nlohmann::json;

TEST(ControlServer, AnswersAssignmentsAndTakesReports) {
  ControlBook book;
  std::atomic<bool> serving{false};
  std::vector<std::string> reported;
  auto endpoint = HttpEndpoint::Start("control", "127.0.0.1:0", [&](httplib::Server& s) {
    InstallControlRoutes(s, &book,
                         {.serving = [&] { return serving.load(); },
                          .onReport = [&](const std::string& j) { reported.push_back(j); }});
  });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  httplib::Client c("127.0.0.1", (*endpoint)->port());
  EXPECT_EQ(c.Get("/v1/assignment?job=ns/j")->status, 400);
  EXPECT_EQ(c.Get("/v1/assignment?job=ns/j&pod=p0")->status, 503);  // not the leader
  serving = true;
  EXPECT_EQ(c.Get("/v1/assignment?job=ns/j&pod=p0")->status, 503);  // no plan yet

  ControlPlan plan;
  plan.job = "ns/j";
  plan.generation = 2;
  plan.runningGeneration = 1;
  plan.totalEsts = 4;
  plan.workers = {{"p0", "n1", "cpu", 0, {0, 1}}, {"p1", "n1", "cpu", 1, {2, 3}}};
  plan.draining = {{{"old", "n2", "a100", 1, {2, 3}}, 1, 2, "t"}};
  plan.checkpointDir = "/ckpt/ns/j";
  book.Publish(plan);
  auto res = c.Get("/v1/assignment?job=ns%2Fj&pod=p1");
  ASSERT_EQ(res->status, 200);
  StatusOr<WorkerAssignment> a = ParseWorkerAssignment(json::parse(res->body));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->action, WorkerAction::kWait);
  EXPECT_EQ(a->ests, (std::vector<int>{2, 3}));
  EXPECT_EQ(a->backend, "cpu");
  EXPECT_EQ(a->rendezvous.path, "/ckpt/ns/j/rendezvous");
  res = c.Get("/v1/assignment?job=ns/j&pod=old");
  ASSERT_EQ(res->status, 200);
  a = ParseWorkerAssignment(json::parse(res->body));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->action, WorkerAction::kCheckpointAndStop);
  EXPECT_EQ(a->backend, "cuda");  // auto: a GPU type runs the CUDA backend
  EXPECT_EQ(c.Get("/v1/assignment?job=ns/j&pod=stranger")->status, 404);

  EXPECT_EQ(c.Post("/v1/report", "{}", "application/json")->status, 400);
  WorkerReport r{.job = "ns/j", .pod = "old", .generation = 1, .state = WorkerState::kCheckpointed};
  EXPECT_EQ(c.Post("/v1/report", ToJson(r).dump(), "application/json")->status, 204);
  EXPECT_EQ(c.Post("/v1/report", ToJson(r).dump(), "application/json")->status, 204);
  EXPECT_EQ(reported, std::vector<std::string>{"ns/j"});  // only news wakes reconcile
  EXPECT_TRUE(DrainedBy(plan.draining[0], book.Reports("ns/j").at("old")));
}

}  // namespace
}  // namespace easyscale::op
