#include "easyscale/common/flags.h"

#include <gtest/gtest.h>

#include <limits>

namespace easyscale {
namespace {

StatusOr<std::vector<std::string>> ParseArgs(FlagSet& f, std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("prog")};
  for (auto& a : args) argv.push_back(a.data());
  return f.Parse(static_cast<int>(argv.size()), argv.data());
}

// Each case's args fail with a message containing its text.
template <size_t N>
void ExpectErrors(FlagSet& f, const std::pair<std::vector<std::string>, std::string> (&cases)[N]) {
  for (const auto& [args, want] : cases) {
    auto r = ParseArgs(f, args);
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_NE(std::string(r.status().message()).find(want), std::string::npos) << r.status();
  }
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

TEST(FlagSet, DoubleListsParseCommaSeparatedFiniteNumbers) {
  std::vector<double> mean;
  FlagSet f("prog");
  f.DoubleList("mean", &mean, "");
  ASSERT_TRUE(ParseArgs(f, {"--mean", "0.5,0.25,-1e-3"}).ok());
  EXPECT_EQ(mean, (std::vector<double>{0.5, 0.25, -1e-3}));
  ASSERT_TRUE(ParseArgs(f, {"--mean=2"}).ok());
  EXPECT_EQ(mean, std::vector<double>{2});
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--mean", "0.5,,0.5"}, "--mean: expected a number, got \"\""},
      {{"--mean", "0.5,x"}, "--mean: expected a number, got \"x\""},
      {{"--mean", "0.5,inf"}, "--mean: must be a finite number, got \"inf\""},
  };
  ExpectErrors(f, cases);
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
  ExpectErrors(f, cases);
  auto help = ParseArgs(f, {"--help"});
  EXPECT_TRUE(help.ok() && f.help_requested());
  EXPECT_NE(f.Help().find("--bounded VALUE"), std::string::npos);
}

TEST(FlagSet, RangesAndChoices) {
  int64_t big = 1;
  double closed = 1, open = 15;
  std::string mode = "auto";
  FlagSet f("prog");
  f.Int("big", &big, "", 0, 1000000000000000);
  f.Double("closed", &closed, "", 0.5, 2);
  f.Double("open", &open, "", 0, 60, /*min_exclusive=*/true);
  f.Choice("mode", &mode, "how", {"auto", "cpu", "cuda"});
  auto ok = ParseArgs(f, {"--big=1000000000000000", "--closed", "0.5", "--open=60", "--mode=cpu"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(big, 1000000000000000);
  EXPECT_EQ(closed, 0.5);
  EXPECT_EQ(open, 60);
  EXPECT_EQ(mode, "cpu");
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--big=-1"}, "--big: must be an integer in [0, 1000000000000000], got \"-1\""},
      {{"--closed=2.5"}, "--closed: must be a number in [0.5, 2], got \"2.5\""},
      {{"--closed=nan"}, "--closed: must be a number in [0.5, 2]"},
      {{"--open=0"}, "--open: must be a number in (0, 60], got \"0\""},
      {{"--open=x"}, "--open: must be a number in (0, 60]"},
      {{"--mode=tpu"}, "--mode: want auto, cpu or cuda, got \"tpu\""},
  };
  ExpectErrors(f, cases);
  EXPECT_NE(f.Help().find("how (auto | cpu | cuda) (default: auto)"), std::string::npos)
      << f.Help();
}

// Regression (issue 16): `--lr inf` ran with the default learning rate, because
// infinity reached the assignment JSON as null and its reader took the default.
TEST(FlagSet, NonFiniteNumbersAreRejected) {
  double x = 1, bounded = 1;
  FlagSet f("prog");
  f.Double("x", &x, "");
  f.Double("bounded", &bounded, "", 0, std::numeric_limits<double>::infinity());
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--x", "inf"}, "--x: must be a finite number, got \"inf\""},
      {{"--x=-inf"}, "--x: must be a finite number"},
      {{"--x", "nan"}, "--x: must be a finite number"},
      {{"--x", "1e999"}, "--x: must be a finite number"},
      {{"--bounded", "infinity"}, "--bounded: must be a number in [0, inf]"},
  };
  ExpectErrors(f, cases);
  EXPECT_EQ(x, 1);
  EXPECT_EQ(bounded, 1);
}

}  // namespace
}  // namespace easyscale
