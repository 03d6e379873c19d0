#include "operator_flags.h"

#include <gtest/gtest.h>

namespace easyscale::op {
namespace {

TEST(OperatorFlags, ParsesBothFormsAndDefaults) {
  StatusOr<OperatorFlags> f = ParseOperatorFlags(
      {"--kubeconfig=/k", "--leader-elect", "--lease-name", "l", "--metrics-addr", ":9"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kubeconfig, "/k");
  EXPECT_TRUE(f->leaderElect);
  EXPECT_EQ(f->leaseName, "l");
  EXPECT_EQ(f->metricsAddr, ":9");
  EXPECT_EQ(f->healthAddr, ":8081");
  EXPECT_FALSE(ParseOperatorFlags({"--leader-elect=false"})->leaderElect);
}

TEST(OperatorFlags, ErrorsNameTheFlag) {
  auto expect = [](std::vector<std::string> args, const std::string& needle) {
    StatusOr<OperatorFlags> f = ParseOperatorFlags(args);
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status();
  };
  expect({"--bogus"}, "unknown flag \"--bogus\"");
  expect({"--kubeconfig"}, "--kubeconfig: needs a value");
  expect({"--lease-duration=-1"}, "--lease-duration");
  expect({"--worker-backend=tpu"}, "--worker-backend");
  expect({"--leader-elect=maybe"}, "--leader-elect");
  expect({"--lease-duration=5", "--renew-deadline=6"}, "--renew-deadline");
}

}  // namespace
}  // namespace easyscale::op
