#include <limits>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

Node SliceNode() { return MakeNode("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"}); }

Value Ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return IntValue({n}, std::move(v));
}

// x[r, c] = 10 * r + c over [5, 6]; the slice's rows and columns as chosen by hand.
void ExpectSlice(std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
                 std::vector<int64_t> steps, const std::vector<int64_t>& rows,
                 const std::vector<int64_t>& cols) {
  std::vector<int64_t> data;
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t c = 0; c < 6; ++c) data.push_back(10 * r + c);
  }
  testing::OpRun run = RunOp(
      SliceNode(), {IntValue({5, 6}, data), Ints(starts), Ints(ends), Ints(axes), Ints(steps)},
      {1, 2, 3, 4});
  ASSERT_TRUE(run.status.ok()) << run.status;
  const int64_t nr = static_cast<int64_t>(rows.size()), nc = static_cast<int64_t>(cols.size());
  ASSERT_EQ(run.infos[0].shape, (Shape{nr, nc}));
  std::vector<int64_t> expected;
  for (int64_t r : rows) {
    for (int64_t c : cols) expected.push_back(10 * r + c);
  }
  EXPECT_EQ(run.outputs[0].ints, expected);
}

TEST(SliceTest, MatchesHandPickedIndices) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  ExpectSlice({1}, {-1}, {0}, {1}, {1, 2, 3}, {0, 1, 2, 3, 4, 5});
  ExpectSlice({-1}, {-1000}, {1}, {-2}, {0, 1, 2, 3, 4}, {5, 3, 1});
  ExpectSlice({0, 100}, {1000, 1000}, {0, 1}, {1, 1}, {0, 1, 2, 3, 4}, {});
  ExpectSlice({4, 1}, {kMin, 5}, {0, -1}, {-3, 2}, {4, 1}, {1, 3});
  ExpectSlice({-100}, {3}, {-1}, {1}, {0, 1, 2, 3, 4}, {0, 1, 2});
  ExpectSlice({kMax}, {kMin}, {1}, {-1}, {0, 1, 2, 3, 4}, {5, 4, 3, 2, 1, 0});
  ExpectSlice({2}, {2}, {0}, {1}, {}, {0, 1, 2, 3, 4, 5});
}

TEST(SliceTest, DefaultAxesAndSteps) {
  const Value x = RandomValue({3, 4}, 1);
  testing::OpRun run = RunOp(MakeNode("Slice", {"x", "starts", "ends"}, {"y"}),
                             {x, Ints({1, 1}), Ints({3, 3})}, {1, 2});
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.infos[0].shape, (Shape{2, 2}));
  EXPECT_EQ(run.outputs[0].floats,
            (std::vector<float>{x.floats[5], x.floats[6], x.floats[9], x.floats[10]}));
}

TEST(SliceTest, Gradient) {
  ExpectGradientsMatch(
      SliceNode(),
      {RandomValue({4, 5}, 2), Ints({3, 1}), Ints({0, 5}), Ints({0, 1}), Ints({-1, 2})}, {0},
      {1, 2, 3, 4});
}

TEST(SliceTest, Errors) {
  const Value x = RandomValue({3, 4}, 1);
  auto message = [&](std::vector<Value> config, std::vector<size_t> constants) {
    std::vector<Value> in = {x};
    for (Value& v : config) in.push_back(std::move(v));
    testing::OpRun run = RunOp(SliceNode(), in, constants);
    EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
    EXPECT_NE(run.status.message().find("Slice_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
  };
  EXPECT_NE(message({Ints({0}), Ints({1}), Ints({0}), Ints({0})}, {1, 2, 3, 4}).find("is 0"),
            std::string::npos);
  EXPECT_NE(
      message({Ints({0}), Ints({1}), Ints({2}), Ints({1})}, {1, 2, 3, 4}).find("out of range"),
      std::string::npos);
  EXPECT_NE(message({Ints({0, 0}), Ints({1, 1}), Ints({1, -1}), Ints({1, 1})}, {1, 2, 3, 4})
                .find("twice"),
            std::string::npos);
  EXPECT_NE(message({Ints({0}), Ints({1, 1}), Ints({0}), Ints({1})}, {1, 2, 3, 4}).find("entries"),
            std::string::npos);
  EXPECT_NE(message({Ints({0}), Ints({1}), Ints({0}), Ints({1})}, {1, 3, 4})
                .find("ends input is not known at load time"),
            std::string::npos);
}

}  // namespace
}  // namespace easyscale::graph
