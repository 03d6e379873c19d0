// File: tests/deploy/test_support.h
//
// What the deploy tests share: repository paths, running helm (from
// third_party/tools, unpacked by scripts/install-deps.sh), rendering the chart
// into objects, and the shapes registry with the EasyScaleJob CRD added.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/common/subprocess.h"
#include "object_shapes.h"

namespace easyscale::deploytest {

// Absolute path of `relative` inside the source tree.
std::string SourcePath(const std::string& relative);
// ReadFile's bound for the repository's own files.
inline constexpr size_t kMaxSourceFileBytes = 16 << 20;

// Runs argv (no shell, at most two minutes) and collects its stdout and stderr.
StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv);

// Runs third_party/tools/helm with `args`; fails with an install hint when helm
// is missing.
StatusOr<CommandResult> RunHelm(const std::vector<std::string>& args);

// `helm template` of charts/easyscale (release "easyscale", namespace
// "easyscale-system", CRDs included) with extra args such as {"--set", "a=b"}.
StatusOr<std::vector<nlohmann::json>> RenderChart(const std::vector<std::string>& extra_args = {});

// The shapes in shapes/ plus the EasyScaleJob CRD from crds/ (itself validated first).
StatusOr<ObjectShapes> LoadShapesWithCrd();

// The CRD object from crds/easyscale.io_easyscalejobs.yaml.
StatusOr<nlohmann::json> LoadCrd();

// Files in `dir` (non-recursive) whose names end in `suffix`, sorted.
std::vector<std::string> ListFiles(const std::string& dir, const std::string& suffix);

}  // namespace easyscale::deploytest
