// The shipped easyscale-worker takes no flag that breaks a job on purpose:
// those are easyscale-test-worker's (worker/src/testing/test_worker_main.cc).
// Each command's flags are read from both binaries' --help; the ones only the
// test binary lists must be exactly the test flags, and the shipped binary
// must refuse each of them.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "worker_cli.h"

namespace {

using easyscale::clitest::Outcome;
using easyscale::clitest::TestWorker;
using easyscale::clitest::Worker;

// The flags a --help lists ("  --name VALUE" lines).
std::set<std::string> ListedFlags(const Outcome& help) {
  EXPECT_EQ(help.exit_code, 0) << help.output;
  std::set<std::string> flags;
  static const std::regex kFlag("\n  --([a-z0-9-]+)");
  for (auto it = std::sregex_iterator(help.output.begin(), help.output.end(), kFlag);
       it != std::sregex_iterator(); ++it) {
    flags.insert((*it)[1]);
  }
  return flags;
}

TEST(ShippedWorker, HasNoTestFlags) {
  const std::set<std::string> kTestFlags = {"kill-worker-at", "fault-worker-at",
                                            "test-drop-context-field", "test-fault-at"};
  const Outcome top = Worker("--help");
  EXPECT_EQ(top.exit_code, 0) << top.output;
  EXPECT_EQ(top.output.find("test"), std::string::npos) << top.output;
  std::set<std::string> moved;
  for (const std::string command : {"local", "run", "k8s", "predict", "prepare-data"}) {
    SCOPED_TRACE(command);
    const Outcome shipped_help = Worker(command + " --help");
    EXPECT_EQ(shipped_help.output.find("testing"), std::string::npos) << shipped_help.output;
    const std::set<std::string> shipped = ListedFlags(shipped_help);
    EXPECT_GT(shipped.size(), 1u) << shipped_help.output;
    for (const std::string& flag : ListedFlags(TestWorker(command + " --help"))) {
      if (shipped.count(flag) != 0) continue;
      EXPECT_EQ(kTestFlags.count(flag), 1u) << "--" << flag << " is only in the test binary";
      moved.insert(flag);
      const Outcome tried = Worker(command + " --" + flag + " 1");
      EXPECT_NE(tried.exit_code, 0) << tried.output;
      EXPECT_NE(tried.output.find("unknown flag --" + flag), std::string::npos) << tried.output;
    }
    for (const std::string& flag : kTestFlags) {
      EXPECT_EQ(shipped.count(flag), 0u) << "the shipped binary lists --" << flag;
    }
  }
  // The test binary has every one of them (the comparison above saw them all).
  EXPECT_EQ(moved, kTestFlags);
}

}  // namespace
