#include "easyscale/common/flags.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

StatusOr<std::vector<std::string>> ParseArgs(FlagSet& f, std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("prog")};
  for (auto& a : args) argv.push_back(a.data());
  return f.Parse(static_cast<int>(argv.size()), argv.data());
}

TEST(FlagSet, ParsesEveryKind) {
  int n = 1, bounded = 5;
  double x = 0;
  bool on = true, quiet = false;
  std::string s = "default";
  std::vector<std::string> list = {"a"};
  FlagSet f("prog");
  f.Int("n", &n, "");
  f.Int("bounded", &bounded, "", 1, 10);
  f.Double("x", &x, "");
  f.Bool("on", &on, "");
  f.Bool("quiet", &quiet, "");
  f.String("s", &s, "");
  f.StringList("item", &list, "");
  auto rest = ParseArgs(f, {"--n=3", "--bounded", "7", "--x", "2.5", "--on", "off", "--quiet",
                            "--s", "v", "--item", "b", "--item=c", "pos"});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(n, 3);
  EXPECT_EQ(bounded, 7);
  EXPECT_EQ(x, 2.5);
  EXPECT_FALSE(on);
  EXPECT_TRUE(quiet);
  EXPECT_EQ(s, "v");
  EXPECT_EQ(list, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(*rest, std::vector<std::string>{"pos"});
}

TEST(FlagSet, ErrorsNameTheFlag) {
  int n = 1, bounded = 5;
  bool on = true;
  std::string s;
  FlagSet f("prog");
  f.Int("n", &n, "");
  f.Int("bounded", &bounded, "", 1, 10);
  f.Bool("on", &on, "");
  f.String("s", &s, "");
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--nope"}, "unknown flag --nope"},
      {{"--n", "x"}, "--n: expected an integer"},
      {{"--bounded", "11"}, "--bounded: must be an integer in [1, 10]"},
      {{"--on=maybe"}, "--on: must be on or off"},
      {{"--s="}, "--s: must not be empty"},
      {{"--n"}, "--n: missing value"},
  };
  for (const auto& [args, want] : cases) {
    auto r = ParseArgs(f, args);
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_NE(std::string(r.status().message()).find(want), std::string::npos) << r.status();
  }
  auto help = ParseArgs(f, {"--help"});
  EXPECT_TRUE(help.ok() && f.help_requested());
  EXPECT_NE(f.Help().find("--bounded VALUE"), std::string::npos);
}

}  // namespace
}  // namespace easyscale
