#include "easyscale/common/job_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace easyscale {
namespace {

nlohmann::json Valid() {
  return {{"image", "easyscale/worker:0.1"},
          {"ests", 8},
          {"minWorkers", 1},
          {"maxWorkers", 4},
          {"gpuTypes", {"a100", "t4"}}};
}

TEST(JobSpec, ParsesAndDefaults) {
  auto s = ParseJobSpec(Valid());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ests, 8);
  EXPECT_EQ(s->maxWorkers, 4);
  EXPECT_EQ(s->training.model, "cnn");
  EXPECT_FALSE(s->suspend);
  auto j = Valid();
  j.erase("maxWorkers");
  EXPECT_EQ(ParseJobSpec(j)->maxWorkers, 8);
}

TEST(JobSpec, RoundTrips) {
  auto j = Valid();
  j["output"] = {{"path", "/models/mnist"}, {"everyCheckpoint", true}};
  j["suspend"] = true;
  j["certificate"] = {{"everySteps", 50}};
  j["worker"]["volumes"] = {
      {{"name", "models"}, {"claimName", "models"}, {"mountPath", "/models"}}};
  auto s = ParseJobSpec(j);
  ASSERT_TRUE(s.ok());
  auto again = ParseJobSpec(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*s, *again);
  EXPECT_EQ(again->output, (OutputSpec{.path = "/models/mnist", .everyCheckpoint = true}));
  EXPECT_TRUE(again->suspend);
  EXPECT_EQ(again->certificate.everySteps, 50);
  EXPECT_EQ(ParseJobSpec(Valid())->certificate.everySteps, 0) << "absent: no certificates";
}

struct BadCase {
  const char* field;
  nlohmann::json value;
  const char* want;
};

TEST(JobSpec, RejectsBadFieldsNamingThem) {
  const BadCase cases[] = {
      {"ests", 0, "spec.ests: must be >= 1"},
      {"ests", "8", "spec.ests: must be an integer"},
      {"image", "", "spec.image: must not be empty"},
      {"minWorkers", 5, "spec.minWorkers: must be <= maxWorkers"},
      {"maxWorkers", 9, "spec.maxWorkers: must be <= ests"},
      {"gpuTypes", {"a100", "z80"}, "spec.gpuTypes[1]: unknown GPU type \"z80\""},
      {"training", {{"model", "resnet"}}, "spec.training.model: must be one of mlp, cnn"},
      {"training", {{"steps", 0}}, "spec.training.steps: must be >= 1"},
      {"output", {{"path", "models"}}, "spec.output.path: must be an absolute path"},
      {"output", {{"everyCheckpoint", true}}, "spec.output.everyCheckpoint: needs a path"},
      {"output", {{"everyCheckpoint", "yes"}}, "spec.output.everyCheckpoint: must be a boolean"},
      {"certificate", {{"everySteps", -1}}, "spec.certificate.everySteps: must be >= 0"},
      {"certificate",
       {{"everySteps", 100000001}},
       "spec.certificate.everySteps: must be <= 100000000"},
      {"certificate", {{"everySteps", 2.5}}, "spec.certificate.everySteps: must be an integer"},
  };
  for (const auto& c : cases) {
    auto j = Valid();
    j[c.field] = c.value;
    auto s = ParseJobSpec(j);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_NE(std::string(s.status().message()).find(c.want), std::string::npos)
        << s.status().message();
  }
  auto j = Valid();
  j.erase("image");
  EXPECT_EQ(ParseJobSpec(j).status().message(), "spec.image: is required");
  EXPECT_FALSE(ParseJobSpec(nlohmann::json::array()).ok());
}

// Regression (issue 16): `--lr inf` reached the workers' assignment as
// "learningRate": null, which the reader took as absent and replaced by the
// default; and non-finite values built by code passed validation.
TEST(TrainingArgs, NonFiniteNumbersAreRejectedNamingTheField) {
  for (const char* field : {"learningRate", "momentum", "weightDecay"}) {
    nlohmann::json j = ToJson(TrainingArgs{});
    j[field] = std::numeric_limits<double>::infinity();  // dumps as null
    const auto parsed = ParseTrainingArgs(nlohmann::json::parse(j.dump()), "training");
    ASSERT_FALSE(parsed.ok()) << field;
    EXPECT_NE(parsed.status().message().find(std::string("training.") + field +
                                             ": must be a finite number"),
              std::string::npos)
        << parsed.status();
  }
  TrainingArgs t;
  t.momentum = std::nan("");
  EXPECT_EQ(ValidateTrainingArgs(t, "flags").message(),
            "flags.momentum: must be a finite number, got nan");
  t = TrainingArgs{};
  t.weightDecay = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(ValidateTrainingArgs(t, "flags").ok());
  t = TrainingArgs{};
  t.learningRate = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(ValidateTrainingArgs(t, "flags").ok());
}

// Code-built args get every rule parsing applies, in the caller's words.
TEST(TrainingArgs, ValidationNamesFieldsTheCallersWay) {
  TrainingArgs t;
  t.batchPerEst = 100000;
  EXPECT_EQ(ValidateTrainingArgs(t, "training").message(),
            "training.batchPerEst: must be <= 65536, got 100000");
  t = TrainingArgs{};
  t.warmupSteps = 200;
  const auto flag = [](std::string_view field) { return "--" + std::string(field); };
  EXPECT_EQ(ValidateTrainingArgs(t, flag).message(),
            "--warmupSteps: must be < --steps (120), got 200");
  t = TrainingArgs{};
  t.lrSchedule = "linear";
  EXPECT_EQ(ValidateTrainingArgs(t, "spec").message(),
            "spec.lrSchedule: must be one of constant, step, cosine, got \"linear\"");
}

TEST(TrainingArgs, DataAndNormalizationParseAndRoundTrip) {
  const nlohmann::json j = {{"data", "/data/images"},
                            {"normalizeMean", {0.485, 0.456, 0.406}},
                            {"normalizeStd", {0.229, 0.224, 0.225}}};
  auto t = ParseTrainingArgs(j, "training");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data, "/data/images");
  EXPECT_EQ(t->normalizeMean, (std::vector<double>{0.485, 0.456, 0.406}));
  EXPECT_EQ(t->normalizeStd, (std::vector<double>{0.229, 0.224, 0.225}));
  auto again = ParseTrainingArgs(ToJson(*t), "training");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*t, *again);
}

TEST(TrainingArgs, RejectsBadDataAndNormalizationNamingTheField) {
  const std::pair<nlohmann::json, const char*> cases[] = {
      {{{"data", "/d"}, {"dataset", "tokens"}},
       "training.dataset: must stay at its default (mnist) when training.data names the data, "
       "got \"tokens\""},
      {{{"normalizeMean", {0.5}}},
       "training.normalizeStd: must be given with training.normalizeMean"},
      {{{"normalizeStd", {0.5}}},
       "training.normalizeMean: must be given with training.normalizeStd"},
      {{{"normalizeMean", {0.5}}, {"normalizeStd", {0.0}}},
       "training.normalizeStd[0]: must be a finite number > 0, got 0"},
      {{{"normalizeMean", {0.5}}, {"normalizeStd", {0.2, -1}}},
       "training.normalizeStd[1]: must be a finite number > 0, got -1"},
      {{{"normalizeMean", {"x"}}, {"normalizeStd", {1}}},
       "training.normalizeMean[0]: must be a finite number"},
      {{{"normalizeMean", 0.5}, {"normalizeStd", {1}}},
       "training.normalizeMean: must be a list, got number"},
  };
  for (const auto& [j, want] : cases) {
    auto t = ParseTrainingArgs(j, "training");
    ASSERT_FALSE(t.ok()) << j.dump();
    EXPECT_EQ(t.status().message(), std::string(want)) << j.dump();
  }
  TrainingArgs t;
  t.data.assign(4097, 'd');
  EXPECT_EQ(ValidateTrainingArgs(t, "flags").message(),
            "flags.data: must be at most 4096 characters, got 4097");
  t.data.assign(4096, 'd');
  EXPECT_TRUE(ValidateTrainingArgs(t, "flags").ok());
  t = TrainingArgs{};
  t.normalizeMean = {0.5};
  t.normalizeStd = {std::numeric_limits<double>::infinity()};
  EXPECT_EQ(ValidateTrainingArgs(t, "flags").message(),
            "flags.normalizeStd[0]: must be a finite number > 0, got inf");
  t.normalizeStd.assign(65, 1.0);
  t.normalizeMean.assign(65, 0.0);
  EXPECT_EQ(ValidateTrainingArgs(t, "flags").message(),
            "flags.normalizeMean: at most 64 values, got 65");
}

}  // namespace
}  // namespace easyscale
