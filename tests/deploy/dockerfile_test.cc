// deploy/docker: the Dockerfile has a target per binary, built on Debian
// bookworm with scripts/install-deps.sh, running as non-root, the worker on a
// CUDA runtime base (and worker-cpu on the slim one); collect-runtime-libs.sh
// really produces a runnable tree. (The images themselves are built and run
// by tests/images, with buildah.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>

#include "easyscale/common/file_io.h"
#include "test_support.h"

namespace easyscale::deploytest {
namespace {

struct Stage {
  std::string base;  // ARGs resolved
  std::vector<std::string> lines;
};

// Stages by name, in order, with line continuations joined.
std::vector<std::pair<std::string, Stage>> ParseDockerfile(const std::string& text) {
  std::map<std::string, std::string> args;
  std::vector<std::pair<std::string, Stage>> stages;
  std::istringstream in(text);
  std::string line, joined;
  static const std::regex kArg("^ARG ([A-Z_]+)=(.*)$");
  static const std::regex kFrom("^FROM (\\S+)(?: AS (\\S+))?$");
  static const std::regex kVar("\\$\\{([A-Z_]+)\\}");
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\\') {
      joined += line.substr(0, line.size() - 1);
      continue;
    }
    joined += line;
    std::smatch m;
    if (std::regex_match(joined, m, kArg) && stages.empty()) {
      args[m[1]] = m[2];
    } else if (std::regex_match(joined, m, kFrom)) {
      std::string base = m[1];
      std::smatch v;
      while (std::regex_search(base, v, kVar)) base.replace(v.position(), v.length(), args[v[1]]);
      stages.push_back({m[2], Stage{base, {}}});
    } else if (!stages.empty() && !joined.empty() && joined[0] != '#') {
      stages.back().second.lines.push_back(joined);
    }
    joined.clear();
  }
  return stages;
}

TEST(Dockerfile, HasANonRootTargetPerBinary) {
  auto text = ReadFile(SourcePath("deploy/docker/Dockerfile"), kMaxSourceFileBytes);
  ASSERT_TRUE(text.ok()) << text.status();
  const auto stages = ParseDockerfile(*text);
  std::map<std::string, Stage> by_name;
  for (const auto& [name, stage] : stages) {
    for (const auto& l : stage.lines) {
      std::smatch m;
      if (std::regex_search(l, m, std::regex("--from=(\\S+)"))) {
        // host-build: the build context of a host build's binaries (build-images.sh).
        EXPECT_TRUE(by_name.count(m[1]) || m[1] == "host-build")
            << name << " copies from unknown or later stage " << m[1];
      }
      if (l.rfind("COPY ", 0) == 0 && l.find("--from") == std::string::npos && l != "COPY . .") {
        std::istringstream words(l.substr(5));
        std::vector<std::string> paths{std::istream_iterator<std::string>(words), {}};
        for (size_t i = 0; i + 1 < paths.size(); ++i) {
          EXPECT_TRUE(std::filesystem::exists(SourcePath(paths[i]))) << paths[i];
        }
      }
    }
    by_name[name] = stage;
  }
  ASSERT_TRUE(by_name.count("deps"));
  EXPECT_EQ(by_name["deps"].base, "debian:bookworm");
  const auto& deps = by_name["deps"].lines;
  EXPECT_TRUE(std::any_of(deps.begin(), deps.end(), [](const std::string& l) {
    return l.find("scripts/install-deps.sh") != std::string::npos && l.rfind("RUN", 0) == 0;
  }));
  for (const auto& [target, binary] :
       std::map<std::string, std::string>{{"operator", "easyscale-operator"},
                                          {"device-plugin", "easyscale-device-plugin"},
                                          {"worker", "easyscale-worker"},
                                          {"worker-cpu", "easyscale-worker"}}) {
    ASSERT_TRUE(by_name.count(target)) << target;
    const Stage& s = by_name[target];
    std::string user, entrypoint;
    for (const auto& l : s.lines) {
      if (l.rfind("USER ", 0) == 0) user = l.substr(5);
      if (l.rfind("ENTRYPOINT ", 0) == 0) entrypoint = l.substr(11);
    }
    EXPECT_FALSE(user.empty()) << target << " runs as root";
    EXPECT_NE(user.substr(0, user.find(':')), "0") << target;
    EXPECT_NE(user, "root") << target;
    EXPECT_EQ(entrypoint, "[\"/opt/easyscale/bin/" + binary + "\"]") << target;
    EXPECT_EQ(s.base.find("debian:bookworm") == 0 || s.base.find("nvidia/cuda:") == 0, true)
        << s.base;
  }
  EXPECT_EQ(by_name["worker"].base.find("nvidia/cuda:"), 0u);
  EXPECT_NE(by_name["worker"].base.find("-runtime-"), std::string::npos);
  EXPECT_EQ(by_name["worker-cpu"].base, "debian:bookworm-slim");
}

TEST(Dockerfile, CollectRuntimeLibsMakesARunnableTree) {
  char dir_template[] = "/tmp/easyscale-collect-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto r =
      RunCommand({"/bin/bash", SourcePath("deploy/docker/collect-runtime-libs.sh"), dir, self});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exitCode, 0) << r->err;
  const std::string lib = dir + "/lib";
  EXPECT_TRUE(std::filesystem::exists(lib + "/libyaml-cpp.so.0.7"))
      << "linked libraries are copied";
  EXPECT_FALSE(std::filesystem::exists(lib + "/libc.so.6")) << "the C library stays the base's";
  // The copy runs with only its own lib folder (plus the base's C/C++ runtime).
  auto run = RunCommand({"/usr/bin/env", "-i", "LD_LIBRARY_PATH=" + lib,
                         dir + "/bin/" + std::filesystem::path(self).filename().string(),
                         "--gtest_list_tests", "--gtest_filter=Dockerfile.*"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exitCode, 0) << run->err;
  EXPECT_NE(run->out.find("CollectRuntimeLibsMakesARunnableTree"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace easyscale::deploytest
