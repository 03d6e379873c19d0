#include "easyscale/worker/layers.h"

#include <gtest/gtest.h>

#include "easyscale/worker/model.h"

namespace easyscale {
namespace {

Tensor RandomTensor(std::vector<int> shape, uint64_t seed) {
  Tensor t(std::move(shape));
  PhiloxStream r(DeriveKey(seed, 9), 0);
  for (float& v : t.data) v = 2.0f * r.NextUniform() - 1.0f;
  return t;
}

// <layer(x), w> as a scalar loss; checks d/dparam and d/dx by central differences.
void CheckLayerGradients(Layer& layer, Tensor x, double tol) {
  LayerContext ctx;
  std::vector<Tensor> buffers;
  ctx.buffers = &buffers;
  PhiloxStream init(DeriveKey(3, 3), 0);
  for (Param* p : layer.Params()) {
    for (float& v : p->value.data) v = 2.0f * init.NextUniform() - 1.0f;
  }
  Tensor y;
  layer.Forward(x, &y, ctx);
  const Tensor w = RandomTensor(y.shape, 11);
  auto loss = [&]() {
    Tensor out;
    layer.Forward(x, &out, ctx);
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += double(out.data[i]) * w.data[i];
    return l;
  };
  Tensor dx;
  layer.Forward(x, &y, ctx);
  layer.Backward(w, &dx, ctx);
  std::vector<std::pair<float*, float>> checks;
  for (Param* p : layer.Params()) {
    const Tensor grad = p->grad;
    for (size_t i = 0; i < p->value.size(); i += 7)
      checks.emplace_back(&p->value.data[i], grad.data[i]);
  }
  const Tensor dx_copy = dx;
  for (size_t i = 0; i < x.size(); i += 5) checks.emplace_back(&x.data[i], dx_copy.data[i]);
  for (auto [ptr, analytic] : checks) {
    const float keep = *ptr, h = 1e-2f;
    *ptr = keep + h;
    const double up = loss();
    *ptr = keep - h;
    const double down = loss();
    *ptr = keep;
    EXPECT_NEAR((up - down) / (2 * h), analytic, tol);
  }
}

TEST(Layers, Conv2dGradients) {
  auto conv = MakeConv2d(2, 3, 3);
  CheckLayerGradients(*conv, RandomTensor({2, 2, 6, 5}, 1), 5e-3);
}

TEST(Layers, LinearGradients) {
  auto linear = MakeLinear(7, 4);
  CheckLayerGradients(*linear, RandomTensor({3, 7}, 2), 5e-3);
}

TEST(Layers, AvgPoolGradients) {
  auto pool = MakeAvgPool2();
  CheckLayerGradients(*pool, RandomTensor({2, 2, 4, 4}, 4), 5e-3);
}

TEST(Model, BuildsBothModelsAndRejectsUnknown) {
  for (const char* name : {"mlp", "cnn"}) {
    auto m = BuildModel(name, {1, 28, 28}, 10);
    ASSERT_TRUE(m.ok()) << name;
    (*m)->InitParams(1);
    std::vector<Tensor> buffers = (*m)->InitialBuffers();
    uint64_t counter = 0;
    LayerContext ctx{true, &buffers, DeriveKey(1, 1), &counter};
    const Tensor& logits = (*m)->Forward(RandomTensor({4, 1, 28, 28}, 5), ctx);
    EXPECT_EQ(logits.shape, (std::vector<int>{4, 10}));
  }
  EXPECT_FALSE(BuildModel("resnet", {1, 28, 28}, 10).ok());
  EXPECT_FALSE(BuildModel("cnn", {1, 10, 10}, 10).ok());
}

TEST(Model, InitIsSeeded) {
  auto a = BuildModel("cnn", {1, 28, 28}, 10), b = BuildModel("cnn", {1, 28, 28}, 10);
  (*a)->InitParams(1);
  (*b)->InitParams(1);
  EXPECT_EQ((*a)->params()[0]->value.data, (*b)->params()[0]->value.data);
  (*b)->InitParams(2);
  EXPECT_NE((*a)->params()[0]->value.data, (*b)->params()[0]->value.data);
}

}  // namespace
}  // namespace easyscale
