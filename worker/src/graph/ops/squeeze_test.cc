#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

TEST(SqueezeTest, AxesInputAttributeOrAll) {
  const Value x = RandomValue({1, 3, 1, 2}, 1);
  testing::OpRun run =
      RunOp(MakeNode("Squeeze", {"x", "axes"}, {"y"}), {x, IntValue({1}, {-2})}, {1});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{1, 3, 2}));
  EXPECT_EQ(run.outputs[0].floats, x.floats);
  run = RunOp(MakeNode("Squeeze", {"x"}, {"y"}), {x});
  EXPECT_EQ(run.infos[0].shape, (Shape{3, 2}));
  run = RunOp(MakeNode("Squeeze", {"x"}, {"y"}, {{"axes", std::vector<int64_t>{0}}}), {x}, {}, true,
              11);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{3, 1, 2}));
}

TEST(SqueezeTest, Int64) {
  const Value x = IntValue({1, 2}, {5, 6});
  testing::OpRun run = RunOp(MakeNode("Squeeze", {"x"}, {"y"}), {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2}));
  EXPECT_EQ(run.outputs[0].ints, x.ints);
}

TEST(SqueezeTest, Gradient) {
  ExpectGradientsMatch(MakeNode("Squeeze", {"x", "axes"}, {"y"}),
                       {RandomValue({2, 1, 3}, 2), IntValue({1}, {1})}, {0}, {1});
}

TEST(SqueezeTest, Errors) {
  const Value x = RandomValue({1, 3}, 1);
  const Node n = MakeNode("Squeeze", {"x", "axes"}, {"y"});
  for (const auto& [axes, constant, what] :
       std::vector<std::tuple<std::vector<int64_t>, bool, std::string>>{
           {{1}, true, "not 1"},
           {{2}, true, "out of range"},
           {{0, -2}, true, "twice"},
           {{0}, false, "axes input is not known at load time"}}) {
    testing::OpRun run = RunOp(n, {x, IntValue({static_cast<int64_t>(axes.size())}, axes)},
                               constant ? std::vector<size_t>{1} : std::vector<size_t>{});
    EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
    EXPECT_NE(run.status.message().find(what), std::string::npos) << run.status;
    EXPECT_NE(run.status.message().find("Squeeze_0"), std::string::npos) << run.status;
  }
}

}  // namespace
}  // namespace easyscale::graph
