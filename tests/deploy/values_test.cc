// charts/easyscale/values.yaml and values.schema.json: every value documented,
// the schema and the defaults agree key for key, and helm refuses misspelt or
// mistyped values with the schema's message. Also the install notes.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "easyscale/common/file_io.h"
#include "test_support.h"
#include "yaml_loader.h"

namespace easyscale::deploytest {
namespace {

using nlohmann::json;

// Values whose content is Kubernetes objects, documented as a whole.
const std::set<std::string> kFreeForm = {"resources",    "affinity",       "tolerations",
                                         "nodeSelector", "podAnnotations", "labels",
                                         "annotations"};

TEST(Values, EveryValueIsDocumented) {
  auto text = ReadFile(SourcePath("charts/easyscale/values.yaml"), kMaxSourceFileBytes);
  ASSERT_TRUE(text.ok()) << text.status();
  static const std::regex kKey("^( *)([A-Za-z][A-Za-z0-9]*):");
  std::istringstream lines(*text);
  std::string line, previous;
  std::vector<std::pair<size_t, std::string>> parents;  // (indent, key)
  int keys = 0;
  for (int n = 1; std::getline(lines, line); ++n) {
    std::smatch m;
    if (std::regex_search(line, m, kKey)) {
      const size_t indent = m[1].length();
      while (!parents.empty() && parents.back().first >= indent) parents.pop_back();
      const bool free_form = std::any_of(parents.begin(), parents.end(),
                                         [](const auto& p) { return kFreeForm.count(p.second); });
      if (!free_form) {
        ++keys;
        EXPECT_TRUE(previous.find_first_not_of(' ') != std::string::npos &&
                    previous[previous.find_first_not_of(' ')] == '#')
            << "values.yaml:" << n << ": " << m[2] << " has no comment line above it";
      }
      parents.emplace_back(indent, m[2]);
    }
    if (!line.empty()) previous = line;
  }
  EXPECT_GE(keys, 40);
}

// Keys of `values` and `schema` agree down to the free-form values.
void ExpectSameKeys(const json& values, const json& schema, const std::string& path) {
  if (!values.is_object() || !schema.contains("properties") ||
      kFreeForm.count(path.substr(path.rfind('.') + 1))) {
    return;
  }
  std::set<std::string> in_values, in_schema;
  for (const auto& [k, v] : values.items()) in_values.insert(k);
  for (const auto& [k, v] : schema["properties"].items()) {
    if (k != "global") in_schema.insert(k);
  }
  EXPECT_EQ(in_values, in_schema) << path;
  for (const auto& [k, v] : values.items()) {
    if (schema["properties"].contains(k))
      ExpectSameKeys(v, schema["properties"][k], path + "." + k);
  }
}

TEST(Values, SchemaCoversExactlyTheDefaults) {
  auto values = LoadYamlFile(SourcePath("charts/easyscale/values.yaml"));
  auto schema_text =
      ReadFile(SourcePath("charts/easyscale/values.schema.json"), kMaxSourceFileBytes);
  ASSERT_TRUE(values.ok() && schema_text.ok());
  const json schema = json::parse(*schema_text);
  ExpectSameKeys((*values)[0], schema, "values");
}

TEST(Values, HelmRejectsMisspeltAndMistypedValues) {
  const std::pair<const char*, const char*> cases[] = {
      {"operator.replica=3", "at '/operator': additional properties 'replica' not allowed"},
      {"operator.replicas=two", "at '/operator/replicas': got string, want integer"},
      {"image.pullPolicy=Sometimes", "at '/image/pullPolicy': value must be one of"},
      {"serviceMonitor.enabled=maybe", "at '/serviceMonitor/enabled': got string, want boolean"},
      {"operator.ports.control=70000", "at '/operator/ports/control'"},
      {"devicePlugin.kubeletDevicePluginsDir=var/lib",
       "at '/devicePlugin/kubeletDevicePluginsDir'"},
  };
  for (const auto& [set, want] : cases) {
    auto docs = RenderChart({"--set", set});
    ASSERT_FALSE(docs.ok()) << set << " accepted";
    EXPECT_NE(docs.status().message().find(want), std::string::npos) << docs.status();
  }
}

TEST(Values, InstallNotesSayHowToWatchJobs) {
  auto r = RunHelm({"install", "easyscale", SourcePath("charts/easyscale"), "--namespace",
                    "easyscale-system", "--dry-run=client"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exitCode, 0) << r->err;
  const std::string notes = r->out.substr(std::min(r->out.find("NOTES:"), r->out.size()));
  for (const auto& want :
       {"kubectl apply -f deploy/examples/mnist-cpu.yaml", "kubectl get esj -w",
        "kubectl get events --field-selector involvedObject.kind=EasyScaleJob"}) {
    EXPECT_NE(notes.find(want), std::string::npos) << want << "\n" << notes;
  }
}

}  // namespace
}  // namespace easyscale::deploytest
