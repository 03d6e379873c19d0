#include "easyscale/worker/model.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

Tensor RandomTensor(std::vector<int> shape, uint64_t seed) {
  Tensor t(std::move(shape));
  PhiloxStream r(DeriveKey(seed, 9), 0);
  for (float& v : t.data) v = 2.0f * r.NextUniform() - 1.0f;
  return t;
}

std::vector<std::string> Names(const Model& m) {
  std::vector<std::string> names;
  for (const Param* p : m.params()) names.push_back(p->name);
  return names;
}

TEST(Model, BuildsBothModels) {
  for (const char* name : {"mlp", "cnn"}) {
    auto m = BuildModel(name, {1, 28, 28}, 10, 4);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    (*m)->InitParams(1);
    std::vector<Tensor> buffers = (*m)->InitialBuffers();
    uint64_t counter = 0;
    PassContext ctx{true, &buffers, DeriveKey(1, 1), &counter};
    const Tensor& logits = (*m)->Forward(RandomTensor({4, 1, 28, 28}, 5), ctx);
    EXPECT_EQ(logits.shape, (std::vector<int>{4, 10}));
    EXPECT_GT(counter, 0u) << name << ": dropout draws from the EST's stream";
  }
}

// Named and shaped as the PyTorch Sequential's state_dict, so the trained
// model loads into PyTorch.
TEST(Model, CnnHasPyTorchNamesAndShapes) {
  auto m = BuildModel("cnn", {1, 28, 28}, 10, 2);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Names(**m), (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                                  "4.weight", "4.bias", "5.weight", "5.bias",
                                                  "10.weight", "10.bias", "12.weight", "12.bias"}));
  EXPECT_EQ((*m)->params()[0]->value.shape, (std::vector<int>{8, 1, 5, 5}));
  EXPECT_EQ((*m)->params()[8]->value.shape, (std::vector<int>{64, 256}));
  EXPECT_EQ((*m)->BufferNames(), (std::vector<std::string>{"1.running_mean", "1.running_var",
                                                           "5.running_mean", "5.running_var"}));
  const std::vector<Tensor> buffers = (*m)->InitialBuffers();
  EXPECT_EQ(buffers[0].data, std::vector<float>(8, 0.0f));
  EXPECT_EQ(buffers[1].data, std::vector<float>(8, 1.0f));
  auto mlp = BuildModel("mlp", {1, 28, 28}, 10, 2);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ(Names(**mlp), (std::vector<std::string>{"2.weight", "2.bias", "5.weight", "5.bias"}));
  EXPECT_EQ((*mlp)->params()[0]->value.shape, (std::vector<int>{128, 196}));
}

TEST(Model, RejectsUnknownNamesAndBadSizes) {
  auto message = [](const std::string& name, std::vector<int> chw) {
    auto m = BuildModel(name, chw, 10, 4);
    return m.ok() ? std::string("ok") : std::string(m.status().message());
  };
  EXPECT_EQ(message("resnet", {1, 28, 28}), "unknown model \"resnet\" (want mlp or cnn)");
  EXPECT_EQ(message("cnn", {1, 10, 10}),
            "cnn: input must be at least 20x20 with H-4, W-4 divisible by 4");
  EXPECT_EQ(message("mlp", {1, 27, 28}), "mlp: input H and W must be even");
  EXPECT_NE(message("mlp", {784}).find("not images"), std::string::npos);
}

// Weights and biases from the seed, U(-1/sqrt(fan_in), 1/sqrt(fan_in));
// BatchNorm's gamma 1 and beta 0.
TEST(Model, InitIsSeeded) {
  auto a = BuildModel("cnn", {1, 28, 28}, 10, 2), b = BuildModel("cnn", {1, 28, 28}, 10, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  (*a)->InitParams(1);
  (*b)->InitParams(1);
  for (size_t i = 0; i < (*a)->params().size(); ++i)
    EXPECT_EQ((*a)->params()[i]->value.data, (*b)->params()[i]->value.data) << i;
  const float bound = 1.0f / 5.0f;  // conv 0: fan_in 1*5*5
  for (float v : (*a)->params()[0]->value.data) EXPECT_LE(std::abs(v), bound);
  EXPECT_EQ((*a)->params()[2]->value.data, std::vector<float>(8, 1.0f));
  EXPECT_EQ((*a)->params()[3]->value.data, std::vector<float>(8, 0.0f));
  (*b)->InitParams(2);
  EXPECT_NE((*a)->params()[0]->value.data, (*b)->params()[0]->value.data);
}

}  // namespace
}  // namespace easyscale
