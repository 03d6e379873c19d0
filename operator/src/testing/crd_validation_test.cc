// EasyScaleJobs checked against the served CRD as kube-apiserver checks them:
// unknown fields pruned (fieldValidation Ignore, Warn with a Warning header,
// Strict 400), defaults applied, the schema's bounds and CEL rules (the
// transition rule `ests is immutable` on updates) as 422 with every cause,
// and the status subresource validated against the schema's status.
#include <gtest/gtest.h>

#include "testing/test_util.h"
#include "wire_test.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

const json kSpec = {{"image", "easyscale/worker:1"}, {"ests", 8}, {"maxWorkers", 2}};

// The values of every Warning header of `a`.
std::vector<std::string> Warnings(const Answer& a) {
  std::vector<std::string> out;
  auto [first, last] = a.headers.equal_range("Warning");
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  return out;
}

// (reason, field) of every cause of a 422 answer.
std::vector<std::pair<std::string, std::string>> Causes(const Answer& a) {
  std::vector<std::pair<std::string, std::string>> out;
  const json status = a.Json();
  for (const json& c : status["details"]["causes"]) out.emplace_back(c["reason"], c["field"]);
  return out;
}

TEST_F(TestApiServerWireTest, UnknownFieldsArePrunedWithAWarningByDefault) {
  json job = EasyScaleJob("typo", kSpec);
  job["spec"]["maxWorker"] = 2;
  job["spec"]["training"] = {{"stepz", 10}};
  job["extra"] = true;
  const Answer a = Call("POST", kJobsPath, job.dump());
  ASSERT_EQ(a.status, 201) << a.body;
  const json made = a.Json();
  EXPECT_FALSE(made["spec"].contains("maxWorker"));
  EXPECT_FALSE(made["spec"]["training"].contains("stepz"));
  EXPECT_FALSE(made.contains("extra"));
  std::vector<std::string> warnings = Warnings(a);
  std::sort(warnings.begin(), warnings.end());
  EXPECT_EQ(warnings,
            (std::vector<std::string>{"299 - \"unknown field \\\"extra\\\"\"",
                                      "299 - \"unknown field \\\"spec.maxWorker\\\"\"",
                                      "299 - \"unknown field \\\"spec.training.stepz\\\"\""}));
  const json stored = Call("GET", kJobsPath + "/typo").Json();
  EXPECT_EQ(stored["spec"], made["spec"]);
  // Ignore prunes without a word; labels and annotations (ObjectMeta) are kept.
  job["metadata"] = {{"name", "quiet"}, {"labels", {{"a", "1"}}}};
  const Answer quiet = Call("POST", kJobsPath + "?fieldValidation=Ignore", job.dump());
  ASSERT_EQ(quiet.status, 201) << quiet.body;
  EXPECT_TRUE(Warnings(quiet).empty());
  EXPECT_FALSE(quiet.Json()["spec"].contains("maxWorker"));
  EXPECT_EQ(quiet.Json()["metadata"]["labels"], json({{"a", "1"}}));
}

TEST_F(TestApiServerWireTest, StrictFieldValidationRefusesUnknownFieldsAsKubeDoes) {
  json job = EasyScaleJob("strict", kSpec);
  job["spec"]["training"] = {{"stepz", 10}};
  const Answer a = Call("POST", kJobsPath + "?fieldValidation=Strict", job.dump());
  ExpectStatus(a, 400, "BadRequest");
  EXPECT_EQ(a.Json()["message"],
            "EasyScaleJob in version \"v1alpha1\" cannot be handled as a EasyScaleJob: strict "
            "decoding error: unknown field \"spec.training.stepz\"");
  ExpectStatus(Call("GET", kJobsPath + "/strict"), 404, "NotFound");
  // Patches too: the patched object is what is decoded.
  ASSERT_EQ(Call("POST", kJobsPath, EasyScaleJob("p", kSpec).dump()).status, 201);
  const Answer patched = Call("PATCH", kJobsPath + "/p?fieldValidation=Strict",
                              R"({"spec":{"maxWorker":3}})", "application/merge-patch+json");
  ExpectStatus(patched, 400, "BadRequest");
  EXPECT_NE(patched.body.find("unknown field \\\"spec.maxWorker\\\""), std::string::npos)
      << patched.body;
  // A server started as the operator's tests start it is Strict by default.
  Start({.strictFieldValidation = true});
  ExpectStatus(Call("POST", kJobsPath, job.dump()), 400, "BadRequest");
  EXPECT_EQ(Call("POST", kJobsPath + "?fieldValidation=Warn", job.dump()).status, 201);
}

TEST_F(TestApiServerWireTest, DefaultsOfTheCrdAreApplied) {
  const Answer a = Call("POST", kJobsPath, EasyScaleJob("d", kSpec).dump());
  ASSERT_EQ(a.status, 201) << a.body;
  const json spec = a.Json()["spec"];
  EXPECT_EQ(spec["minWorkers"], 1);
  EXPECT_EQ(spec["priority"], 0);
  EXPECT_TRUE(spec["training"].is_object());
  EXPECT_TRUE(spec["checkpoint"].is_object());
  EXPECT_EQ(a.Json()["metadata"]["generation"], 1);
  // Writing back what was sent, without the defaults, changes nothing.
  json again = EasyScaleJob("d", kSpec);
  const Answer same = Call("PUT", kJobsPath + "/d", again.dump());
  ASSERT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(same.Json()["metadata"]["generation"], 1);
  EXPECT_EQ(same.Json()["metadata"]["resourceVersion"], a.Json()["metadata"]["resourceVersion"]);
}

TEST_F(TestApiServerWireTest, InvalidJobsAre422WithEveryCause) {
  json job = EasyScaleJob("bad", {{"ests", 0}, {"minWorkers", "two"}, {"gpuTypes", {"a100"}}});
  const Answer a = Call("POST", kJobsPath, job.dump());
  ExpectStatus(a, 422, "Invalid");
  const json status = a.Json();
  const std::string message = status["message"];
  EXPECT_EQ(message.rfind("EasyScaleJob.easyscale.io \"bad\" is invalid: [", 0), 0u) << message;
  EXPECT_NE(message.find("spec.ests: Invalid value: 0: spec.ests in body should be greater than "
                         "or equal to 1"),
            std::string::npos)
      << message;
  EXPECT_EQ(status["details"]["name"], "bad");
  EXPECT_EQ(status["details"]["group"], "easyscale.io");
  EXPECT_EQ(status["details"]["kind"], "EasyScaleJob");
  const auto causes = Causes(a);
  EXPECT_NE(std::find(causes.begin(), causes.end(),
                      std::make_pair(std::string("FieldValueRequired"), std::string("spec.image"))),
            causes.end());
  EXPECT_NE(std::find(causes.begin(), causes.end(),
                      std::make_pair(std::string("FieldValueInvalid"), std::string("spec.ests"))),
            causes.end());
  EXPECT_NE(std::find(causes.begin(), causes.end(),
                      std::make_pair(std::string("FieldValueTypeInvalid"),
                                     std::string("spec.minWorkers"))),
            causes.end());
  EXPECT_EQ(causes.size(), status["details"]["causes"].size());
  for (const json& c : status["details"]["causes"]) {
    EXPECT_NE(message.find(c["field"].get<std::string>() + ": " + c["message"].get<std::string>()),
              std::string::npos)
        << c;
  }
  // One cause: no brackets. A CEL rule (minWorkers <= ests) speaks its message.
  const Answer one =
      Call("POST", kJobsPath,
           EasyScaleJob("one", {{"image", "w"}, {"ests", 2}, {"minWorkers", 3}}).dump());
  ExpectStatus(one, 422, "Invalid");
  EXPECT_EQ(one.Json()["message"].get<std::string>().find("is invalid: ["), std::string::npos);
  EXPECT_EQ(Causes(one).size(), 1u) << one.body;
  ExpectStatus(Call("GET", kJobsPath + "/bad"), 404, "NotFound");
}

TEST_F(TestApiServerWireTest, EstsIsImmutableOnUpdateAndPatch) {
  ASSERT_EQ(Call("POST", kJobsPath, EasyScaleJob("imm", kSpec).dump()).status, 201);
  const Answer patched =
      Call("PATCH", kJobsPath + "/imm", R"({"spec":{"ests":16}})", "application/merge-patch+json");
  ExpectStatus(patched, 422, "Invalid");
  EXPECT_EQ(patched.Json()["message"],
            "EasyScaleJob.easyscale.io \"imm\" is invalid: spec.ests: Invalid value: \"integer\": "
            "ests is immutable")
      << patched.body;
  EXPECT_EQ(Causes(patched),
            (std::vector<std::pair<std::string, std::string>>{{"FieldValueInvalid", "spec.ests"}}));
  json job = Call("GET", kJobsPath + "/imm").Json();
  EXPECT_EQ(job["spec"]["ests"], 8);
  job["spec"]["ests"] = 4;
  ExpectStatus(Call("PUT", kJobsPath + "/imm", job.dump()), 422, "Invalid");
  // Other fields still change.
  const Answer ok = Call("PATCH", kJobsPath + "/imm", R"({"spec":{"maxWorkers":4}})",
                         "application/merge-patch+json");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json()["metadata"]["generation"], 2);
}

TEST_F(TestApiServerWireTest, StatusIsValidatedOnTheStatusSubresourceOnly) {
  ASSERT_EQ(Call("POST", kJobsPath, EasyScaleJob("st", kSpec).dump()).status, 201);
  const std::string merge = "application/merge-patch+json";
  const Answer notObject =
      Call("PATCH", kJobsPath + "/st/status", R"({"status":"notanobject"})", merge);
  ExpectStatus(notObject, 422, "Invalid");
  EXPECT_EQ(
      Causes(notObject),
      (std::vector<std::pair<std::string, std::string>>{{"FieldValueTypeInvalid", "status"}}));
  const Answer negative = Call("PATCH", kJobsPath + "/st/status",
                               R"({"status":{"workerCount":-3,"phase":"Dancing"}})", merge);
  ExpectStatus(negative, 422, "Invalid");
  EXPECT_EQ(Causes(negative), (std::vector<std::pair<std::string, std::string>>{
                                  {"FieldValueNotSupported", "status.phase"},
                                  {"FieldValueInvalid", "status.workerCount"}}))
      << negative.body;
  // An undeclared status field is pruned with a warning (Strict: 400).
  const Answer unknown = Call("PATCH", kJobsPath + "/st/status",
                              R"({"status":{"phase":"Running","mood":"good"}})", merge);
  ASSERT_EQ(unknown.status, 200) << unknown.body;
  EXPECT_FALSE(unknown.Json()["status"].contains("mood"));
  EXPECT_EQ(Warnings(unknown),
            (std::vector<std::string>{"299 - \"unknown field \\\"status.mood\\\"\""}));
  ExpectStatus(Call("PATCH", kJobsPath + "/st/status?fieldValidation=Strict",
                    R"({"status":{"mood":"good"}})", merge),
               400, "BadRequest");
  // Writes to the main resource ignore status, valid or not.
  json job = Call("GET", kJobsPath + "/st").Json();
  job["status"] = {{"workerCount", -3}};
  const Answer main = Call("PUT", kJobsPath + "/st", job.dump());
  ASSERT_EQ(main.status, 200) << main.body;
  EXPECT_EQ(main.Json()["status"], json({{"phase", "Running"}}));
}

}  // namespace
}  // namespace easyscale::op::testing
