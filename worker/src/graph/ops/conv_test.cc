#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "easyscale/worker/detmath.h"
#include "easyscale/worker/kernel_formulas.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;
using Ints = std::vector<int64_t>;

struct Geo {
  int64_t n, c, h, w, m, group, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow;
};

// Input tap (kc, p) of sample b for filter group g, 0 in the padding: the
// column entry the documented order multiplies.
float Tap(const Geo& g, const Value& x, int64_t b, int64_t grp, int64_t kc, int64_t p) {
  const int64_t cg = g.c / g.group;
  const int64_t c = kc / (g.kh * g.kw), ky = kc / g.kw % g.kh, kx = kc % g.kw;
  const int64_t iy = p / g.ow * g.sh - g.pt + ky * g.dh, ix = p % g.ow * g.sw - g.pl + kx * g.dw;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return 0.0f;
  return x.floats[((b * g.c + grp * cg + c) * g.h + iy) * g.w + ix];
}

// Y as the header's order spells it: one fma chain over kc from the bias.
std::vector<float> Reference(const Geo& g, const Value& x, const Value& w, const Value* bias) {
  const int64_t kc_n = g.c / g.group * g.kh * g.kw, mg = g.m / g.group, P = g.oh * g.ow;
  std::vector<float> y(g.n * g.m * P);
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t m = 0; m < g.m; ++m) {
      for (int64_t p = 0; p < P; ++p) {
        float acc = bias != nullptr ? bias->floats[m] : 0.0f;
        for (int64_t kc = 0; kc < kc_n; ++kc) {
          acc = detmath::Fma(w.floats[m * kc_n + kc], Tap(g, x, b, m / mg, kc, p), acc);
        }
        y[(b * g.m + m) * P + p] = acc;
      }
    }
  }
  return y;
}

// The smallest end pad giving `out` positions.
int64_t EndPad(int64_t in, int64_t out, int64_t k, int64_t s, int64_t begin, int64_t d) {
  return std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - in - begin);
}

Node ConvNode(const Geo& g, bool bias) {
  return MakeNode(
      "Conv", bias ? std::vector<std::string>{"x", "w", "b"} : std::vector<std::string>{"x", "w"},
      {"y"},
      {{"group", g.group},
       {"strides", Ints{g.sh, g.sw}},
       {"dilations", Ints{g.dh, g.dw}},
       {"pads", Ints{g.pt, g.pl, EndPad(g.h, g.oh, g.kh, g.sh, g.pt, g.dh),
                     EndPad(g.w, g.ow, g.kw, g.sw, g.pl, g.dw)}}});
}

void ExpectForwardExact(const Geo& g, bool bias) {
  Value x = RandomValue({g.n, g.c, g.h, g.w}, 1);
  Value w = RandomValue({g.m, g.c / g.group, g.kh, g.kw}, 2);
  Value b = RandomValue({g.m}, 3);
  std::vector<Value> inputs = {x, w};
  if (bias) inputs.push_back(b);
  testing::OpRun run = RunOp(ConvNode(g, bias), inputs);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{g.n, g.m, g.oh, g.ow}));
  EXPECT_EQ(run.outputs[0].floats, Reference(g, x, w, bias ? &b : nullptr));
}

TEST(ConvTest, ForwardMatchesTheDocumentedOrder) {
  // Padding, strides, dilations and groups on odd sizes; asymmetric end pads.
  ExpectForwardExact({2, 3, 7, 5, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1, 7, 5}, true);
  ExpectForwardExact({1, 4, 9, 8, 6, 2, 3, 2, 2, 3, 1, 0, 2, 1, 4, 3}, true);
  ExpectForwardExact({2, 3, 5, 6, 2, 1, 1, 1, 1, 1, 0, 0, 1, 1, 5, 6}, false);  // 1x1 direct
  ExpectForwardExact({2, 5, 7, 7, 5, 5, 3, 3, 2, 2, 1, 1, 1, 1, 4, 4}, true);   // depthwise
  ExpectForwardExact({1, 3, 6, 6, 3, 3, 3, 3, 1, 1, 2, 2, 2, 2, 6, 6}, false);  // dilated depthwise
  // Chunks of 4 samples (64 positions each), the last one partial.
  ExpectForwardExact({5, 4, 8, 8, 6, 2, 3, 3, 1, 1, 1, 1, 1, 1, 8, 8}, true);
}

TEST(ConvTest, OneDimensional) {
  Value x = RandomValue({2, 3, 9}, 1), w = RandomValue({4, 3, 3}, 2);
  Node n = MakeNode("Conv", {"x", "w"}, {"y"}, {{"pads", Ints{1, 0}}, {"strides", Ints{2}}});
  testing::OpRun run = RunOp(n, {x, w});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 4, 4}));
  Value x4 = x, w4 = w;
  x4.shape = {2, 3, 1, 9};
  w4.shape = {4, 3, 1, 3};
  EXPECT_EQ(run.outputs[0].floats,
            Reference({2, 3, 1, 9, 4, 1, 1, 3, 1, 2, 0, 1, 1, 1, 1, 4}, x4, w4, nullptr));
}

TEST(ConvTest, AutoPad) {
  // ONNX's test_conv_with_autopad_same: SAME_LOWER puts the odd pad first.
  Value x = RandomValue({1, 1, 5, 5}, 1), w = RandomValue({1, 1, 3, 3}, 2);
  Node n = MakeNode("Conv", {"x", "w"}, {"y"},
                    {{"auto_pad", std::string("SAME_LOWER")}, {"strides", Ints{2, 2}}});
  testing::OpRun run = RunOp(n, {x, w});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats,
            Reference({1, 1, 5, 5, 1, 1, 3, 3, 2, 2, 1, 1, 1, 1, 3, 3}, x, w, nullptr));
  n.attributes["auto_pad"] = std::string("VALID");
  run = RunOp(n, {x, w});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{1, 1, 2, 2}));
}

TEST(ConvTest, Gradients) {
  const Geo cases[] = {
      {2, 3, 5, 4, 2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 5, 4},
      {1, 4, 6, 5, 2, 2, 2, 3, 2, 1, 1, 0, 1, 2, 3, 2},
      {2, 3, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 5, 5},  // depthwise
      {2, 2, 3, 3, 3, 1, 1, 1, 1, 1, 0, 0, 1, 1, 3, 3},  // 1x1 direct
      {5, 2, 8, 8, 2, 1, 3, 3, 2, 2, 1, 1, 1, 1, 4, 4},  // chunks of 2 samples
  };
  for (const Geo& g : cases) {
    SCOPED_TRACE(g.group);
    ExpectGradientsMatch(ConvNode(g, true),
                         {RandomValue({g.n, g.c, g.h, g.w}, 1),
                          RandomValue({g.m, g.c / g.group, g.kh, g.kw}, 2), RandomValue({g.m}, 3)},
                         {0, 1, 2});
  }
}

// The bias-free convolution's forward pass over x and w, then its backward
// from dy into dx and dw.
void RunBackward(const Geo& g, const Value& x, const Value& w, const Value& dy, Value& dx,
                 Value& dw) {
  testing::OpRun run = RunOp(ConvNode(g, false), {x, w});
  ASSERT_TRUE(run.status.ok()) << run.status;
  dx.Reset(DType::kFloat32, x.shape);
  dw.Reset(DType::kFloat32, w.shape);
  RunContext ctx;
  run.op->Backward(ctx, {&x, &w}, {&run.outputs[0]}, {&dy}, {&dx, &dw});
}

// dW against GemmOutput over the flattened (b, p) index in the weight
// gradient's k blocks, and dX against the col2im of dcols = GemmOutput over
// the group's m, bit for bit.
void ExpectBackwardExact(const Geo& g) {
  const int64_t cg = g.c / g.group, mg = g.m / g.group, kc_n = cg * g.kh * g.kw;
  const int64_t P = g.oh * g.ow, K = g.n * P;
  const bool depthwise = cg == 1 && mg == 1;
  const int k_block = formulas::WeightGradientKBlock(g.n, P, depthwise ? g.group : mg,
                                                     depthwise ? g.kh * g.kw : kc_n);
  Value x = RandomValue({g.n, g.c, g.h, g.w}, 1), w = RandomValue({g.m, cg, g.kh, g.kw}, 2);
  Value dy = RandomValue({g.n, g.m, g.oh, g.ow}, 3);
  Value dx, dw;
  ASSERT_NO_FATAL_FAILURE(RunBackward(g, x, w, dy, dx, dw));
  std::vector<float> want_dx(x.size(), 0.0f);
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      for (int64_t kc = 0; kc < kc_n; ++kc) {
        const int64_t c = grp * cg + kc / (g.kh * g.kw), ky = kc / g.kw % g.kh, kx = kc % g.kw;
        for (int64_t p = 0; p < P; ++p) {
          const int64_t iy = p / g.ow * g.sh - g.pt + ky * g.dh;
          const int64_t ix = p % g.ow * g.sw - g.pl + kx * g.dw;
          if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
          want_dx[((b * g.c + c) * g.h + iy) * g.w + ix] +=
              formulas::GemmOutput(static_cast<int>(mg), &w.floats[grp * mg * kc_n + kc], kc_n,
                                   &dy.floats[(b * g.m + grp * mg) * P + p], P, 0.0f);
        }
      }
    }
  }
  EXPECT_EQ(dx.floats, want_dx);
  for (int64_t m = 0; m < g.m; ++m) {
    for (int64_t kc = 0; kc < kc_n; ++kc) {
      std::vector<float> cols(K), dys(K);
      for (int64_t b = 0; b < g.n; ++b) {
        for (int64_t p = 0; p < P; ++p) {
          cols[b * P + p] = Tap(g, x, b, m / mg, kc, p);
          dys[b * P + p] = dy.floats[(b * g.m + m) * P + p];
        }
      }
      ASSERT_EQ(dw.floats[m * kc_n + kc], formulas::GemmOutput(static_cast<int>(K), cols.data(), 1,
                                                               dys.data(), 1, 0.0f, k_block))
          << m << " " << kc;
    }
  }
}

TEST(ConvTest, BackwardMatchesTheDocumentedOrder) {
  // Few outputs: dW's k blocks are whole samples (one each, 1,600 rows).
  ExpectBackwardExact({3, 2, 40, 40, 2, 1, 1, 1, 1, 1, 0, 0, 1, 1, 40, 40});
  // A sample past kGemmKBlock (4,900 positions): kGemmKBlock blocks, the
  // first boundary inside sample 0.
  ExpectBackwardExact({2, 2, 70, 70, 2, 1, 1, 1, 1, 1, 0, 0, 1, 1, 70, 70});
  // 49 positions a sample run in chunks of samples, a k block each; the last
  // chunk is partial.
  ExpectBackwardExact({90, 4, 7, 7, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1, 7, 7});
  // Strides, dilations, groups; depthwise.
  ExpectBackwardExact({2, 4, 9, 8, 6, 2, 3, 2, 2, 3, 1, 0, 2, 1, 4, 3});
  ExpectBackwardExact({2, 5, 7, 7, 5, 5, 3, 3, 2, 2, 1, 1, 1, 1, 4, 4});
}

TEST(ConvTest, PointwiseInputGradientAddsItsChainsToPlusZero) {
  // One filter, so dX = fma(w, dy, +0): -1e-30 * 1e-30 rounds to -0, which
  // the sum over taps from +0 (the col2im, the device's sinks) turns into +0.
  // 16x16 planes run one sample a chunk (the product written into dX
  // directly), 4x4 ones chunks of samples (through the columns).
  for (const int64_t side : {16, 4}) {
    SCOPED_TRACE(side);
    const Geo g{3, 2, side, side, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, side, side};
    Value x = RandomValue({g.n, g.c, g.h, g.w}, 1), w = RandomValue({g.m, g.c, 1, 1}, 2);
    Value dy = RandomValue({g.n, g.m, g.oh, g.ow}, 3);
    std::fill(w.floats.begin(), w.floats.end(), -1e-30f);
    std::fill(dy.floats.begin(), dy.floats.end(), 1e-30f);
    Value dx, dw;
    ASSERT_NO_FATAL_FAILURE(RunBackward(g, x, w, dy, dx, dw));
    for (size_t i = 0; i < dx.size(); ++i) {
      ASSERT_FALSE(std::signbit(dx.floats[i])) << "dX element " << i << " is -0";
    }
  }
}

TEST(ConvTest, FactoryErrors) {
  auto error = [](std::map<std::string, Attribute> attrs, Shape x, Shape w, Shape b = {}) {
    std::vector<std::string> names = {"x", "w"};
    std::vector<Value> in = {RandomValue(x, 1), RandomValue(w, 2)};
    if (!b.empty()) {
      names.push_back("b");
      in.push_back(RandomValue(b, 3));
    }
    testing::OpRun run = RunOp(MakeNode("Conv", names, {"y"}, std::move(attrs)), in);
    EXPECT_FALSE(run.status.ok());
    EXPECT_NE(run.status.message().find("Conv_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
  };
  EXPECT_NE(error({{"group", int64_t{2}}}, {1, 3, 5, 5}, {2, 3, 3, 3}).find("group"),
            std::string::npos);
  EXPECT_NE(error({}, {1, 3, 5, 5}, {2, 3, 3}).find("W"), std::string::npos);
  EXPECT_NE(error({}, {1, 3, 5, 5}, {2, 3, 3, 3}, {3}).find("B"), std::string::npos);
  EXPECT_NE(error({{"kernel_shape", Ints{2, 2}}}, {1, 3, 5, 5}, {2, 3, 3, 3}).find("kernel_shape"),
            std::string::npos);
  EXPECT_NE(error({{"auto_pad", std::string("SAME")}}, {1, 3, 5, 5}, {2, 3, 3, 3}).find("auto_pad"),
            std::string::npos);
  EXPECT_NE(error({{"strides", Ints{0, 1}}}, {1, 3, 5, 5}, {2, 3, 3, 3}).find("strides"),
            std::string::npos);
  EXPECT_NE(error({{"pads", Ints{1, 1}}}, {1, 3, 5, 5}, {2, 3, 3, 3}).find("pads"),
            std::string::npos);
  EXPECT_NE(error({}, {1, 3, 2, 5}, {2, 3, 3, 3}).find("kernel"), std::string::npos);
  EXPECT_NE(error({}, {1, 3, 2, 2, 2}, {2, 3, 1, 1, 1}).find("X"), std::string::npos);
  EXPECT_NE(error({}, {3}, {3}).find("X"), std::string::npos);
}

}  // namespace
}  // namespace easyscale::graph
