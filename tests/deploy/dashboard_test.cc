// The Grafana dashboard: valid JSON, shipped in a ConfigMap Grafana's sidecar
// picks up, and plotting the operator's metrics (no misspelt metric names).
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "easyscale/common/file_io.h"
#include "test_support.h"

namespace easyscale::deploytest {
namespace {

using nlohmann::json;

// The metrics the operator registers: every "easyscale_..." and (its work
// queue's, under controller-runtime's names) "workqueue_..." name in its
// metrics source; the dashboard plots all of them.
std::set<std::string> OperatorMetrics() {
  auto source = ReadFile(SourcePath("operator/src/controller/metrics.cc"), kMaxSourceFileBytes);
  EXPECT_TRUE(source.ok()) << source.status();
  std::set<std::string> names;
  if (!source.ok()) return names;
  static const std::regex kName("\"((?:easyscale|workqueue)_[a-z_]+)\"");
  for (std::sregex_iterator it(source->begin(), source->end(), kName), end; it != end; ++it) {
    names.insert((*it)[1].str());
  }
  return names;
}

json LoadDashboard() {
  auto text =
      ReadFile(SourcePath("charts/easyscale/dashboards/easyscale.json"), kMaxSourceFileBytes);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? json::parse(*text, nullptr, /*allow_exceptions=*/false) : json();
}

TEST(Dashboard, PlotsEveryOperatorMetricAndNoOther) {
  const json d = LoadDashboard();
  ASSERT_TRUE(d.is_object()) << "dashboards/easyscale.json is not valid JSON";
  static const std::regex kMetric("(?:easyscale|workqueue)_[a-z_]+");
  std::set<std::string> used;
  std::set<std::string> titles;
  for (const auto& panel : d["panels"]) {
    titles.insert(panel["title"]);
    ASSERT_FALSE(panel["targets"].empty()) << panel["title"];
    for (const auto& t : panel["targets"]) {
      const std::string expr = t["expr"];
      for (std::sregex_iterator it(expr.begin(), expr.end(), kMetric), end; it != end; ++it) {
        std::string name = it->str();
        // Histograms are queried through their _bucket series.
        if (name.size() > 7 && name.compare(name.size() - 7, 7, "_bucket") == 0)
          name.resize(name.size() - 7);
        used.insert(name);
      }
    }
  }
  const std::set<std::string> exported = OperatorMetrics();
  EXPECT_GE(exported.size(), 10u);  // the source was read
  EXPECT_EQ(used, exported);
  for (const auto& want : {"GPUs by type and state", "Preemptions", "Scale events",
                           "Job progress (step)", "Allocated and useful GPUs by type",
                           "Work queue depth and adds", "Work queue wait and work (p99)"}) {
    EXPECT_TRUE(titles.count(want)) << want;
  }
  const std::string all = d.dump();
  for (const auto& state : {"idle", "training", "inference"}) {
    EXPECT_NE(all.find(state), std::string::npos) << state;
  }
}

// The certificate panel plots each job's step beside its newest certified
// step, per job, on the job variable.
TEST(Dashboard, PlotsTheCertifiedStepBesideTheJobsStep) {
  const json d = LoadDashboard();
  ASSERT_TRUE(d.is_object());
  const json* panel = nullptr;
  for (const auto& p : d["panels"]) {
    if (p["title"] == "Job progress and certified step") panel = &p;
  }
  ASSERT_NE(panel, nullptr) << "no certificate panel";
  std::set<std::string> exprs;
  for (const auto& t : (*panel)["targets"]) exprs.insert(t["expr"].get<std::string>());
  EXPECT_EQ(exprs,
            (std::set<std::string>{R"(max by (job) (easyscale_job_step{job=~"$job"}))",
                                   R"(max by (job) (easyscale_job_certified_step{job=~"$job"}))"}));
  std::set<int> ids;
  for (const auto& p : d["panels"]) EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << p["id"];
}

TEST(Dashboard, ShipsInAGrafanaSidecarConfigMap) {
  auto docs = RenderChart();
  ASSERT_TRUE(docs.ok()) << docs.status();
  auto text =
      ReadFile(SourcePath("charts/easyscale/dashboards/easyscale.json"), kMaxSourceFileBytes);
  ASSERT_TRUE(text.ok());
  int found = 0;
  for (const auto& doc : *docs) {
    if (doc["kind"] != "ConfigMap" || !doc["metadata"]["labels"].contains("grafana_dashboard"))
      continue;
    ++found;
    EXPECT_EQ(doc["metadata"]["labels"]["grafana_dashboard"], "1");
    EXPECT_EQ(json::parse(doc["data"]["easyscale.json"].get<std::string>()), json::parse(*text));
  }
  EXPECT_EQ(found, 1);
}

}  // namespace
}  // namespace easyscale::deploytest
