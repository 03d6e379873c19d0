// deploy/examples: every valid EasyScaleJob is accepted by the CRD schema and by
// the operator's ParseJobSpec; every file in invalid/ is rejected with the
// messages its "# expect-error:" lines name.
#include <gtest/gtest.h>

#include <sstream>

#include "easyscale/common/file_io.h"
#include "easyscale/common/job_spec.h"
#include "shapes_fixture.h"
#include "test_support.h"
#include "yaml_loader.h"

namespace easyscale::deploytest {
namespace {

using nlohmann::json;

struct Expectations {
  std::vector<std::string> errors;  // "# expect-error: TEXT"
  bool parser_rejects = false;      // "# also-rejected-by: ParseJobSpec"
};

Expectations ReadExpectations(const std::string& text) {
  Expectations e;
  std::istringstream lines(text);
  std::string line;
  const std::string error_tag = "# expect-error: ";
  while (std::getline(lines, line)) {
    if (line.rfind(error_tag, 0) == 0) e.errors.push_back(line.substr(error_tag.size()));
    if (line == "# also-rejected-by: ParseJobSpec") e.parser_rejects = true;
  }
  return e;
}

using Examples = ShapesTest;

TEST_F(Examples, ValidJobsAreAccepted) {
  const auto files = ListFiles(SourcePath("deploy/examples"), ".yaml");
  ASSERT_GE(files.size(), 2u);
  for (const auto& file : files) {
    auto docs = LoadYamlFile(file);
    ASSERT_TRUE(docs.ok()) << docs.status();
    ASSERT_FALSE(docs->empty()) << file;
    for (json& doc : *docs) {
      EXPECT_EQ(shapes_->Validate(&doc), std::vector<std::string>{}) << file;
      if (doc["kind"] != kJobKind) continue;
      auto spec = ParseJobSpec(doc["spec"]);
      EXPECT_TRUE(spec.ok()) << file << ": " << spec.status();
    }
  }
}

TEST_F(Examples, CpuDemoRunsOnCpuWorkersAndGpuJobOnGpus) {
  auto docs = LoadYamlFile(SourcePath("deploy/examples/mnist-cpu.yaml"));
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 1u);
  EXPECT_EQ((*docs)[0]["spec"]["gpuTypes"], json::array({"cpu"}));
  auto gpu = LoadYamlFile(SourcePath("deploy/examples/mnist-gpu.yaml"));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  int jobs = 0;
  for (const auto& doc : *gpu) {
    if (doc["kind"] != kJobKind) {
      // The checkpoint claim the job mounts, shared by workers on any node.
      EXPECT_EQ(doc["kind"], "PersistentVolumeClaim");
      EXPECT_EQ(doc["spec"]["accessModes"], json::array({"ReadWriteMany"}));
      continue;
    }
    ++jobs;
    EXPECT_FALSE(doc["spec"]["gpuTypes"].empty());
    for (const auto& t : doc["spec"]["gpuTypes"]) EXPECT_NE(t, "cpu");
    EXPECT_EQ(doc["spec"]["checkpoint"]["claimName"], "mnist-checkpoints");
  }
  EXPECT_EQ(jobs, 1);
}

TEST_F(Examples, BrokenJobsAreRejectedWithTheSchemaMessage) {
  const auto files = ListFiles(SourcePath("deploy/examples/invalid"), ".yaml");
  ASSERT_GE(files.size(), 8u);
  for (const auto& file : files) {
    auto text = ReadFile(file, kMaxSourceFileBytes);
    ASSERT_TRUE(text.ok()) << text.status();
    const Expectations want = ReadExpectations(*text);
    ASSERT_FALSE(want.errors.empty()) << file << " has no # expect-error: line";
    auto docs = LoadYamlDocuments(*text, file);
    ASSERT_TRUE(docs.ok()) << docs.status();
    ASSERT_EQ(docs->size(), 1u) << file;
    json job = (*docs)[0];
    const json original_spec = job.value("spec", json());
    const auto errors = shapes_->Validate(&job);
    std::string all;
    for (const auto& e : errors) all += "\n  " + e;
    EXPECT_EQ(errors.size(), want.errors.size()) << file << all;
    for (const auto& w : want.errors) {
      EXPECT_NE(all.find(w), std::string::npos) << file << ": want \"" << w << "\", got" << all;
    }
    if (want.parser_rejects) {
      EXPECT_FALSE(ParseJobSpec(original_spec).ok()) << file << ": ParseJobSpec accepts it";
    }
  }
}

}  // namespace
}  // namespace easyscale::deploytest
