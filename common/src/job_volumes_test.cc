// spec.worker.volumes and the paths a job names in them, through ParseJobSpec
// as the operator and the API server's stand-in read a job.
#include "easyscale/common/job_volumes.h"

#include <gtest/gtest.h>

#include "easyscale/common/job_spec.h"

namespace easyscale {
namespace {

using nlohmann::json;

const json kModels = {
    {"name", "models"}, {"claimName", "team-models"}, {"mountPath", "/models"}, {"readOnly", true}};
const json kOutput = {{"name", "output"}, {"claimName", "team-output"}, {"mountPath", "/output"}};

json Spec(const json& volumes, const json& training = json::object()) {
  json spec = {{"image", "w:1"}, {"ests", 4}, {"training", training}};
  if (!volumes.is_null()) spec["worker"]["volumes"] = volumes;
  return spec;
}

json With(json volume, const char* key, json value) {
  volume[key] = std::move(value);
  return volume;
}

std::string Error(const json& spec) {
  StatusOr<JobSpec> s = ParseJobSpec(spec);
  return s.ok() ? "accepted" : std::string(s.status().message());
}

TEST(JobVolumes, ParseWithTheModelFileInsideAndRoundTrip) {
  StatusOr<JobSpec> s = ParseJobSpec(
      Spec({kModels, kOutput}, {{"model", "file"}, {"modelFile", "/models/resnet18.onnx"}}));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->worker.volumes.size(), 2u);
  EXPECT_EQ(
      s->worker.volumes[0],
      (JobVolume{
          .name = "models", .claimName = "team-models", .mountPath = "/models", .readOnly = true}));
  EXPECT_FALSE(s->worker.volumes[1].readOnly) << "readOnly defaults to false";
  StatusOr<JobSpec> again = ParseJobSpec(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *s);
}

TEST(JobVolumes, NormalAbsolutePaths) {
  for (const char* good : {"/a", "/models/r18.onnx", "/a/.hidden", "/a/...", "/a/..b", "/a b/c"}) {
    EXPECT_TRUE(IsNormalAbsolutePath(good)) << good;
  }
  for (const char* bad :
       {"", "/", "a/b", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/..", "/."}) {
    EXPECT_FALSE(IsNormalAbsolutePath(bad)) << bad;
  }
  EXPECT_TRUE(IsNormalAbsolutePath("/" + std::string(kMaxVolumePathLength - 1, 'a')));
  EXPECT_FALSE(IsNormalAbsolutePath("/" + std::string(kMaxVolumePathLength, 'a')));
}

struct BadVolumes {
  json volumes;
  std::string want;
};

TEST(JobVolumes, BadVolumesAreRejectedNamingTheField) {
  json too_many = json::array();
  for (size_t i = 0; i <= kMaxJobVolumes; ++i) {
    too_many.push_back(With(With(kOutput, "name", "v" + std::to_string(i)), "mountPath",
                            "/v" + std::to_string(i)));
  }
  const BadVolumes cases[] = {
      {json::object(), "spec.worker.volumes: must be a list"},
      {too_many, "spec.worker.volumes: at most 16 volumes, got 17"},
      {{{{"name", "a"}, {"mountPath", "/a"}}}, "spec.worker.volumes[0].claimName: is required"},
      {{With(kModels, "name", "Models")}, "spec.worker.volumes[0].name: not a DNS-1123 label"},
      {{With(kModels, "name", std::string(64, 'm'))},
       "spec.worker.volumes[0].name: not a DNS-1123 label"},
      {{With(kModels, "name", "shm")},
       "spec.worker.volumes[0].name: \"shm\" is the operator's own volume"},
      {{With(kModels, "name", "checkpoint")},
       "spec.worker.volumes[0].name: \"checkpoint\" is the operator's own volume"},
      {{With(kModels, "subPath", "x")}, "spec.worker.volumes[0].subPath: unknown field"},
      {{With(kModels, "readOnly", "yes")},
       "spec.worker.volumes[0].readOnly: must be a boolean, got string"},
      {{With(kModels, "claimName", "Team_Models")},
       "spec.worker.volumes[0].claimName: not a DNS-1123 subdomain"},
      {{With(kModels, "mountPath", "models")},
       "spec.worker.volumes[0].mountPath: must be an absolute path without empty"},
      {{With(kModels, "mountPath", "/models/../etc")},
       "spec.worker.volumes[0].mountPath: must be an absolute path without empty"},
      {{With(kModels, "mountPath", "/models/")},
       "spec.worker.volumes[0].mountPath: must be an absolute path without empty"},
      {{kModels, With(kOutput, "name", "models")},
       "spec.worker.volumes[1].name: \"models\" is also spec.worker.volumes[0]'s name"},
      {{kModels, With(kOutput, "mountPath", "/models")},
       "spec.worker.volumes[1].mountPath: \"/models\" overlaps spec.worker.volumes[0].mountPath "
       "\"/models\""},
      {{kModels, With(kOutput, "mountPath", "/models/out")},
       "spec.worker.volumes[1].mountPath: \"/models/out\" overlaps spec.worker.volumes[0]"},
      {{With(kOutput, "mountPath", "/mnt"), With(kModels, "mountPath", "/")},
       "spec.worker.volumes[1].mountPath: must be an absolute path"},
      {{With(kOutput, "mountPath", "/dev")},
       "spec.worker.volumes[0].mountPath: \"/dev\" overlaps the operator's mount at /dev/shm"},
      {{With(kOutput, "mountPath", "/dev/shm/x")},
       "spec.worker.volumes[0].mountPath: \"/dev/shm/x\" overlaps the operator's mount at "
       "/dev/shm"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Error(Spec(c.volumes)).rfind(c.want, 0), 0u)
        << c.volumes.dump() << "\n  got: " << Error(Spec(c.volumes));
  }
  // Sibling paths that share a prefix do not overlap.
  EXPECT_EQ(Error(Spec({kModels, With(kOutput, "mountPath", "/models-out")})), "accepted");
}

TEST(JobVolumes, TheCheckpointClaimsMountIsTheOperators) {
  json spec = Spec(json::array({With(kOutput, "mountPath", "/ckpt/user")}));
  spec["checkpoint"] = {{"claimName", "ckpt"}, {"mountPath", "/ckpt"}};
  EXPECT_EQ(Error(spec),
            "spec.worker.volumes[0].mountPath: \"/ckpt/user\" overlaps the operator's mount at "
            "/ckpt");
  spec["checkpoint"].erase("claimName");  // no claim, nothing mounted there
  EXPECT_EQ(Error(spec), "accepted");
  spec["checkpoint"]["mountPath"] = "/ckpt/../etc";
  EXPECT_EQ(Error(spec).rfind("spec.checkpoint.mountPath: must be an absolute path without", 0),
            0u);
}

TEST(JobVolumes, TheModelFileMustBeInsideAVolume) {
  const json file = {{"model", "file"}};
  auto model_at = [&](const std::string& path) {
    json t = file;
    t["modelFile"] = path;
    return t;
  };
  EXPECT_EQ(Error(Spec(nullptr, model_at("/models/r18.onnx"))),
            "spec.training.modelFile: \"/models/r18.onnx\" is in none of the job's volumes "
            "(spec.worker.volumes: none)");
  EXPECT_EQ(Error(Spec({kModels, kOutput}, model_at("/opt/r18.onnx"))),
            "spec.training.modelFile: \"/opt/r18.onnx\" is in none of the job's volumes "
            "(spec.worker.volumes: /models, /output)");
  // A shared prefix is not containment, and ".." cannot climb out.
  EXPECT_EQ(Error(Spec(json::array({kModels}), model_at("/models-old/r18.onnx")))
                .rfind("spec.training.modelFile: \"/models-old/r18.onnx\" is in none", 0),
            0u);
  EXPECT_EQ(Error(Spec(json::array({kModels}), model_at("/models/../etc/r18.onnx"))),
            "spec.training.modelFile: \"/models/../etc/r18.onnx\" must be an absolute path "
            "without empty, \".\" or \"..\" components or a trailing slash");
  EXPECT_EQ(Error(Spec(json::array({kModels}), model_at("r18.onnx")))
                .rfind("spec.training.modelFile: \"r18.onnx\" must be an absolute path", 0),
            0u);
  // Read-only is enough to read a model; built-in models need no volume.
  EXPECT_EQ(Error(Spec(json::array({kModels}), model_at("/models/sub/r18.onnx"))), "accepted");
  EXPECT_EQ(Error(Spec(nullptr, {{"model", "cnn"}})), "accepted");
}

TEST(JobVolumes, WrittenPathsNeedAWritableVolume) {
  const std::vector<JobVolume> volumes = {
      {.name = "models", .claimName = "m", .mountPath = "/models", .readOnly = true},
      {.name = "output", .claimName = "o", .mountPath = "/output"}};
  EXPECT_TRUE(CheckPathsInVolumes({{"spec.output.path", "/output/run1", true},
                                   {"spec.training.data", "/models/images", false},
                                   {"spec.training.data", "/models", false}},
                                  volumes, "spec.worker.volumes")
                  .ok());
  const Status written = CheckPathsInVolumes({{"spec.output.path", "/models/run1", true}}, volumes,
                                             "spec.worker.volumes");
  EXPECT_EQ(written.message(),
            "spec.output.path: \"/models/run1\" is on read-only volume \"models\"; it needs a "
            "writable one");
}

}  // namespace
}  // namespace easyscale
