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
  expect({"--bogus"}, "unknown flag --bogus");
  expect({"--kubeconfig"}, "--kubeconfig: missing value");
  expect({"--kubeconfig="}, "--kubeconfig: must not be empty");
  expect({"--lease-duration=-1"}, "--lease-duration");
  expect({"--worker-backend=tpu"}, "--worker-backend");
  expect({"--leader-elect=maybe"}, "--leader-elect");
  expect({"--lease-duration=5", "--renew-deadline=6"}, "--renew-deadline");
  expect({"--resync=86401"}, "--resync: must be a number in (0, 86400]");
  expect({"--schedule-window=0"}, "--schedule-window: must be a number in (0, 86400]");
  expect({"stray"}, "unexpected argument \"stray\"");
  expect({"--health-addr=8081"}, "--health-addr: want host:port");
  expect({"--control-addr=:99999"}, "--control-addr: want host:port");
}

TEST(OperatorFlags, HelpListsEveryFlag) {
  const std::string help = OperatorUsage();
  for (const char* name :
       {"kubeconfig", "namespace", "leader-elect", "lease-name", "lease-namespace", "identity",
        "lease-duration", "renew-deadline", "retry-period", "metrics-addr", "health-addr",
        "control-addr", "control-url", "worker-backend", "worker-command", "drain-timeout",
        "resync", "schedule-window", "log-level"}) {
    const std::string flag = std::string("\n  --") + name;
    EXPECT_TRUE(help.find(flag + " VALUE\n") != std::string::npos ||
                help.find(flag + "\n") != std::string::npos)
        << name;
  }
  EXPECT_TRUE(ParseOperatorFlags({"--help"})->help);
}

}  // namespace
}  // namespace easyscale::op
