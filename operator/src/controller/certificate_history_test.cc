// The certificate history: its lines round-trip, bad lines are named, the
// merge appends only newer steps, keeps the newest N and reports digests that
// contradict the history; the ConfigMap is the job's.
#include "controller/certificate_history.h"

#include <gtest/gtest.h>

#include "controller/worker_pod.h"

namespace easyscale::op {
namespace {

Certificate At(int64_t step, char hex = 'a') { return {step, std::string(64, hex)}; }

std::vector<Certificate> Steps(int64_t from, int64_t to, int64_t every) {
  std::vector<Certificate> out;
  for (int64_t s = from; s <= to; s += every) out.push_back(At(s));
  return out;
}

TEST(CertificateHistory, LinesRoundTrip) {
  const std::vector<Certificate> history = {At(20, 'a'), At(40, 'b')};
  const std::string text = FormatCertificateHistory(history);
  EXPECT_EQ(text, "certificate step=20 digest=" + std::string(64, 'a') +
                      "\ncertificate step=40 digest=" + std::string(64, 'b') + "\n");
  auto parsed = ParseCertificateHistory(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, history);
  EXPECT_TRUE(ParseCertificateHistory("")->empty());
}

TEST(CertificateHistory, BadLinesAreNamed) {
  const std::string a = "certificate step=20 digest=" + std::string(64, 'a') + "\n";
  const std::pair<std::string, const char*> bad[] = {
      {a + "certificate step=40 digest=xyz\n",
       "data.certificates: \"certificate step=40 digest=xyz\": digest: not a SHA-256"},
      {a + "hello\n", "data.certificates: \"hello\": not \"certificate step=N digest=HEX\""},
      {a + a, "data.certificates: step 20 after step 20: steps must increase"},
  };
  for (const auto& [text, want] : bad) {
    const Status s = ParseCertificateHistory(text).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << text;
    EXPECT_NE(std::string(s.message()).find(want), std::string::npos) << s.message();
  }
}

TEST(CertificateHistory, MergeAppendsNewerStepsOnly) {
  CertificateMerge m = MergeCertificates({At(10), At(20)}, {At(20), At(30), At(40)});
  EXPECT_TRUE(m.changed);
  EXPECT_EQ(m.history, (std::vector<Certificate>{At(10), At(20), At(30), At(40)}));
  EXPECT_TRUE(m.conflicts.empty());
  // A new leader hears the newest certificate again: nothing to write.
  m = MergeCertificates(m.history, {At(40)});
  EXPECT_FALSE(m.changed);
  EXPECT_EQ(m.history.size(), 4u);
}

TEST(CertificateHistory, MergeKeepsTheNewestN) {
  CertificateMerge m = MergeCertificates(Steps(1, 8, 1), Steps(9, 12, 1), 5);
  EXPECT_TRUE(m.changed);
  EXPECT_EQ(m.history, Steps(8, 12, 1));
  m = MergeCertificates({}, Steps(10, 30000, 10));
  EXPECT_EQ(m.history.size(), kCertificateHistory);
  EXPECT_EQ(m.history.front().step, 30000 - 10 * static_cast<int64_t>(kCertificateHistory - 1));
  EXPECT_EQ(m.history.back().step, 30000);
  EXPECT_LT(FormatCertificateHistory(m.history).size(), size_t{1} << 20)
      << "must fit a ConfigMap (1 MiB)";
}

TEST(CertificateHistory, AContradictingDigestIsAConflictNotStored) {
  CertificateMerge m = MergeCertificates({At(10, 'a'), At(20, 'a')}, {At(10, 'b'), At(30, 'c')});
  EXPECT_EQ(m.history, (std::vector<Certificate>{At(10, 'a'), At(20, 'a'), At(30, 'c')}));
  ASSERT_EQ(m.conflicts.size(), 1u);
  EXPECT_NE(m.conflicts[0].find("step 10 was certified with digest " + std::string(64, 'a') +
                                " and now with " + std::string(64, 'b')),
            std::string::npos)
      << m.conflicts[0];
}

TEST(CertificateHistory, TheConfigMapIsOwnedByTheJob) {
  const nlohmann::json job = {
      {"apiVersion", "easyscale.io/v1alpha1"},
      {"kind", "EasyScaleJob"},
      {"metadata", {{"name", "mnist"}, {"namespace", "team"}, {"uid", "u-1"}}}};
  const nlohmann::json cm = BuildCertificateConfigMap(job, {At(20)});
  EXPECT_EQ(cm["kind"], "ConfigMap");
  EXPECT_EQ(cm["metadata"]["name"], "mnist-certificate");
  EXPECT_EQ(cm["metadata"]["namespace"], "team");
  EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["uid"], "u-1");
  EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["kind"], "EasyScaleJob");
  EXPECT_EQ(cm["data"][kCertificatesKey], FormatCertificateHistory({At(20)}));
}

}  // namespace
}  // namespace easyscale::op
