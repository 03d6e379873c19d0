// File: worker/src/graph/testing/op_check.h (test-only)
//
// Runs one op the way the program does, and checks its gradient rule against
// central finite differences of a weighted sum of its float outputs, so every
// op's Backward is tested the same way.
//
//   Node n = MakeNode("Conv", {"x", "w"}, {"y"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
//   OpRun run = RunOp(n, {RandomValue({1, 2, 5, 5}, 1), RandomValue({3, 2, 3, 3}, 2)});
//   ExpectGradientsMatch(n, {x, w}, {0, 1});
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/op.h"

namespace easyscale::graph::testing {

inline Node MakeNode(std::string op, std::vector<std::string> inputs,
                     std::vector<std::string> outputs,
                     std::map<std::string, Attribute> attributes = {}) {
  Node n;
  n.name = op + "_0";
  n.op = std::move(op);
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attributes = std::move(attributes);
  return n;
}

// A float value with uniform elements in [-1, 1) from `seed`.
inline Value RandomValue(Shape shape, uint32_t seed) {
  Value v;
  v.Reset(DType::kFloat32, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& f : v.floats) f = dist(gen);
  return v;
}

// A float32 scalar (an op's scalar input: a bound, a ratio).
inline Value ScalarValue(float f) {
  Value v;
  v.Reset(DType::kFloat32, {});
  v.floats = {f};
  return v;
}

inline Value IntValue(Shape shape, std::vector<int64_t> ints) {
  Value v;
  v.Reset(DType::kInt64, std::move(shape));
  v.ints = std::move(ints);
  return v;
}

inline ConstantTensor ToConstant(const Value& v) {
  ConstantTensor c;
  c.dtype = v.dtype;
  c.shape = v.shape;
  c.floats = v.floats;
  c.ints = v.ints;
  return c;
}

// What an op's factory sees of `inputs`: an input the node omits ("") is
// null; one whose index is in `constant_inputs` is known at load time, as an
// initializer would be. Holds what the OpInputs point at.
class FactoryInputs {
 public:
  FactoryInputs(const Node& node, const std::vector<Value>& inputs,
                const std::vector<size_t>& constant_inputs)
      : infos_(inputs.size()), constants_(inputs.size()), op_inputs_(inputs.size()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (node.inputs[i].empty()) continue;
      infos_[i] = {inputs[i].dtype, inputs[i].shape};
      op_inputs_[i].info = &infos_[i];
      if (std::find(constant_inputs.begin(), constant_inputs.end(), i) != constant_inputs.end()) {
        constants_[i] = ToConstant(inputs[i]);
        op_inputs_[i].constant = &constants_[i];
      }
    }
  }
  FactoryInputs(const FactoryInputs&) = delete;
  FactoryInputs& operator=(const FactoryInputs&) = delete;

  StatusOr<std::unique_ptr<Op>> Make(const Node& node, int64_t opset) const {
    return MakeOp(node, opset, op_inputs_);
  }

 private:
  std::vector<ValueInfo> infos_;
  std::vector<ConstantTensor> constants_;
  std::vector<OpInput> op_inputs_;
};

// One op built from `node` over `inputs` (an input whose index is in
// `constant_inputs` is passed to the factory as known at load time, as an
// initializer would be), run forward once.
struct OpRun {
  std::unique_ptr<Op> op;
  std::vector<ValueInfo> infos;
  std::vector<Value> outputs;
  Status status;  // the factory's error, if any
};

inline OpRun RunOp(const Node& node, const std::vector<Value>& inputs,
                   const std::vector<size_t>& constant_inputs = {}, bool training = true,
                   int64_t opset = 17) {
  OpRun run;
  auto op = FactoryInputs(node, inputs, constant_inputs).Make(node, opset);
  if (!op.ok()) {
    run.status = op.status();
    return run;
  }
  run.op = std::move(*op);
  run.infos = run.op->OutputInfos();
  run.outputs.resize(run.infos.size());
  std::vector<const Value*> in;
  std::vector<Value*> out;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(node.inputs[i].empty() ? nullptr : &inputs[i]);
  for (size_t o = 0; o < run.outputs.size(); ++o) {
    const bool present = o < node.outputs.size() && !node.outputs[o].empty();
    if (present) run.outputs[o].Reset(run.infos[o].dtype, run.infos[o].shape);
    out.push_back(present ? &run.outputs[o] : nullptr);
  }
  RunContext ctx;
  ctx.training = training;
  uint64_t counter = 0;
  ctx.dropout_counter = &counter;
  run.op->Forward(ctx, in, out);
  return run;
}

// The weighted sum L = sum_o sum_e w[o][e] * out[o][e] over the float outputs,
// in double, with fixed pseudo-random weights.
inline double WeightedSum(const std::vector<Value>& outputs, const std::vector<Value>& weights) {
  double sum = 0;
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o].dtype != DType::kFloat32) continue;
    for (size_t e = 0; e < outputs[o].floats.size(); ++e) {
      sum += static_cast<double>(weights[o].floats[e]) * outputs[o].floats[e];
    }
  }
  return sum;
}

// The runtime reuses the memory of values an op says its Backward does not
// read (Op::BackwardReads*): run Backward again with their elements NaN and
// expect the very same gradient bits.
inline void ExpectBackwardReadsOnlyWhatItSays(Op& op, const std::vector<const Value*>& given_in,
                                              std::vector<Value> inputs, std::vector<Value> outputs,
                                              const std::vector<const Value*>& dout,
                                              const std::vector<Value>& grads,
                                              const std::vector<size_t>& wrt) {
  auto poison = [](Value& v) {
    std::fill(v.floats.begin(), v.floats.end(), std::numeric_limits<float>::quiet_NaN());
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!op.BackwardReadsInput(i)) poison(inputs[i]);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!op.BackwardReadsOutput(o)) poison(outputs[o]);
  }
  std::vector<const Value*> in, out;
  std::vector<Value*> din(inputs.size(), nullptr);
  std::vector<Value> again(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back(given_in[i] ? &inputs[i] : nullptr);
  for (const Value& v : outputs) out.push_back(&v);
  for (size_t i : wrt) {
    again[i].Reset(DType::kFloat32, inputs[i].shape);
    din[i] = &again[i];
  }
  RunContext ctx;
  uint64_t counter = 0;
  ctx.dropout_counter = &counter;
  op.Backward(ctx, in, out, dout, din);
  for (size_t i : wrt) {
    EXPECT_EQ(std::memcmp(again[i].floats.data(), grads[i].floats.data(),
                          grads[i].floats.size() * sizeof(float)),
              0)
        << "input " << i << "'s gradient read a value the op says its backward does not read";
  }
}

// Checks the op's Backward for dL/d(input i), i in `wrt`, against central
// differences with step `h`: |analytic - numeric| <= tol * (1 + |numeric|).
// Only the first `checked_outputs` outputs carry weight (by default all; pass
// 1 to leave out saved statistics an op exports for its own backward).
inline void ExpectGradientsMatch(const Node& node, std::vector<Value> inputs,
                                 const std::vector<size_t>& wrt,
                                 const std::vector<size_t>& constant_inputs = {}, double h = 1e-2,
                                 double tol = 2e-2,
                                 size_t checked_outputs = static_cast<size_t>(-1)) {
  OpRun run = RunOp(node, inputs, constant_inputs);
  ASSERT_TRUE(run.status.ok()) << run.status;
  std::vector<Value> weights;
  for (size_t o = 0; o < run.outputs.size(); ++o) {
    const bool weighted = o < checked_outputs && run.infos[o].dtype == DType::kFloat32 &&
                          o < node.outputs.size() && !node.outputs[o].empty();
    weights.push_back(weighted ? RandomValue(run.infos[o].shape, 100 + static_cast<uint32_t>(o))
                               : Value());
    if (!weighted) run.outputs[o].dtype = DType::kInt64;  // left out of the sum
  }
  std::vector<const Value*> in, out, dout;
  std::vector<Value*> din;
  std::vector<Value> grads(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(node.inputs[i].empty() ? nullptr : &inputs[i]);
  for (size_t o = 0; o < run.outputs.size(); ++o) {
    out.push_back(&run.outputs[o]);
    dout.push_back(weights[o].floats.empty() ? nullptr : &weights[o]);
  }
  din.assign(inputs.size(), nullptr);
  for (size_t i : wrt) {
    ASSERT_TRUE(run.op->HasGradient(i)) << "input " << i;
    grads[i].Reset(DType::kFloat32, inputs[i].shape);
    din[i] = &grads[i];
  }
  RunContext ctx;
  uint64_t counter = 0;
  ctx.dropout_counter = &counter;
  run.op->Backward(ctx, in, out, dout, din);
  ExpectBackwardReadsOnlyWhatItSays(*run.op, in, inputs, run.outputs, dout, grads, wrt);

  for (size_t i : wrt) {
    for (size_t e = 0; e < inputs[i].floats.size(); ++e) {
      const float saved = inputs[i].floats[e];
      inputs[i].floats[e] = saved + static_cast<float>(h);
      OpRun plus = RunOp(node, inputs, constant_inputs);
      inputs[i].floats[e] = saved - static_cast<float>(h);
      OpRun minus = RunOp(node, inputs, constant_inputs);
      inputs[i].floats[e] = saved;
      for (size_t o = 0; o < run.outputs.size(); ++o) {
        if (weights[o].floats.empty())
          plus.outputs[o].dtype = minus.outputs[o].dtype = DType::kInt64;
      }
      const double numeric =
          (WeightedSum(plus.outputs, weights) - WeightedSum(minus.outputs, weights)) / (2 * h);
      const double analytic = grads[i].floats[e];
      EXPECT_LE(std::abs(analytic - numeric), tol * (1 + std::abs(numeric)))
          << node.op << ": d/d input " << i << " element " << e << ": analytic " << analytic
          << ", numeric " << numeric;
    }
  }
}

}  // namespace easyscale::graph::testing
