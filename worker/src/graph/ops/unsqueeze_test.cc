#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

Shape UnsqueezedShape(const Shape& in, std::vector<int64_t> axes) {
  const int64_t k = static_cast<int64_t>(axes.size());
  testing::OpRun run = RunOp(MakeNode("Unsqueeze", {"x", "axes"}, {"y"}),
                             {RandomValue(in, 1), IntValue({k}, std::move(axes))}, {1});
  EXPECT_TRUE(run.status.ok()) << run.status;
  return run.infos.empty() ? Shape{} : run.infos[0].shape;
}

TEST(UnsqueezeTest, Shapes) {
  EXPECT_EQ(UnsqueezedShape({3, 4}, {0}), (Shape{1, 3, 4}));
  EXPECT_EQ(UnsqueezedShape({3, 4}, {2}), (Shape{3, 4, 1}));
  EXPECT_EQ(UnsqueezedShape({3, 4}, {-1}), (Shape{3, 4, 1}));
  EXPECT_EQ(UnsqueezedShape({3, 4}, {3, 0}), (Shape{1, 3, 4, 1}));
  EXPECT_EQ(UnsqueezedShape({3, 4}, {1, 4, 2}), (Shape{3, 1, 1, 4, 1}));
  EXPECT_EQ(UnsqueezedShape({}, {0}), (Shape{1}));
}

TEST(UnsqueezeTest, ElementsAndOldOpsetAttribute) {
  const Value x = IntValue({2}, {3, -4});
  testing::OpRun run = RunOp(
      MakeNode("Unsqueeze", {"x"}, {"y"}, {{"axes", std::vector<int64_t>{0}}}), {x}, {}, true, 11);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{1, 2}));
  EXPECT_EQ(run.outputs[0].ints, x.ints);
  const Value f = RandomValue({2, 2}, 3);
  run = RunOp(MakeNode("Unsqueeze", {"x", "axes"}, {"y"}), {f, IntValue({1}, {1})}, {1});
  EXPECT_EQ(run.outputs[0].floats, f.floats);
}

TEST(UnsqueezeTest, Gradient) {
  ExpectGradientsMatch(MakeNode("Unsqueeze", {"x", "axes"}, {"y"}),
                       {RandomValue({2, 3}, 2), IntValue({1}, {1})}, {0}, {1});
}

TEST(UnsqueezeTest, Errors) {
  const Node n = MakeNode("Unsqueeze", {"x", "axes"}, {"y"});
  const Value x = RandomValue({2}, 1);
  testing::OpRun run = RunOp(n, {x, IntValue({1}, {2})}, {1});
  EXPECT_NE(run.status.message().find("out of range"), std::string::npos) << run.status;
  run = RunOp(n, {x, IntValue({2}, {0, -3})}, {1});
  EXPECT_NE(run.status.message().find("twice"), std::string::npos) << run.status;
  run = RunOp(n, {x, IntValue({1}, {0})});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_NE(run.status.message().find("node Unsqueeze_0"), std::string::npos) << run.status;
  EXPECT_NE(run.status.message().find("axes input is not known"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
