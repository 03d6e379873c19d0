// The control endpoint over HTTP: parameter checks, 503 when not serving or
// without a plan, 404 for pods in no generation, and report hand-off.
#include "controller/control_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>

namespace easyscale::op {
namespace {

using nlohmann::json;

TEST(ControlServer, AnswersAssignmentsAndTakesReports) {
  ControlBook book;
  std::atomic<bool> serving{false};
  std::vector<std::string> reported;
  HttpRoutes routes;
  InstallControlRoutes(routes, &book,
                       {.serving = [&] { return serving.load(); },
                        .onReport = [&](const std::string& j) { reported.push_back(j); }});
  auto server = HttpServer::Start({.name = "control", .address = "127.0.0.1:0"}, routes);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client c("127.0.0.1", (*server)->port());
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

// The race behind a flaky controller test: the reconcile that planned
// generation 2 published Wait; Running reports of generation 1 must keep it
// waiting, and the last Checkpointed report must release it at once, before
// any reconcile folds the reports into the status and publishes again.
TEST(ControlBook, ReleasesFromLiveReportsOnlyOnceEveryDrainingWorkerCheckpointed) {
  ControlBook book;
  ControlPlan plan;
  plan.job = "ns/j";
  plan.generation = 2;
  plan.runningGeneration = 1;
  plan.totalEsts = 4;
  plan.workers = {{"g1-0", "n2", "h100", 0, {0}},
                  {"g1-1", "n2", "h100", 1, {1}},
                  {"g2-0", "n1", "a100", 2, {2}},
                  {"g2-1", "n1", "a100", 3, {3}}};
  plan.draining = {{{"g1-0", "n2", "h100", 0, {0, 1}}, 1, 2, "t"},
                   {{"g1-1", "n2", "h100", 1, {2, 3}}, 1, 2, "t"}};
  book.Publish(plan);
  auto action = [&](const std::string& pod) {
    StatusOr<WorkerAssignment> a = book.AssignmentFor("ns/j", pod);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? a->action : WorkerAction::kCheckpointAndStop;
  };
  auto report = [&](const std::string& pod, int64_t generation, WorkerState state) {
    book.Record({.job = "ns/j", .pod = pod, .generation = generation, .state = state});
  };
  EXPECT_EQ(action("g2-1"), WorkerAction::kWait);
  report("g1-0", 1, WorkerState::kRunning);  // generation 1 still trains
  report("g1-1", 1, WorkerState::kRunning);
  EXPECT_EQ(action("g2-1"), WorkerAction::kWait);
  EXPECT_EQ(action("g1-0"), WorkerAction::kWait);
  report("g1-0", 1, WorkerState::kCheckpointed);
  EXPECT_EQ(action("g2-1"), WorkerAction::kWait);  // g1-1 may still be training
  report("g1-1", 0, WorkerState::kCheckpointed);   // stale: an older generation
  EXPECT_EQ(action("g2-1"), WorkerAction::kWait);
  report("g1-1", 1, WorkerState::kCheckpointed);
  EXPECT_EQ(action("g2-1"), WorkerAction::kRun);  // no new plan needed
  EXPECT_EQ(action("g1-0"), WorkerAction::kRun);

  // A kept worker already reporting the newest generation has drained too.
  plan.generation = 3;
  plan.runningGeneration = 2;
  plan.workers.pop_back();
  plan.draining = {{plan.workers[0], 2, 4, "t"}, {{"g2-1", "n1", "a100", 3, {3}}, 2, 4, "t"}};
  book.Publish(plan);
  EXPECT_EQ(action("g2-1"), WorkerAction::kCheckpointAndStop);
  report("g2-1", 2, WorkerState::kCheckpointed);
  EXPECT_EQ(action("g2-0"), WorkerAction::kWait);
  report("g1-0", 3, WorkerState::kRunning);
  EXPECT_EQ(action("g2-0"), WorkerAction::kRun);

  // Nothing recorded to drain and not released: only reconcile may release.
  plan.generation = 4;
  plan.draining.clear();
  book.Publish(plan);
  EXPECT_EQ(action("g2-0"), WorkerAction::kWait);
}

}  // namespace
}  // namespace easyscale::op
