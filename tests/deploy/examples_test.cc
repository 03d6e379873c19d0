// deploy/examples: every valid EasyScaleJob is accepted by the CRD schema and by
// the operator's ParseJobSpec; every file in invalid/ is rejected with the
// messages its "# expect-error:" lines name.
#include <gtest/gtest.h>

#include <map>
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

// Your own model and data: the job reads its model file from the read-only
// inputs claim and has a writable output claim; the claims and the loader
// pod the comments use are in the file, each under the step label the
// comments' `kubectl apply -l` selects.
TEST_F(Examples, ImageFolderJobReadsItsModelFromAReadOnlyClaim) {
  auto docs = LoadYamlFile(SourcePath("deploy/examples/resnet18-image-folder.yaml"));
  ASSERT_TRUE(docs.ok()) << docs.status();
  std::map<std::string, std::string> claim_steps;  // claim name -> step
  json loader, job;
  for (const auto& doc : *docs) {
    const std::string step = doc["metadata"]["labels"].value("example.easyscale.io/step", "");
    if (doc["kind"] == "PersistentVolumeClaim") {
      EXPECT_EQ(doc["spec"]["accessModes"], json::array({"ReadWriteMany"}));
      claim_steps[doc["metadata"]["name"]] = step;
    } else if (doc["kind"] == "Pod") {
      EXPECT_EQ(step, "load");
      loader = doc;
    } else {
      ASSERT_EQ(doc["kind"], kJobKind);
      EXPECT_EQ(step, "train");
      job = doc;
    }
  }
  auto spec = ParseJobSpec(job["spec"]);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->training.model, "file");
  int writable = 0;
  for (const JobVolume& v : spec->worker.volumes) {
    EXPECT_EQ(claim_steps[v.claimName], "storage") << v.claimName << " is not created first";
    if (spec->training.modelFile.rfind(v.mountPath + "/", 0) == 0) {
      EXPECT_TRUE(v.readOnly) << "the workers only read the inputs";
      // The loader mounts the same claim writable, to copy the files in.
      ASSERT_EQ(loader["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], v.claimName);
      EXPECT_FALSE(loader["spec"]["containers"][0]["volumeMounts"][0].value("readOnly", false));
    }
    writable += v.readOnly ? 0 : 1;
  }
  EXPECT_EQ(writable, 1) << "one claim for the trained model";
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
