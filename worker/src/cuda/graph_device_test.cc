// The graph ops' device halves against their CPU kernels: each op runs on the
// CPU and on the CUDA backend from the same inputs and output gradients, and
// every output and input gradient must be the same bits. Shapes: the built-in
// models', and odd ones (strides, pads, dilations, groups, a weight gradient
// over more than one GEMM k block, broadcasting both ways, keepdims, negative
// axes, strided and reversed slices).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "easyscale/worker/est_worker.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;
using testing::ScalarValue;

class GraphDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda::UsableDeviceCount(&why) == 0) GTEST_SKIP() << "needs a CUDA GPU: " << why;
    auto k = MakeKernelBackend("cuda");
    ASSERT_TRUE(k.ok()) << k.status();
    device_ = std::move(*k);
  }

  template <typename T = float>
  std::vector<T> Download(RunContext& ctx, const Value& v) {
    TensorOf<T> t({static_cast<int>(v.size())});
    device_->Copy(v.bytes(), DeviceData<T>(ctx, v), device_->At(t));
    device_->Download(t);
    return t.data;
  }

  // Runs `node` forward and backward on both, the output gradients from
  // fixed pseudo-random weights, and compares the bits.
  void ExpectSameBits(const Node& node, std::vector<Value> inputs,
                      const std::vector<size_t>& constant_inputs = {}, bool training = true,
                      int64_t opset = 17) {
    SCOPED_TRACE(node.op);
    const testing::FactoryInputs factory(node, inputs, constant_inputs);
    auto cpu_op = factory.Make(node, opset);
    auto dev_op = factory.Make(node, opset);
    ASSERT_TRUE(cpu_op.ok()) << cpu_op.status();
    ASSERT_TRUE((*dev_op)->RunsOnDevice()) << node.op << " has no device half";
    const std::vector<ValueInfo> out_infos = (*cpu_op)->OutputInfos();

    RunContext cpu_ctx, dev_ctx;
    DeviceWorkspace workspace;
    dev_ctx.workspace = &workspace;
    uint64_t cpu_counter = 7, dev_counter = 7;
    cpu_ctx.training = dev_ctx.training = training;
    cpu_ctx.dropout_key = dev_ctx.dropout_key = PhiloxKey{0x1234, 0x5678};
    cpu_ctx.dropout_counter = &cpu_counter;
    dev_ctx.dropout_counter = &dev_counter;
    dev_ctx.device = device_.get();

    std::vector<Value> dev_inputs = inputs;
    for (Value& v : dev_inputs) {
      const void* host = v.dtype == DType::kFloat32 ? static_cast<const void*>(v.floats.data())
                                                    : static_cast<const void*>(v.ints.data());
      device_->UploadBytes(host, v.bytes(), v.mirror);
    }
    std::vector<Value> cpu_out(out_infos.size()), dev_out(out_infos.size()), weights;
    std::vector<const Value*> cpu_in, dev_in, cpu_o, dev_o, dout;
    std::vector<Value*> cpu_outp, dev_outp;
    for (size_t i = 0; i < inputs.size(); ++i) {
      cpu_in.push_back(&inputs[i]);
      dev_in.push_back(&dev_inputs[i]);
    }
    for (size_t o = 0; o < out_infos.size(); ++o) {
      const bool present = o < node.outputs.size() && !node.outputs[o].empty();
      cpu_out[o].Reset(out_infos[o].dtype, out_infos[o].shape);
      dev_out[o].Reset(out_infos[o].dtype, out_infos[o].shape);
      cpu_outp.push_back(present ? &cpu_out[o] : nullptr);
      dev_outp.push_back(present ? &dev_out[o] : nullptr);
    }
    (*cpu_op)->Forward(cpu_ctx, cpu_in, cpu_outp);
    (*dev_op)->Forward(dev_ctx, dev_in, dev_outp);
    for (size_t o = 0; o < out_infos.size(); ++o) {
      if (cpu_outp[o] == nullptr) continue;
      if (out_infos[o].dtype != DType::kFloat32) {
        EXPECT_EQ(cpu_out[o].ints, Download<int64_t>(dev_ctx, dev_out[o])) << "output " << o;
        continue;
      }
      ExpectBitsEqual(cpu_out[o].floats, Download(dev_ctx, dev_out[o]),
                      "output " + std::to_string(o));
    }
    EXPECT_EQ(cpu_counter, dev_counter);
    if (!training) return;  // evaluation has no backward pass

    // Backward from weights on output 0 only (the others are statistics).
    Value w = RandomValue(out_infos[0].shape, 99);
    Value dev_w = w;
    device_->UploadBytes(w.floats.data(), w.bytes(), dev_w.mirror);
    std::vector<const Value*> cpu_dout(out_infos.size(), nullptr),
        dev_dout(out_infos.size(), nullptr);
    cpu_dout[0] = &w;
    dev_dout[0] = &dev_w;
    std::vector<Value> cpu_grads(inputs.size()), dev_grads(inputs.size());
    std::vector<Value*> cpu_din(inputs.size(), nullptr), dev_din(inputs.size(), nullptr);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].dtype != DType::kFloat32 || !(*cpu_op)->HasGradient(i)) continue;
      cpu_grads[i].Reset(DType::kFloat32, inputs[i].shape);
      dev_grads[i].Reset(DType::kFloat32, inputs[i].shape);
      device_->Zero(dev_grads[i].bytes(), DeviceData(dev_ctx, dev_grads[i]));
      cpu_din[i] = &cpu_grads[i];
      dev_din[i] = &dev_grads[i];
    }
    std::vector<const Value*> cpu_outc(cpu_outp.begin(), cpu_outp.end());
    std::vector<const Value*> dev_outc(dev_outp.begin(), dev_outp.end());
    (*cpu_op)->Backward(cpu_ctx, cpu_in, cpu_outc, cpu_dout, cpu_din);
    (*dev_op)->Backward(dev_ctx, dev_in, dev_outc, dev_dout, dev_din);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (cpu_din[i] == nullptr) continue;
      ExpectBitsEqual(cpu_grads[i].floats, Download(dev_ctx, dev_grads[i]),
                      "gradient of input " + std::to_string(i));
    }
  }

  static void ExpectBitsEqual(const std::vector<float>& cpu, const std::vector<float>& dev,
                              const std::string& what) {
    ASSERT_EQ(cpu.size(), dev.size()) << what;
    size_t differ = 0, first = cpu.size();
    for (size_t e = 0; e < cpu.size(); ++e) {
      if (std::memcmp(&cpu[e], &dev[e], sizeof(float)) != 0) {
        if (differ++ == 0) first = e;
      }
    }
    EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << cpu.size()
                          << " elements differ, first at " << first << " (cpu "
                          << (first < cpu.size() ? cpu[first] : 0) << ", cuda "
                          << (first < cpu.size() ? dev[first] : 0) << ")";
  }

  std::unique_ptr<KernelBackend> device_;
};

using Ints = std::vector<int64_t>;

TEST_F(GraphDeviceTest, Conv) {
  // The built-in cnn's first layer, strided and padded, dilated, 1x1, grouped,
  // depthwise, and a weight gradient over 8 * 28 * 28 > 4096 k (two blocks).
  ExpectSameBits(
      MakeNode("Conv", {"x", "w", "b"}, {"y"}),
      {RandomValue({4, 1, 28, 28}, 1), RandomValue({8, 1, 5, 5}, 2), RandomValue({8}, 3)});
  ExpectSameBits(MakeNode("Conv", {"x", "w", "b"}, {"y"},
                          {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
                 {RandomValue({2, 3, 9, 9}, 4), RandomValue({4, 3, 3, 3}, 5), RandomValue({4}, 6)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}, {{"dilations", Ints{2, 2}}}),
                 {RandomValue({2, 2, 9, 8}, 7), RandomValue({3, 2, 3, 3}, 8)});
  ExpectSameBits(
      MakeNode("Conv", {"x", "w", "b"}, {"y"}),
      {RandomValue({3, 4, 5, 5}, 9), RandomValue({6, 4, 1, 1}, 10), RandomValue({6}, 11)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}, {{"group", int64_t{2}}}),
                 {RandomValue({2, 4, 6, 6}, 12), RandomValue({6, 2, 3, 3}, 13)});
  ExpectSameBits(
      MakeNode("Conv", {"x", "w"}, {"y"}, {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}),
      {RandomValue({2, 3, 8, 8}, 14), RandomValue({3, 1, 3, 3}, 15)});
  ExpectSameBits(
      MakeNode("Conv", {"x", "w", "b"}, {"y"}),
      {RandomValue({8, 2, 30, 30}, 16), RandomValue({3, 2, 3, 3}, 17), RandomValue({3}, 18)});
  // Whole and partial tiles of the implicit GEMMs: more filters than a
  // tile's rows, images whose positions are no multiple of the slice depth
  // (k running across samples), a strided 1x1 kernel (taps reading no output),
  // a 1x1 kernel, a forward product over two k blocks (C*KH*KW > 4096), and a
  // chain over more filters than one k block (the input gradient's fallback).
  ExpectSameBits(
      MakeNode("Conv", {"x", "w", "b"}, {"y"}, {{"pads", Ints{1, 1, 1, 1}}}),
      {RandomValue({2, 32, 14, 14}, 19), RandomValue({160, 32, 3, 3}, 20), RandomValue({160}, 21)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}, {{"strides", Ints{2, 2}}}),
                 {RandomValue({3, 64, 9, 9}, 22), RandomValue({130, 64, 1, 1}, 23)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}),
                 {RandomValue({4, 136, 6, 6}, 24), RandomValue({140, 136, 1, 1}, 25)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}, {{"pads", Ints{1, 1, 1, 1}}}),
                 {RandomValue({2, 460, 3, 3}, 26), RandomValue({5, 460, 3, 3}, 27)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}),
                 {RandomValue({1, 2, 2, 2}, 28), RandomValue({4100, 2, 1, 1}, 29)});
  // Large enough for each tile shape of cuda::tiled::WithTiles: 128x128 tiles
  // for the forward product (256 filters) and for the input gradient (130
  // channels), 64x128 for 64 filters.
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}, {{"pads", Ints{1, 1, 1, 1}}}),
                 {RandomValue({4, 8, 66, 66}, 35), RandomValue({256, 8, 3, 3}, 36)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}, {{"pads", Ints{1, 1, 1, 1}}}),
                 {RandomValue({4, 130, 66, 66}, 37), RandomValue({8, 130, 3, 3}, 38)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}, {{"pads", Ints{1, 1, 1, 1}}}),
                 {RandomValue({8, 4, 66, 66}, 39), RandomValue({64, 4, 3, 3}, 40)});
  // Strided input gradients, one product per stride phase: 3x3 and 1x1 in
  // 128x128 tiles (a phase of 4 x 66 x 66 elements), stride 3 over sizes it
  // does not divide, stride with dilation.
  ExpectSameBits(
      MakeNode("Conv", {"x", "w"}, {"y"}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      {RandomValue({4, 130, 132, 132}, 41), RandomValue({8, 130, 3, 3}, 42)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}, {{"strides", Ints{2, 2}}}),
                 {RandomValue({4, 130, 132, 132}, 43), RandomValue({8, 130, 1, 1}, 44)});
  ExpectSameBits(
      MakeNode("Conv", {"x", "w"}, {"y"}, {{"strides", Ints{3, 3}}, {"pads", Ints{1, 0, 2, 1}}}),
      {RandomValue({2, 4, 10, 11}, 45), RandomValue({5, 4, 3, 3}, 46)});
  ExpectSameBits(
      MakeNode("Conv", {"x", "w"}, {"y"},
               {{"strides", Ints{2, 2}}, {"dilations", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}),
      {RandomValue({2, 3, 9, 9}, 47), RandomValue({4, 3, 3, 3}, 48)});
  // Pointwise (1x1, stride 1, no padding: the planes read directly, the
  // input gradient as one product): grouped, 16-byte copies (positions a
  // multiple of 4) in 128x128 tiles, single copies (130 channels) in 128x128
  // input-gradient tiles, a forward product over two k blocks.
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}, {{"group", int64_t{2}}}),
                 {RandomValue({2, 8, 6, 6}, 49), RandomValue({6, 4, 1, 1}, 50)});
  ExpectSameBits(
      MakeNode("Conv", {"x", "w", "b"}, {"y"}),
      {RandomValue({4, 64, 64, 64}, 51), RandomValue({256, 64, 1, 1}, 52), RandomValue({256}, 53)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}),
                 {RandomValue({4, 130, 63, 63}, 54), RandomValue({8, 130, 1, 1}, 55)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"}),
                 {RandomValue({1, 4100, 2, 3}, 56), RandomValue({3, 4100, 1, 1}, 57)});
  // Depthwise: strided with a weight gradient over two k blocks, and 5x5.
  ExpectSameBits(
      MakeNode("Conv", {"x", "w", "b"}, {"y"},
               {{"group", int64_t{3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      {RandomValue({5, 3, 64, 64}, 30), RandomValue({3, 1, 3, 3}, 31), RandomValue({3}, 32)});
  ExpectSameBits(
      MakeNode("Conv", {"x", "w"}, {"y"}, {{"group", int64_t{4}}, {"pads", Ints{2, 2, 2, 2}}}),
      {RandomValue({2, 4, 9, 9}, 33), RandomValue({4, 1, 5, 5}, 34)});
  // Depthwise weight-gradient k blocks of 4,096 starting mid-row and across a
  // sample (planes of 4,900 positions); planes under 32 positions with a 3x5
  // kernel, stride 3 and dilation 2; stride 2 over an odd height.
  ExpectSameBits(
      MakeNode("Conv", {"x", "w"}, {"y"}, {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}),
      {RandomValue({2, 3, 70, 70}, 58), RandomValue({3, 1, 3, 3}, 59)});
  ExpectSameBits(MakeNode("Conv", {"x", "w"}, {"y"},
                          {{"group", int64_t{4}},
                           {"strides", Ints{3, 2}},
                           {"dilations", Ints{2, 1}},
                           {"pads", Ints{2, 1, 2, 1}}}),
                 {RandomValue({3, 4, 5, 5}, 60), RandomValue({4, 1, 3, 5}, 61)});
  ExpectSameBits(
      MakeNode("Conv", {"x", "w", "b"}, {"y"},
               {{"group", int64_t{5}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      {RandomValue({2, 5, 9, 10}, 62), RandomValue({5, 1, 3, 3}, 63), RandomValue({5}, 64)});
}

TEST_F(GraphDeviceTest, BatchNormalization) {
  // Plain, and with its Relu or Clip (graph/fusion.h's BatchNormalization+Relu
  // and +Clip: the Clip's bounds as constant inputs 5 and 6).
  for (const char* op :
       {"BatchNormalization", "BatchNormalization+Relu", "BatchNormalization+Clip"}) {
    const bool clip = std::string(op) == "BatchNormalization+Clip";
    std::vector<std::string> inputs = {"x", "s", "b", "m", "v"};
    if (clip) inputs.insert(inputs.end(), {"lo", "hi"});
    const Node train = MakeNode(op, inputs, {"y", "rm", "rv"},
                                {{"training_mode", int64_t{1}}, {"momentum", 0.9f}});
    Value var = RandomValue({3}, 5);
    for (float& f : var.floats) f = f + 1.5f;
    std::vector<Value> in = {RandomValue({4, 3, 5, 5}, 1), RandomValue({3}, 2), RandomValue({3}, 3),
                             RandomValue({3}, 4), var};
    std::vector<size_t> constants;
    if (clip) {
      in.insert(in.end(), {ScalarValue(0.0f), ScalarValue(0.5f)});
      constants = {5, 6};
    }
    ExpectSameBits(train, in, constants);
    // Evaluation uses the running statistics.
    ExpectSameBits(train, in, constants, /*training=*/false);
  }
}

TEST_F(GraphDeviceTest, Pools) {
  ExpectSameBits(
      MakeNode("MaxPool", {"x"}, {"y"}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}),
      {RandomValue({2, 8, 24, 24}, 1)});
  ExpectSameBits(MakeNode("MaxPool", {"x"}, {"y"},
                          {{"kernel_shape", Ints{3, 3}},
                           {"strides", Ints{2, 2}},
                           {"pads", Ints{1, 1, 1, 1}},
                           {"ceil_mode", int64_t{1}}}),
                 {RandomValue({2, 3, 9, 10}, 2)});
  ExpectSameBits(MakeNode("AveragePool", {"x"}, {"y"},
                          {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}),
                 {RandomValue({2, 1, 28, 28}, 3)});
  ExpectSameBits(MakeNode("AveragePool", {"x"}, {"y"},
                          {{"kernel_shape", Ints{3, 3}},
                           {"pads", Ints{1, 1, 1, 1}},
                           {"count_include_pad", int64_t{1}}}),
                 {RandomValue({2, 3, 7, 6}, 4)});
}

TEST_F(GraphDeviceTest, Gemm) {
  ExpectSameBits(MakeNode("Gemm", {"a", "b", "c"}, {"y"}, {{"transB", int64_t{1}}}),
                 {RandomValue({32, 196}, 1), RandomValue({128, 196}, 2), RandomValue({128}, 3)});
  ExpectSameBits(MakeNode("Gemm", {"a", "b", "c"}, {"y"},
                          {{"transA", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}}),
                 {RandomValue({7, 5}, 4), RandomValue({7, 3}, 5), RandomValue({5, 1}, 6)});
  ExpectSameBits(MakeNode("Gemm", {"a", "b"}, {"y"}),
                 {RandomValue({6, 9}, 7), RandomValue({9, 4}, 8)});
}

TEST_F(GraphDeviceTest, ElementWiseAndLayout) {
  // One element a thread (105) and four through float4s (120).
  for (const char* op : {"Relu", "Erf", "Gelu", "Tanh", "Sigmoid"}) {
    ExpectSameBits(MakeNode(op, {"x"}, {"y"}), {RandomValue({3, 5, 7}, 1)});
    ExpectSameBits(MakeNode(op, {"x"}, {"y"}), {RandomValue({2, 6, 10}, 4)});
  }
  Value positive = RandomValue({4, 9}, 2);
  for (float& f : positive.floats) f = f + 1.25f;
  ExpectSameBits(MakeNode("Sqrt", {"x"}, {"y"}), {positive});
  ExpectSameBits(MakeNode("Flatten", {"x"}, {"y"}), {RandomValue({4, 16, 4, 4}, 3)});
}

// A Dropout's constant inputs: ratio 0.25 and training_mode true.
Value DropoutRatio() {
  Value ratio;
  ratio.Reset(DType::kFloat32, {});
  ratio.floats = {0.25f};
  return ratio;
}
Value DropoutTrainingMode() {
  Value mode;
  mode.Reset(DType::kBool, {});
  mode.ints = {1};
  return mode;
}

TEST_F(GraphDeviceTest, Dropout) {
  const Value ratio = DropoutRatio(), mode = DropoutTrainingMode();
  for (const Node& n : {MakeNode("Dropout", {"x", "r", "t"}, {"y"}),
                        MakeNode("Dropout", {"x", "r", "t"}, {"y", "mask"})}) {
    ExpectSameBits(n, {RandomValue({4, 256}, 1), ratio, mode}, {1, 2});
    ExpectSameBits(n, {RandomValue({4, 256}, 1), ratio, mode}, {1, 2}, /*training=*/false);
  }
  // A residual connection (graph/fusion.h's Dropout+Add): float4 moves and a
  // size that is no multiple of four.
  for (const Shape& shape : {Shape{4, 256}, Shape{3, 7}}) {
    const Node n = MakeNode("Dropout+Add", {"x", "r", "t", "p"}, {"y"});
    ExpectSameBits(n, {RandomValue(shape, 2), ratio, mode, RandomValue(shape, 3)}, {1, 2});
    ExpectSameBits(n, {RandomValue(shape, 2), ratio, mode, RandomValue(shape, 3)}, {1, 2},
                   /*training=*/false);
  }
}

// A value of `shape` with elements in [lo, lo + 2) (positive bases, variances).
Value Shifted(Shape shape, uint32_t seed, float lo) {
  Value v = RandomValue(std::move(shape), seed);
  for (float& f : v.floats) f = f + 1.0f + lo;
  return v;
}

TEST_F(GraphDeviceTest, BinaryElementwise) {
  // ResNet-18's and MobileNetV2's residual Add, the encoder's bias Adds
  // ([32] + [B, 16, 32]), position Add ([B, 16, 32] + [1, 16, 32]) and
  // scalar Mul and Div; broadcasting both ways at once, and a scalar output.
  ExpectSameBits(MakeNode("Add", {"a", "b"}, {"y"}),
                 {RandomValue({2, 64, 8, 8}, 1), RandomValue({2, 64, 8, 8}, 2)});
  ExpectSameBits(MakeNode("Add", {"a", "b"}, {"y"}),
                 {RandomValue({32}, 3), RandomValue({3, 16, 32}, 4)});
  ExpectSameBits(MakeNode("Add", {"a", "b"}, {"y"}),
                 {RandomValue({3, 16, 32}, 5), RandomValue({1, 16, 32}, 6)});
  // Bias gradients over many rows (several of the row kernel's chunks, a
  // partial column tile), and a Mul whose term reads the other operand.
  ExpectSameBits(MakeNode("Add", {"a", "b"}, {"y"}),
                 {RandomValue({600, 45}, 15), RandomValue({45}, 16)});
  // Blocks of whole samples' rows (16 of 8 rows, formulas::ColumnSumBlockRows)
  // in the wide chains' grid (32 outputs a block, a partial last one).
  ExpectSameBits(MakeNode("Add", {"a", "b"}, {"y"}),
                 {RandomValue({16, 8, 1100}, 19), RandomValue({1100}, 20)});
  ExpectSameBits(MakeNode("Mul", {"a", "b"}, {"y"}),
                 {RandomValue({3, 1, 40, 7}, 17), RandomValue({7}, 18)});
  ExpectSameBits(MakeNode("Mul", {"a", "b"}, {"y"}),
                 {RandomValue({3, 4, 16, 16}, 7), ScalarValue(0.35f)});
  ExpectSameBits(MakeNode("Div", {"a", "b"}, {"y"}),
                 {RandomValue({3, 16, 128}, 8), ScalarValue(1.41f)});
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    ExpectSameBits(MakeNode(op, {"a", "b"}, {"y"}),
                   {RandomValue({4, 1, 5}, 9), Shifted({3, 1}, 10, 0.5f)});
    ExpectSameBits(MakeNode(op, {"a", "b"}, {"y"}),
                   {RandomValue({2, 1, 3, 1}, 11), Shifted({5, 1, 4}, 12, 0.5f)});
  }
  ExpectSameBits(MakeNode("Pow", {"a", "b"}, {"y"}),
                 {Shifted({3, 7}, 13, 0.25f), RandomValue({7}, 14)});
  ExpectSameBits(MakeNode("Mul", {"a", "b"}, {"y"}), {ScalarValue(1.5f), ScalarValue(-2.25f)});
}

TEST_F(GraphDeviceTest, Reductions) {
  ExpectSameBits(MakeNode("GlobalAveragePool", {"x"}, {"y"}), {RandomValue({2, 512, 7, 7}, 1)});
  ExpectSameBits(MakeNode("GlobalAveragePool", {"x"}, {"y"}), {RandomValue({3, 5, 4, 3, 2}, 2)});
  // The encoder's pooling over the sequence, keepdims, negative and
  // several axes, and every axis.
  ExpectSameBits(
      MakeNode("ReduceMean", {"x"}, {"y"}, {{"axes", Ints{1}}, {"keepdims", int64_t{0}}}),
      {RandomValue({3, 16, 32}, 3)});
  ExpectSameBits(MakeNode("ReduceMean", {"x"}, {"y"}, {{"axes", Ints{-1, 0}}}),
                 {RandomValue({4, 3, 5}, 4)});
  ExpectSameBits(MakeNode("ReduceMean", {"x"}, {"y"}, {{"axes", Ints{2, 3}}}),
                 {RandomValue({2, 8, 5, 6}, 5)});
  ExpectSameBits(MakeNode("ReduceMean", {"x"}, {"y"}, {{"keepdims", int64_t{0}}}),
                 {RandomValue({3, 4, 5}, 6)});
}

TEST_F(GraphDeviceTest, Clip) {
  // MobileNetV2's ReLU6 (bounds as constant inputs), one bound, attributes.
  const Node both = MakeNode("Clip", {"x", "lo", "hi"}, {"y"});
  ExpectSameBits(both, {Shifted({2, 32, 8, 8}, 1, -4.0f), ScalarValue(0.0f), ScalarValue(0.5f)},
                 {1, 2});
  ExpectSameBits(MakeNode("Clip", {"x", "lo"}, {"y"}),
                 {RandomValue({5, 7}, 2), ScalarValue(-0.25f)}, {1});
  ExpectSameBits(MakeNode("Clip", {"x"}, {"y"}, {{"min", -0.5f}, {"max", 0.25f}}),
                 {RandomValue({5, 7}, 3)}, {}, true, /*opset=*/6);
}

TEST_F(GraphDeviceTest, Softmax) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    // The encoder's attention rows, a middle axis (rows `inner` apart), and
    // opset 11's 2-D view.
    ExpectSameBits(MakeNode(op, {"x"}, {"y"}, {{"axis", int64_t{-1}}}),
                   {RandomValue({3, 4, 16, 16}, 1)});
    // A warp's 32 rows at a time (the forward staged, the gradient in
    // 32-column chunks, 8 rows' loads at a time): the encoder's rows of 128,
    // a partial last group (105 rows: 9, one past a load batch), odd rows,
    // rows shorter than a warp, a chunk of one column (33), and rows too long
    // to stage (384 and more).
    ExpectSameBits(MakeNode(op, {"x"}, {"y"}, {{"axis", int64_t{-1}}}),
                   {RandomValue({3, 5, 7, 128}, 4)});
    for (int n : {1, 5, 33, 383, 384}) {
      ExpectSameBits(MakeNode(op, {"x"}, {"y"}, {{"axis", int64_t{-1}}}),
                     {RandomValue({70, n}, 5 + n)});
    }
    ExpectSameBits(MakeNode(op, {"x"}, {"y"}, {{"axis", int64_t{1}}}), {RandomValue({3, 7, 5}, 2)});
    ExpectSameBits(MakeNode(op, {"x"}, {"y"}, {{"axis", int64_t{1}}}), {RandomValue({3, 4, 5}, 3)},
                   {}, true, /*opset=*/11);
  }
  // Mul+Softmax (graph/fusion.h): the attention's scale on staged rows of 128
  // and 33, and on rows `inner` apart (scaled by a pass of their own).
  for (const auto& [shape, axis] :
       {std::pair{Shape{3, 5, 7, 128}, int64_t{-1}}, std::pair{Shape{70, 33}, int64_t{-1}},
        std::pair{Shape{3, 7, 5}, int64_t{1}}}) {
    ExpectSameBits(MakeNode("Mul+Softmax", {"x"}, {"y"}, {{"axis", axis}, {"scale", 0.125f}}),
                   {RandomValue(shape, 9)});
  }
  // Softmax+Dropout (graph/fusion.h): staged rows dropped as they are stored
  // (128: whole rounds of 256; 33 and 5: rounds across rows and a partial
  // last one), rows too long to stage and rows `inner` apart (cuda::Dropout
  // after the rows), scaled or not, training and evaluation.
  const Value ratio = DropoutRatio(), mode = DropoutTrainingMode();
  for (const auto& [shape, axis] :
       {std::pair{Shape{3, 5, 7, 128}, int64_t{-1}}, std::pair{Shape{70, 33}, int64_t{-1}},
        std::pair{Shape{70, 5}, int64_t{-1}}, std::pair{Shape{9, 384}, int64_t{-1}},
        std::pair{Shape{3, 7, 5}, int64_t{1}}}) {
    for (const bool scaled : {false, true}) {
      Node n = MakeNode("Softmax+Dropout", {"x", "r", "t"}, {"d", "y"}, {{"axis", axis}});
      if (scaled) n.attributes["scale"] = 0.125f;
      for (const bool training : {true, false}) {
        ExpectSameBits(n, {RandomValue(shape, 10), ratio, mode}, {1, 2}, training);
      }
    }
  }
}

TEST_F(GraphDeviceTest, LayerNormalization) {
  ExpectSameBits(MakeNode("LayerNormalization", {"x", "s", "b"}, {"y"}, {{"axis", int64_t{-1}}}),
                 {RandomValue({3, 16, 32}, 1), RandomValue({32}, 2), RandomValue({32}, 3)});
  // Two normalized dimensions, no B, the statistics outputs.
  ExpectSameBits(
      MakeNode("LayerNormalization", {"x", "s"}, {"y", "mean", "invstd"}, {{"axis", int64_t{1}}}),
      {RandomValue({4, 5, 6}, 4), RandomValue({5, 6}, 5)});
  ExpectSameBits(MakeNode("LayerNormalization", {"x"}, {"y"}), {RandomValue({7, 9}, 6)});
  // The staged rows (forward and input gradient): the encoder's 768 in a
  // count that is no multiple of a block's 8 or 4, the longest row staged
  // (1,533) and the first too long (1,534: the chains' kernels).
  ExpectSameBits(MakeNode("LayerNormalization", {"x", "s", "b"}, {"y"}, {{"axis", int64_t{-1}}}),
                 {RandomValue({3, 7, 768}, 7), RandomValue({768}, 8), RandomValue({768}, 9)});
  ExpectSameBits(MakeNode("LayerNormalization", {"x", "s"}, {"y"}, {{"axis", int64_t{-1}}}),
                 {RandomValue({9, 1533}, 10), RandomValue({1533}, 11)});
  ExpectSameBits(MakeNode("LayerNormalization", {"x", "s"}, {"y"}, {{"axis", int64_t{-1}}}),
                 {RandomValue({5, 1534}, 12), RandomValue({1534}, 13)});
}

TEST_F(GraphDeviceTest, MatMul) {
  // The encoder's projections (one B for the whole batch), attention scores
  // and context (batched), broadcast batches both ways, vectors.
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({3, 16, 32}, 1), RandomValue({32, 128}, 2)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({3, 4, 16, 8}, 3), RandomValue({3, 4, 8, 16}, 4)});
  // Batched on the tiled kernel (64 tiles); shared Bs whose weight gradients
  // sum row groups: one batch a group (5 of 1000 rows, 3 of 2000), one group
  // past a k block (batches of 4100 rows), 16 groups of 64 rows on the tiled
  // kernel, 2 groups of 3 batches, and 5 batches that split no way into 2
  // groups.
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({8, 8, 128, 16}, 11), RandomValue({8, 8, 16, 128}, 12)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({5, 1000, 6}, 13), RandomValue({6, 7}, 14)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({2, 4100, 3}, 15), RandomValue({3, 5}, 16)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({3, 2000, 64}, 17), RandomValue({64, 72}, 18)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({16, 64, 256}, 19), RandomValue({256, 256}, 20)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({6, 1, 2048}, 21), RandomValue({2048, 2048}, 22)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({5, 1, 2048}, 23), RandomValue({2048, 2048}, 24)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({2, 1, 5, 3}, 5), RandomValue({3, 3, 4}, 6)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({6}, 7), RandomValue({2, 6, 3}, 8)});
  ExpectSameBits(MakeNode("MatMul", {"a", "b"}, {"y"}),
                 {RandomValue({4, 6}, 9), RandomValue({6}, 10)});
}

TEST_F(GraphDeviceTest, MatMulAdd) {
  // A linear layer fused (graph/fusion.h): the bias stored by the tiled
  // kernel (4096 x 768 in 128x96 tiles, 4096 x 1024 in 128x128), or added by
  // a pass after Gemm (a product too small for tiles); either bias order.
  for (int64_t bias_first : {0, 1}) {
    Node node = MakeNode("MatMul+Add", {"a", "b", "bias"}, {"z"});
    node.attributes["bias_first"] = bias_first;
    ExpectSameBits(
        node, {RandomValue({8, 512, 64}, 31), RandomValue({64, 768}, 32), RandomValue({768}, 33)});
    ExpectSameBits(node, {RandomValue({32, 128, 48}, 34), RandomValue({48, 1024}, 35),
                          RandomValue({1024}, 36)});
    ExpectSameBits(
        node, {RandomValue({3, 16, 32}, 37), RandomValue({32, 128}, 38), RandomValue({128}, 39)});
  }
}

TEST_F(GraphDeviceTest, TransposedWeights) {
  // A weight stored [N, K] as PyTorch keeps it (graph/fusion.h): its
  // gradient's blocks side by side (8 samples of 512 rows) or one product
  // (2 of 4100 rows, thin), the encoder's 768 columns in 128x96 tiles.
  for (int64_t bias_first : {0, 1}) {
    Node node = MakeNode("Transpose+MatMul+Add", {"a", "w", "bias"}, {"z"});
    node.attributes["bias_first"] = bias_first;
    ExpectSameBits(
        node, {RandomValue({8, 512, 64}, 41), RandomValue({768, 64}, 42), RandomValue({768}, 43)});
  }
  const Node product = MakeNode("Transpose+MatMul", {"a", "w"}, {"y"});
  ExpectSameBits(product, {RandomValue({2, 4100, 3}, 44), RandomValue({5, 3}, 45)});
  ExpectSameBits(product, {RandomValue({3, 16, 32}, 46), RandomValue({128, 32}, 47)});
  ExpectSameBits(product, {RandomValue({16, 64, 256}, 48), RandomValue({256, 256}, 49)});
}

TEST_F(GraphDeviceTest, StridedMatMul) {
  // The attention's products on views (graph/fusion.h): scores from the
  // heads split in place and the keys read transposed, the context written
  // with its heads merged (4 heads of 64, 128 positions); a rank-3 product
  // whose output view is transposed (the product computed as C^T = B^T A^T).
  const auto strided = [](std::vector<std::pair<std::string, std::vector<int64_t>>> perms) {
    Node node = MakeNode("StridedMatMul", {"a", "b"}, {"y"});
    for (auto& [name, perm] : perms) node.attributes[name] = std::move(perm);
    return node;
  };
  ExpectSameBits(strided({{"perm_a", {0, 2, 1, 3}}, {"perm_b", {0, 2, 3, 1}}}),
                 {RandomValue({2, 128, 4, 64}, 51), RandomValue({2, 128, 4, 64}, 52)});
  ExpectSameBits(strided({{"perm_b", {0, 2, 1, 3}}, {"perm_y", {0, 2, 1, 3}}}),
                 {RandomValue({2, 4, 128, 128}, 53), RandomValue({2, 128, 4, 64}, 54)});
  ExpectSameBits(strided({{"perm_a", {0, 2, 1}}, {"perm_y", {0, 2, 1}}}),
                 {RandomValue({4, 33, 20}, 55), RandomValue({4, 33, 17}, 56)});
  // More entries than a launch's grid holds (65535): two launches.
  ExpectSameBits(strided({{"perm_a", {0, 2, 1}}}),
                 {RandomValue({70000, 2, 1}, 61), RandomValue({70000, 2, 3}, 62)});
  // The heads split from and merged into rows of 256 (the Reshapes fused too).
  const std::vector<int64_t> split = {2, 128, 4, 64};
  ExpectSameBits(strided({{"perm_a", {0, 2, 1, 3}},
                          {"shape_a", split},
                          {"perm_b", {0, 2, 3, 1}},
                          {"shape_b", split}}),
                 {RandomValue({2, 128, 256}, 57), RandomValue({2, 128, 256}, 58)});
  ExpectSameBits(strided({{"perm_b", {0, 2, 1, 3}},
                          {"shape_b", split},
                          {"perm_y", {0, 2, 1, 3}},
                          {"shape_y", {2, 128, 256}}}),
                 {RandomValue({2, 4, 128, 128}, 59), RandomValue({2, 128, 256}, 60)});
}

TEST_F(GraphDeviceTest, Gather) {
  // The encoder's embedding (repeated ids: the gradient adds them in
  // position order), negative indices, a middle axis.
  std::vector<int64_t> ids;
  for (int i = 0; i < 3 * 16; ++i) ids.push_back((i * 37) % 100 % 23);
  ExpectSameBits(MakeNode("Gather", {"t", "i"}, {"y"}),
                 {RandomValue({100, 32}, 1), testing::IntValue({3, 16}, ids)});
  // More positions than one chunk of the kernel's, rows past several blocks'.
  std::vector<int64_t> many;
  for (int i = 0; i < 700; ++i) many.push_back((i * 7919) % 97 - (i % 5 == 0 ? 97 : 0));
  ExpectSameBits(MakeNode("Gather", {"t", "i"}, {"y"}),
                 {RandomValue({97, 300}, 3), testing::IntValue({7, 100}, many)});
  ExpectSameBits(MakeNode("Gather", {"t", "i"}, {"y"}, {{"axis", int64_t{1}}}),
                 {RandomValue({2, 5, 3}, 2), testing::IntValue({4}, {-1, 0, 4, -5})});
}

TEST_F(GraphDeviceTest, StridedViews) {
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", Ints{0, 2, 3, 1}}}),
                 {RandomValue({3, 16, 4, 8}, 1)});
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}), {RandomValue({32, 128}, 2)});
  // Strided and reversed slices: input elements no output reads get 0.
  ExpectSameBits(
      MakeNode("Slice", {"x", "s", "e", "a", "st"}, {"y"}),
      {RandomValue({6, 7, 5}, 3), testing::IntValue({2}, {1, -1}), testing::IntValue({2}, {6, 0}),
       testing::IntValue({2}, {0, 1}), testing::IntValue({2}, {2, -2})},
      {1, 2, 3, 4});
  Value ints = testing::IntValue({2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}), {ints});
  // Rows moved by a warp (the last dimension contiguous on both sides, 32
  // elements or more): the attention's head split and merge, rows of 40 (a
  // second pass of some lanes) whose count is no multiple of a warp's 4, a
  // slice of whole rows at an offset, int64 rows; merged dimensions ahead of
  // a strided last one too short for tiles; whole matrices transposed in
  // cuda::TransposeBatch's tiles (the keys' transpose, partial tiles both
  // ways); int64 matrices, one thread an element over merged dimensions.
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", Ints{0, 2, 1, 3}}}),
                 {RandomValue({2, 6, 4, 64}, 5)});
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", Ints{0, 2, 1, 3}}}),
                 {RandomValue({3, 5, 7, 40}, 6)});
  ExpectSameBits(MakeNode("Slice", {"x", "s", "e", "a"}, {"y"}),
                 {RandomValue({5, 6, 70}, 7), testing::IntValue({2}, {1, 3}),
                  testing::IntValue({2}, {4, 67}), testing::IntValue({2}, {0, 2})},
                 {1, 2, 3});
  std::vector<int64_t> counting(2 * 3 * 33);
  for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<int64_t>(i);
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", Ints{1, 0, 2}}}),
                 {testing::IntValue({2, 3, 33}, counting)});
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", Ints{0, 1, 3, 2}}}),
                 {RandomValue({2, 3, 5, 64}, 8)});
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", Ints{0, 1, 3, 2}}}),
                 {RandomValue({2, 3, 40, 64}, 9)});
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", Ints{0, 2, 1}}}),
                 {RandomValue({2, 37, 33}, 10)});
  std::vector<int64_t> more(3 * 20 * 17);
  for (size_t i = 0; i < more.size(); ++i) more[i] = static_cast<int64_t>(i);
  ExpectSameBits(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", Ints{0, 2, 1}}}),
                 {testing::IntValue({3, 20, 17}, more)});
}

TEST_F(GraphDeviceTest, ConcatAndSplit) {
  ExpectSameBits(MakeNode("Concat", {"a", "b", "c"}, {"y"}, {{"axis", int64_t{1}}}),
                 {RandomValue({2, 3, 4}, 1), RandomValue({2, 1, 4}, 2), RandomValue({2, 5, 4}, 3)});
  ExpectSameBits(MakeNode("Concat", {"a", "b"}, {"y"}, {{"axis", int64_t{-1}}}),
                 {RandomValue({3, 2}, 4), RandomValue({3, 7}, 5)});
  // Output 1 unused, and only output 0 gets a gradient: the rest stays 0.
  ExpectSameBits(MakeNode("Split", {"x", "s"}, {"a", "", "c"}, {{"axis", int64_t{1}}}),
                 {RandomValue({2, 9, 3}, 6), testing::IntValue({3}, {2, 3, 4})}, {1});
  ExpectSameBits(MakeNode("Split", {"x"}, {"a", "b"}), {RandomValue({6, 5}, 7)});
}

// Configurations without a device half say so (the model is refused with
// the node named rather than run wrong).
TEST(GraphDeviceRefusals, UnsupportedConfigurations) {
  const auto runs = [](const Node& node, const std::vector<Value>& inputs,
                       const std::vector<size_t>& constant_inputs) {
    testing::OpRun run = RunOp(node, inputs, constant_inputs);
    EXPECT_TRUE(run.status.ok()) << run.status;
    return run.op != nullptr && run.op->RunsOnDevice();
  };
  const Node clip = MakeNode("Clip", {"x", "lo"}, {"y"});
  EXPECT_TRUE(runs(clip, {RandomValue({3}, 1), ScalarValue(0.0f)}, {1}));
  EXPECT_FALSE(
      runs(clip, {RandomValue({3}, 1), ScalarValue(0.0f)}, {}));  // a bound known at run time
  EXPECT_FALSE(runs(MakeNode("Pow", {"a", "b"}, {"y"}),
                    {RandomValue({3}, 2), testing::IntValue({}, {2})}, {}));
  EXPECT_FALSE(runs(MakeNode("Gather", {"t", "i"}, {"y"}),
                    {testing::IntValue({3}, {4, 5, 6}), testing::IntValue({1}, {0})}, {}));
  EXPECT_FALSE(runs(MakeNode("Add", {"a", "b"}, {"y"}),
                    {RandomValue({1, 1, 1, 1, 1, 1, 1, 1, 2}, 3), RandomValue({2}, 4)}, {}));
}

}  // namespace
}  // namespace easyscale::graph
