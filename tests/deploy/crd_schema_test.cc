// The EasyScaleJob CRD against the C++ definition of the spec
// (common/job_spec.h): same fields, defaults, ranges and cross-field rules, so
// the API server accepts exactly what the operator's ParseJobSpec accepts.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "easyscale/common/job_spec.h"
#include "shapes_fixture.h"
#include "test_support.h"

namespace easyscale::deploytest {
namespace {

using nlohmann::json;

struct RuleCase {
  json spec;
  std::string want;  // the schema's message
};

class CrdSchema : public ShapesTest {
 protected:
  void SetUp() override {
    ShapesTest::SetUp();
    if (HasFatalFailure()) return;
    auto crd = LoadCrd();
    ASSERT_TRUE(crd.ok()) << crd.status();
    crd_ = *crd;
    schema_ = crd_["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
  }

  static json Job(json spec) {
    return {{"apiVersion", "easyscale.io/v1alpha1"},
            {"kind", "EasyScaleJob"},
            {"metadata", {{"name", "demo"}, {"namespace", "default"}}},
            {"spec", std::move(spec)}};
  }

  // Schema errors of a job with `spec`; the defaulted spec lands in *defaulted.
  std::vector<std::string> Check(json spec, json* defaulted = nullptr) {
    json job = Job(std::move(spec));
    auto errors = shapes_->Validate(&job);
    if (defaulted != nullptr) *defaulted = job["spec"];
    return errors;
  }

  const json& SpecSchema() const { return schema_["properties"]["spec"]; }

  // The schema rejects each spec with `want` first; ParseJobSpec rejects it too.
  void ExpectBothReject(const std::vector<RuleCase>& cases) {
    for (const auto& c : cases) {
      const auto errors = Check(c.spec);
      ASSERT_FALSE(errors.empty()) << c.spec.dump();
      EXPECT_NE(errors[0].find(c.want), std::string::npos) << errors[0];
      EXPECT_FALSE(ParseJobSpec(c.spec).ok()) << "parser accepts " << c.spec.dump();
    }
  }
  void ExpectBothAccept(const json& spec) {
    EXPECT_EQ(Check(spec), std::vector<std::string>{}) << spec.dump();
    const auto parsed = ParseJobSpec(spec);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
  }

  json crd_;
  json schema_;
};

std::set<std::string> Keys(const json& object) {
  std::set<std::string> keys;
  for (const auto& [k, v] : object.items()) keys.insert(k);
  return keys;
}

TEST_F(CrdSchema, NamesMatchTheCommonConstants) {
  const json& spec = crd_["spec"];
  EXPECT_EQ(spec["group"], kApiGroup);
  EXPECT_EQ(spec["names"]["kind"], kJobKind);
  EXPECT_EQ(spec["names"]["plural"], "easyscalejobs");
  EXPECT_EQ(crd_["metadata"]["name"], "easyscalejobs.easyscale.io");
  EXPECT_EQ(spec["names"]["shortNames"], json::array({"esj"}));
  EXPECT_EQ(spec["names"]["categories"], json::array({"easyscale", "all"}));
  ASSERT_EQ(spec["versions"].size(), 1u);
  EXPECT_EQ(spec["versions"][0]["name"], kApiVersion);
  EXPECT_TRUE(spec["versions"][0]["subresources"].contains("status"));
}

TEST_F(CrdSchema, FieldsAreExactlyTheJobSpecFields) {
  EXPECT_EQ(Keys(SpecSchema()["properties"]), Keys(ToJson(JobSpec{})));
  EXPECT_EQ(Keys(SpecSchema()["properties"]["training"]["properties"]),
            Keys(ToJson(TrainingArgs{})));
  EXPECT_EQ(Keys(SpecSchema()["properties"]["checkpoint"]["properties"]),
            Keys(ToJson(JobSpec{})["checkpoint"]));
  EXPECT_EQ(Keys(SpecSchema()["properties"]["worker"]["properties"]),
            Keys(ToJson(JobSpec{})["worker"]));
  JobSpec with_volume;
  with_volume.worker.volumes.push_back({});
  EXPECT_EQ(
      Keys(SpecSchema()["properties"]["worker"]["properties"]["volumes"]["items"]["properties"]),
      Keys(ToJson(with_volume)["worker"]["volumes"][0]));
  EXPECT_EQ(Keys(SpecSchema()["properties"]["output"]["properties"]), Keys(ToJson(OutputSpec{})));
}

// spec.output: the schema and ParseJobSpec agree on the path's form and on
// where it may be: inside a volume the job mounts writable.
TEST_F(CrdSchema, OutputPathIsInAWritableVolume) {
  auto job = [](const std::string& path, bool read_only) {
    return json{{"image", "w:1"},
                {"ests", 4},
                {"output", {{"path", path}}},
                {"worker",
                 {{"volumes",
                   {{{"name", "out"},
                     {"claimName", "out"},
                     {"mountPath", "/models"},
                     {"readOnly", read_only}}}}}}};
  };
  for (const auto& [path, read_only, ok] :
       {std::tuple{"/models/mnist", false, true}, std::tuple{"/models", false, true},
        std::tuple{"models", false, false}, std::tuple{"/elsewhere", false, false},
        std::tuple{"/models-old", false, false}, std::tuple{"/models/mnist", true, false}}) {
    const json spec = job(path, read_only);
    EXPECT_EQ(Check(spec).empty(), ok) << path << " readOnly=" << read_only;
    EXPECT_EQ(ParseJobSpec(spec).ok(), ok) << path << " readOnly=" << read_only;
  }
  json spec;
  ASSERT_EQ(Check(job("/models/m", false), &spec), std::vector<std::string>{});
  EXPECT_EQ(spec["output"], ToJson(OutputSpec{.path = "/models/m"}));  // everyCheckpoint off
}

TEST_F(CrdSchema, DefaultsAreTheJobSpecDefaults) {
  json spec;
  ASSERT_EQ(Check({{"image", "w:1"}, {"ests", 4}}, &spec), std::vector<std::string>{});
  EXPECT_EQ(spec["training"], ToJson(TrainingArgs{}));
  const JobSpec defaults;
  EXPECT_EQ(spec["minWorkers"], defaults.minWorkers);
  EXPECT_EQ(spec["priority"], defaults.priority);
  EXPECT_EQ(spec["checkpoint"]["mountPath"], defaults.checkpoint.mountPath);
  EXPECT_FALSE(spec.contains("maxWorkers")) << "absent maxWorkers means ests";
  auto parsed = ParseJobSpec(spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->maxWorkers, 4);
}

TEST_F(CrdSchema, GpuTypesEnumIsKnownGpuTypes) {
  EXPECT_EQ(SpecSchema()["properties"]["gpuTypes"]["items"]["enum"], json(KnownGpuTypes()));
}

// For every numeric bound in the schema, values at and just past the bound are
// accepted by the schema exactly when ParseJobSpec accepts them.
TEST_F(CrdSchema, NumericBoundsAgreeWithParseJobSpec) {
  const json base = {{"image", "w:1"}, {"ests", 4096}, {"training", {{"steps", 100000000}}}};
  int checked = 0;
  auto probe = [&](const std::string& field, const json& schema, bool in_training) {
    const bool integer = schema["type"] == "integer";
    const double step = integer ? 1.0 : 1e-9;
    std::vector<double> values;
    if (schema.contains("minimum")) {
      values.push_back(schema["minimum"].get<double>());
      values.push_back(schema["minimum"].get<double>() - step);
      values.push_back(schema["minimum"].get<double>() + step);
    }
    if (schema.contains("maximum")) {
      values.push_back(schema["maximum"].get<double>());
      values.push_back(schema["maximum"].get<double>() + step);
    }
    for (double x : values) {
      json spec = base;
      const json value = integer ? json(static_cast<int64_t>(x)) : json(x);
      if (in_training) {
        spec["training"][field] = value;
      } else {
        spec[field] = value;
      }
      const auto errors = Check(spec);
      const auto parsed = ParseJobSpec(spec);
      EXPECT_EQ(errors.empty(), parsed.ok())
          << field << "=" << value.dump()
          << " schema: " << (errors.empty() ? std::string("accepted") : errors[0])
          << " parser: " << parsed.status();
      ++checked;
    }
  };
  for (const auto& [name, s] : SpecSchema()["properties"].items()) {
    if (s["type"] == "integer" || s["type"] == "number") probe(name, s, false);
  }
  for (const auto& [name, s] : SpecSchema()["properties"]["training"]["properties"].items()) {
    if (s["type"] == "integer" || s["type"] == "number") probe(name, s, true);
  }
  EXPECT_GE(checked, 30);
}

TEST_F(CrdSchema, CrossFieldRulesAgreeWithParseJobSpec) {
  ExpectBothReject({
      {{{"image", "w"}, {"ests", 4}, {"minWorkers", 3}, {"maxWorkers", 2}},
       "spec.minWorkers: Invalid value: \"object\": minWorkers must be <= maxWorkers"},
      {{{"image", "w"}, {"ests", 4}, {"maxWorkers", 5}},
       "spec.maxWorkers: Invalid value: \"object\": maxWorkers must be <= ests"},
      {{{"image", "w"}, {"ests", 2}, {"minWorkers", 3}},
       "spec.minWorkers: Invalid value: \"object\": minWorkers must be <= ests"},
      {{{"image", "w"}, {"ests", 2}, {"training", {{"steps", 10}, {"warmupSteps", 10}}}},
       "spec.training.warmupSteps: Invalid value: \"object\": warmupSteps must be < steps"},
      {{{"image", "w"}, {"ests", 2}, {"training", {{"data", "/data"}, {"dataset", "tokens"}}}},
       "spec.training.dataset: Invalid value: \"object\": dataset must stay at its default "
       "(mnist) when data names the data"},
      {{{"image", "w"}, {"ests", 2}, {"training", {{"normalizeMean", {0.5}}}}},
       "spec.training.normalizeStd: Invalid value: \"object\": normalizeMean must be given with "
       "normalizeStd"},
      {{{"image", "w"}, {"ests", 2}, {"training", {{"normalizeStd", {0.5}}}}},
       "spec.training.normalizeMean: Invalid value: \"object\": normalizeStd must be given with "
       "normalizeMean"},
      {{{"image", "w"},
        {"ests", 2},
        {"training", {{"normalizeMean", {0.5}}, {"normalizeStd", {0.0}}}}},
       "spec.training.normalizeStd[0]: Invalid value: 0.0: spec.training.normalizeStd[0] in body "
       "should be greater than 0"},
      {{{"image", "w"}, {"ests", 2}, {"gpuTypes", {"z80"}}},
       "spec.gpuTypes[0]: Unsupported value: \"z80\": supported values: \"h200\""},
      {{{"image", ""}, {"ests", 2}},
       "spec.image: Invalid value: \"\": spec.image in body should be at least 1 chars long"},
      {{{"image", "w"}, {"ests", 2}, {"checkpoint", {{"mountPath", "ckpt"}}}},
       "spec.checkpoint.mountPath: Invalid value: \"ckpt\": spec.checkpoint.mountPath in body "
       "should match '^(/"},
      {{{"image", "w"}, {"ests", 2}, {"checkpoint", {{"mountPath", "/ckpt/../etc"}}}},
       "spec.checkpoint.mountPath: Invalid value: \"/ckpt/../etc\": spec.checkpoint.mountPath in "
       "body should match '^(/"},
  });
  // The bounds of the rules themselves are allowed by both.
  ExpectBothAccept({{"image", "w"}, {"ests", 4}, {"minWorkers", 4}, {"maxWorkers", 4}});
  // Users' data in a volume, normalised per channel.
  ExpectBothAccept({{"image", "w"},
                    {"ests", 4},
                    {"training",
                     {{"data", "/data/images"},
                      {"normalizeMean", {0.485, 0.456, 0.406}},
                      {"normalizeStd", {0.229, 0.224, 0.225}}}},
                    {"worker",
                     {{"volumes",
                       {{{"name", "data"},
                         {"claimName", "team-data"},
                         {"mountPath", "/data"},
                         {"readOnly", true}}}}}}});
}

json Volume(const std::string& name, const std::string& mountPath) {
  return {{"name", name}, {"claimName", "team-files"}, {"mountPath", mountPath}};
}

json WithVolumes(json volumes, const json& training = json::object()) {
  return {{"image", "w"},
          {"ests", 2},
          {"training", training},
          {"worker", {{"volumes", std::move(volumes)}}}};
}

// spec.worker.volumes and the model file's place in them: the schema (with
// its CEL rules) rejects what ParseJobSpec rejects, with the schema's message.
TEST_F(CrdSchema, VolumeRulesAgreeWithParseJobSpec) {
  const json file_at_opt = {{"model", "file"}, {"modelFile", "/opt/r18.onnx"}};
  json over_checkpoint = WithVolumes(json::array({Volume("data", "/ckpt/data")}));
  over_checkpoint["checkpoint"] = {{"claimName", "ckpt"}, {"mountPath", "/ckpt"}};
  json seventeen = json::array();
  for (int i = 0; i < 17; ++i)
    seventeen.push_back(Volume(absl::StrCat("v", i), absl::StrCat("/v", i)));
  ExpectBothReject({
      {WithVolumes(json::array({Volume("models", "/models")}), file_at_opt),
       "spec.training.modelFile: Invalid value: \"object\": training.modelFile must lie inside the "
       "mountPath of one of worker.volumes"},
      {{{"image", "w"}, {"ests", 2}, {"training", file_at_opt}},
       "spec.training.modelFile: Invalid value: \"object\": training.modelFile must lie inside"},
      {WithVolumes(json::array({Volume("models", "/models")}),
                   {{"model", "file"}, {"modelFile", "/models/../opt/r18.onnx"}}),
       "spec.training.modelFile: Invalid value: \"/models/../opt/r18.onnx\": "
       "spec.training.modelFile in body should match"},
      {WithVolumes({Volume("data", "/data"), Volume("output", "/data/output")}),
       "spec.worker.volumes: Invalid value: \"array\": mount paths must be neither equal nor "
       "nested"},
      {WithVolumes({Volume("data", "/data"), Volume("output", "/data")}),
       "spec.worker.volumes: Invalid value: \"array\": mount paths must be neither equal nor "
       "nested"},
      {WithVolumes({Volume("data", "/data"), Volume("data", "/output")}),
       "spec.worker.volumes[1]: Duplicate value: {\"name\":\"data\"}"},
      {over_checkpoint,
       "spec.worker.volumes: Invalid value: \"object\": worker.volumes must not overlap the "
       "checkpoint claim's mountPath"},
      {WithVolumes(json::array({Volume("shm", "/data")})),
       "spec.worker.volumes[0].name: Invalid value: \"string\": shm and checkpoint are the "
       "operator's own volumes"},
      {WithVolumes(json::array({Volume("Data", "/data")})),
       "spec.worker.volumes[0].name: Invalid value: \"Data\": spec.worker.volumes[0].name in body "
       "should match"},
      {WithVolumes(json::array({Volume("data", "/dev")})),
       "spec.worker.volumes[0].mountPath: Invalid value: \"string\": must not overlap /dev/shm"},
      {WithVolumes(json::array({Volume("data", "/data/")})),
       "spec.worker.volumes[0].mountPath: Invalid value: \"/data/\": "
       "spec.worker.volumes[0].mountPath in body should match"},
      {WithVolumes(json::array({Volume("data", "/" + std::string(kMaxVolumePathLength, 'd'))})),
       "spec.worker.volumes[0].mountPath: Invalid value: \"/ddd"},
      {WithVolumes(json::array({{{"name", "data"}, {"mountPath", "/data"}}})),
       "spec.worker.volumes[0].claimName: Required value"},
      {WithVolumes(seventeen),
       "spec.worker.volumes: Invalid value: \"array\": "
       "spec.worker.volumes in body should have at most 16 items"},
  });
  // At the bounds: a model file in a volume next to a sibling that shares its
  // prefix, a mount beside the checkpoint claim's, 16 volumes, the longest path.
  json edge = WithVolumes(
      {Volume("models", "/models"), Volume("old", "/models-old"), Volume("inputs", "/ckpt-inputs"),
       Volume("long", "/" + std::string(kMaxVolumePathLength - 1, 'l'))},
      {{"model", "file"}, {"modelFile", "/models/sub/r18.onnx"}});
  edge["checkpoint"] = {{"claimName", "ckpt"}, {"mountPath", "/ckpt"}};
  seventeen.erase(seventeen.end() - 1);
  ExpectBothAccept(edge);
  ExpectBothAccept(WithVolumes(seventeen));
  json defaulted;
  ASSERT_EQ(Check(WithVolumes(json::array({Volume("data", "/data")})), &defaulted),
            std::vector<std::string>{});
  EXPECT_EQ(defaulted["worker"]["volumes"][0]["readOnly"], JobVolume{}.readOnly);
}

TEST_F(CrdSchema, EstsAreImmutable) {
  json old_job = Job({{"image", "w"}, {"ests", 4}});
  ASSERT_EQ(shapes_->Validate(&old_job), std::vector<std::string>{});
  json same = Job({{"image", "w:2"}, {"ests", 4}, {"maxWorkers", 2}});
  EXPECT_EQ(shapes_->Validate(&same, &old_job), std::vector<std::string>{});
  json changed = Job({{"image", "w"}, {"ests", 8}});
  const auto errors = shapes_->Validate(&changed, &old_job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "spec.ests: Invalid value: \"integer\": ests is immutable");
}

TEST_F(CrdSchema, PrinterColumnsReadSchemaFieldsOfTheirType) {
  const json& columns = crd_["spec"]["versions"][0]["additionalPrinterColumns"];
  std::vector<std::string> names;
  for (const auto& c : columns) {
    names.push_back(c["name"]);
    std::string path = c["jsonPath"];
    if (path == ".metadata.creationTimestamp") {
      EXPECT_EQ(c["type"], "date");
      continue;
    }
    const json* node = &schema_;
    for (size_t start = 1; start < path.size();) {
      const size_t end = std::min(path.find('.', start), path.size());
      const std::string field = path.substr(start, end - start);
      ASSERT_TRUE(node->contains("properties") && (*node)["properties"].contains(field))
          << c["name"] << ": " << path << " is not in the schema";
      node = &(*node)["properties"][field];
      start = end + 1;
    }
    EXPECT_EQ((*node)["type"], c["type"]) << c["name"];
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"Phase", "ESTs", "Workers", "GPU types", "Step", "Progress",
                                      "ETA", "Certified", "Preemptions", "Age"}));
}

// `kubectl explain` documents the whole spec and status: every field under
// them, at any depth (in objects, list items and maps), has a description.
TEST_F(CrdSchema, EveryFieldHasADescription) {
  std::vector<std::string> missing;
  std::function<void(const json&, const std::string&)> walk = [&](const json& node,
                                                                  const std::string& path) {
    if (node.contains("properties")) {
      for (const auto& [name, field] : node["properties"].items()) {
        const std::string at = path + "." + name;
        if (field.value("description", "").empty()) missing.push_back(at);
        walk(field, at);
      }
    }
    if (node.contains("items")) walk(node["items"], path + "[]");
    if (node.contains("additionalProperties") && node["additionalProperties"].is_object()) {
      walk(node["additionalProperties"], path + "{}");
    }
  };
  for (const char* part : {"spec", "status"}) {
    const json& schema = schema_["properties"][part];
    ASSERT_FALSE(schema.value("description", "").empty()) << part;
    walk(schema, part);
  }
  EXPECT_EQ(missing, std::vector<std::string>{});
  // The walk reaches the deep ones.
  EXPECT_FALSE(schema_["properties"]["status"]["properties"]["conditions"]["items"]["properties"]
                      ["observedGeneration"]
                          .value("description", "")
                          .empty());
}

TEST_F(CrdSchema, SuspendDefaultsToFalseAndParsesLikeJobSpec) {
  json spec;
  ASSERT_EQ(Check({{"image", "w:1"}, {"ests", 4}}, &spec), std::vector<std::string>{});
  EXPECT_EQ(spec["suspend"], false);
  ASSERT_EQ(Check({{"image", "w:1"}, {"ests", 4}, {"suspend", true}}, &spec),
            std::vector<std::string>{});
  auto parsed = ParseJobSpec(spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->suspend);
  EXPECT_FALSE(Check({{"image", "w:1"}, {"ests", 4}, {"suspend", "yes"}}).empty());
  EXPECT_FALSE(ParseJobSpec({{"image", "w:1"}, {"ests", 4}, {"suspend", "yes"}}).ok());
}

TEST_F(CrdSchema, StatusTakesWhatTheOperatorWrites) {
  json job = Job({{"image", "w"}, {"ests", 4}});
  job["status"] = {
      {"phase", "Running"},
      {"observedGeneration", 1},
      {"generation", 3},
      {"workerCount", 2},
      {"gpuTypes", "a100x1,t4x1"},
      {"workers",
       {{{"pod", "demo-g3-0"},
         {"node", "n1"},
         {"gpuType", "a100"},
         {"rank", 0},
         {"ests", {0, 1, 2}}},
        {{"pod", "demo-g3-1"}, {"node", "n2"}, {"gpuType", "t4"}, {"rank", 1}, {"ests", {3}}}}},
      {"assignment", {{"totalEsts", 4}, {"workers", {{0, 1, 2}, {3}}}}},
      {"step", 57},
      {"progressPercentage", 47},
      {"estimatedRemainingSeconds", 312},
      {"preemptions", 1},
      {"scaleEvents", 2},
      {"digest", "ab12"},
      {"testAccuracy", 0.97},
      {"output",
       {{"path", "/models/demo"},
        {"onnxSha256", std::string(64, 'a')},
        {"safetensorsSha256", std::string(64, 'b')}}},
      {"startTime", "2026-12-02T13:00:00Z"},
      {"conditions",
       {{{"type", "Ready"},
         {"status", "True"},
         {"reason", "WorkersRunning"},
         {"message", "2 workers"},
         {"lastTransitionTime", "2026-12-02T13:00:05Z"},
         {"observedGeneration", 1}}}}};
  EXPECT_EQ(shapes_->Validate(&job), std::vector<std::string>{});

  json bad = job;
  bad["status"]["phase"] = "Paused";
  bad["status"]["conditions"].push_back(bad["status"]["conditions"][0]);
  bad["status"]["startTime"] = "yesterday";
  bad["status"]["workers"][0]["rank"] = "0";
  bad["status"]["output"]["onnxSha256"] = "ABC";
  bad["status"]["progressPercentage"] = 101;
  const auto errors = shapes_->Validate(&bad);
  const std::vector<std::string> want = {
      "status.phase: Unsupported value: \"Paused\"",
      "status.conditions[1]: Duplicate value: {\"type\":\"Ready\"}",
      "status.startTime: Invalid value: \"yesterday\": status.startTime in body must be of type "
      "date-time",
      "status.workers[0].rank: Invalid value: \"string\": status.workers[0].rank in body must be "
      "of "
      "type integer: \"string\"",
      "status.output.onnxSha256: Invalid value: \"ABC\"",
      "status.progressPercentage: Invalid value: 101"};
  for (const auto& w : want) {
    EXPECT_TRUE(std::any_of(errors.begin(), errors.end(),
                            [&](const std::string& e) { return e.find(w) != std::string::npos; }))
        << "missing: " << w;
  }
}

}  // namespace
}  // namespace easyscale::deploytest
