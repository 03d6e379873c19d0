#include "easyscale/common/control_protocol.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

WorkerAssignment Sample() {
  WorkerAssignment a;
  a.job = "default/mnist";
  a.generation = 3;
  a.rank = 1;
  a.worldSize = 2;
  a.totalEsts = 8;
  a.ests = {4, 5, 6, 7};
  a.rendezvous.url = "http://10.0.0.1:8090";
  a.rendezvous.prefix = "gen-3-1a";
  a.restore.from = RestoreFrom::kPeers;
  a.restore.step = 40;
  a.restore.sources = {{"mnist-w-2-0", "http://10.0.0.7:29400"}};
  a.checkpointDir = "/ckpt/0f2c";
  a.output = {.path = "/models/mnist", .everyCheckpoint = true};
  a.certificateEvery = 20;
  return a;
}

TEST(ControlProtocol, AssignmentRoundTrips) {
  auto parsed = ParseWorkerAssignment(ToJson(Sample()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, Sample());
}

TEST(ControlProtocol, ReportRoundTrips) {
  WorkerReport r;
  r.job = "default/mnist";
  r.generation = 2;
  r.state = WorkerState::kSucceeded;
  r.step = 120;
  r.digest = std::string(64, 'a');
  r.reason = "PeerLost";
  r.stateStep = 120;
  r.stateUrl = "http://10.0.0.7:29400";
  r.output = {.path = "/models/mnist",
              .onnxSha256 = std::string(64, 'b'),
              .safetensorsSha256 = std::string(64, 'c')};
  r.certificate = {.step = 100, .digest = std::string(64, 'd')};
  auto parsed = ParseWorkerReport(ToJson(r));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, r);
}

TEST(ControlProtocol, RejectsWrongVersionAndBadFields) {
  auto j = ToJson(Sample());
  j["apiVersion"] = "easyscale.io/control/v0";
  EXPECT_TRUE(absl::IsFailedPrecondition(ParseWorkerAssignment(j).status()));
  j = ToJson(Sample());
  j["rank"] = 2;
  EXPECT_NE(std::string(ParseWorkerAssignment(j).status().message()).find("rank"),
            std::string::npos);
  j = ToJson(Sample());
  j["ests"] = {5, 4};
  EXPECT_FALSE(ParseWorkerAssignment(j).ok());
  j = ToJson(Sample());
  j["rendezvous"]["url"] = "";  // two workers must meet somewhere
  EXPECT_NE(std::string(ParseWorkerAssignment(j).status().message()).find("rendezvous.url"),
            std::string::npos);
  j = ToJson(Sample());
  j["restore"]["sources"] = nlohmann::json::array();
  EXPECT_NE(std::string(ParseWorkerAssignment(j).status().message()).find("restore.sources"),
            std::string::npos);
  j = ToJson(Sample());
  j["output"]["path"] = "models";  // a worker writes only where an absolute path says
  EXPECT_NE(std::string(ParseWorkerAssignment(j).status().message()).find("output.path"),
            std::string::npos);
  j = ToJson(Sample());
  j["restore"]["sources"][0]["url"] = "file:///etc/passwd";
  EXPECT_FALSE(ParseWorkerAssignment(j).ok());
  EXPECT_FALSE(ParseWorkerReport({{"apiVersion", kControlApiVersion},
                                  {"job", "a"},
                                  {"generation", 1},
                                  {"rank", 0},
                                  {"state", "Dancing"}})
                   .ok());
}

TEST(ControlProtocol, ReportOutputDigestsAreChecked) {
  WorkerReport r;
  r.job = "default/mnist";
  r.state = WorkerState::kSucceeded;
  r.output = {.path = "/models/mnist", .safetensorsSha256 = std::string(64, 'c')};
  nlohmann::json j = ToJson(r);
  j["output"]["safetensorsSha256"] = "C0FFEE";
  EXPECT_NE(std::string(ParseWorkerReport(j).status().message()).find("output.safetensorsSha256"),
            std::string::npos);
  j = ToJson(r);
  j["output"]["path"] = "relative/folder";
  EXPECT_NE(std::string(ParseWorkerReport(j).status().message()).find("output.path"),
            std::string::npos);
  j = ToJson(r);
  j.erase("output");  // a report from a worker that wrote no files
  auto parsed = ParseWorkerReport(j);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->output, OutputDigests{});
}

TEST(ControlProtocol, ReportCertificatesAreChecked) {
  WorkerReport r;
  r.job = "default/mnist";
  r.state = WorkerState::kRunning;
  r.step = 41;
  EXPECT_FALSE(ToJson(r).contains("certificate")) << "no certificate yet: no field";
  r.certificate = {.step = 40, .digest = std::string(64, 'e')};
  const std::pair<nlohmann::json, const char*> bad[] = {
      {{{"step", 0}, {"digest", std::string(64, 'e')}}, "certificate.step: must be >= 1"},
      {{{"step", 40}, {"digest", std::string(64, 'E')}},
       "certificate.digest: not a SHA-256 in lowercase hex"},
      {{{"step", 40}, {"digest", std::string(63, 'e')}},
       "certificate.digest: not a SHA-256 in lowercase hex"},
      {{{"step", 40}}, "certificate.digest"},
      {{{"digest", std::string(64, 'e')}}, "certificate.step"},
  };
  for (const auto& [certificate, want] : bad) {
    nlohmann::json j = ToJson(r);
    j["certificate"] = certificate;
    const Status s = ParseWorkerReport(j).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << certificate << " -> " << s;
    EXPECT_NE(std::string(s.message()).find(want), std::string::npos)
        << certificate << " -> " << s.message();
  }
}

TEST(ControlProtocol, CertificateLinesRoundTripAndRejectOthers) {
  const Certificate c{.step = 120, .digest = std::string(64, 'f')};
  EXPECT_EQ(CertificateLine(c), "certificate step=120 digest=" + std::string(64, 'f'));
  auto parsed = ParseCertificateLine(CertificateLine(c));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, c);
  const std::string hex(64, 'a');
  for (const std::string& line : std::vector<std::string>{
           "certificate step=0 digest=" + hex, "certificate step=+5 digest=" + hex,
           "certificate step= 5 digest=" + hex, "certificate step=5 digest=" + hex.substr(1),
           "certificate step=5 digest=" + std::string(64, 'A'), "certificate step=5",
           "certificate digest=" + hex, "digest: " + hex, std::string("")}) {
    const Status s = ParseCertificateLine(line).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << line;
    EXPECT_NE(std::string(s.message()).find("\"" + line.substr(0, 200) + "\""), std::string::npos)
        << s.message();
  }
}

TEST(ControlProtocol, BearerTokens) {
  EXPECT_EQ(TokenFromAuthorization(BearerToken("abc")), "abc");
  EXPECT_EQ(TokenFromAuthorization("Basic abc"), "");
  EXPECT_EQ(TokenFromAuthorization("Bearer "), "");
  EXPECT_EQ(TokenFromAuthorization(""), "");
  EXPECT_TRUE(AuthorizedBy("Bearer abc", "abc"));
  EXPECT_FALSE(AuthorizedBy("Bearer abd", "abc"));
  EXPECT_FALSE(AuthorizedBy("Bearer ", ""));  // no token is never a match
}

}  // namespace
}  // namespace easyscale
