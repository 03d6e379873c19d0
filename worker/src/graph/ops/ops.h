// File: worker/src/graph/ops/ops.h
//
// The factories of the graph runtime's ops, one per file in this folder
// (registry.cc maps ONNX op names to them). Each validates the node's
// attributes and input infos and returns the op, or an error naming the node.
#pragma once

#include <memory>
#include <vector>

#include "graph/op.h"

namespace easyscale::graph {

using OpFactory = StatusOr<std::unique_ptr<Op>> (*)(const Node& node, int64_t opset,
                                                    const std::vector<OpInput>& inputs);

// Ops are added here, one line each, as their files land.
StatusOr<std::unique_ptr<Op>> MakeAdd(const Node& node, int64_t opset,
                                      const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeAveragePool(const Node& node, int64_t opset,
                                              const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeBatchNormalization(const Node& node, int64_t opset,
                                                     const std::vector<OpInput>& inputs);
// "BatchNormalization+Relu" and "BatchNormalization+Clip": graph/fusion.h's
// FuseBatchNormActivations's nodes (batch_normalization.cc).
StatusOr<std::unique_ptr<Op>> MakeBatchNormalizationRelu(const Node& node, int64_t opset,
                                                         const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeBatchNormalizationClip(const Node& node, int64_t opset,
                                                         const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeCast(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeClip(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs);
// A Clip's bounds (clip.cc): inputs `first` and `first` + 1 from opset 11 on
// (absent: -inf and +inf), attributes min and max before; `constant` when
// they are known now (attributes, constant inputs or absent).
struct ClipBounds {
  float lo, hi;
  bool constant;
};
StatusOr<ClipBounds> ResolveClipBounds(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs, size_t first);
StatusOr<std::unique_ptr<Op>> MakeConcat(const Node& node, int64_t opset,
                                         const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeConstantOfShape(const Node& node, int64_t opset,
                                                  const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeConv(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeDiv(const Node& node, int64_t opset,
                                      const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeDropout(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs);
// "Dropout+Add": graph/fusion.h's FuseDropoutAdds's node (dropout.cc).
StatusOr<std::unique_ptr<Op>> MakeDropoutAdd(const Node& node, int64_t opset,
                                             const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeErf(const Node& node, int64_t opset,
                                      const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeFlatten(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeGather(const Node& node, int64_t opset,
                                         const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeGelu(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeGemm(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeGlobalAveragePool(const Node& node, int64_t opset,
                                                    const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeIdentity(const Node& node, int64_t opset,
                                           const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeLayerNormalization(const Node& node, int64_t opset,
                                                     const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeLogSoftmax(const Node& node, int64_t opset,
                                             const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeMatMul(const Node& node, int64_t opset,
                                         const std::vector<OpInput>& inputs);
// "MatMul+Add": graph/fusion.h's FuseMatMulBiases's node; "Transpose+MatMul"
// and "Transpose+MatMul+Add": its FuseTransposedWeights's (mat_mul.cc).
StatusOr<std::unique_ptr<Op>> MakeMatMulAdd(const Node& node, int64_t opset,
                                            const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeTransposeMatMul(const Node& node, int64_t opset,
                                                  const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeTransposeMatMulAdd(const Node& node, int64_t opset,
                                                     const std::vector<OpInput>& inputs);
// "StridedMatMul": graph/fusion.h's FuseTransposedOperands's node (mat_mul.cc).
StatusOr<std::unique_ptr<Op>> MakeStridedMatMul(const Node& node, int64_t opset,
                                                const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeMaxPool(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeMul(const Node& node, int64_t opset,
                                      const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakePow(const Node& node, int64_t opset,
                                      const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeRange(const Node& node, int64_t opset,
                                        const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeReduceMean(const Node& node, int64_t opset,
                                             const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeRelu(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeReshape(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeShape(const Node& node, int64_t opset,
                                        const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeSigmoid(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeSlice(const Node& node, int64_t opset,
                                        const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeSoftmax(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs);
// "Mul+Softmax": graph/fusion.h's FuseScaledSoftmax's node (softmax.cc).
StatusOr<std::unique_ptr<Op>> MakeScaledSoftmax(const Node& node, int64_t opset,
                                                const std::vector<OpInput>& inputs);
// "Softmax+Dropout": graph/fusion.h's FuseSoftmaxDropouts's node (softmax.cc).
StatusOr<std::unique_ptr<Op>> MakeSoftmaxDropout(const Node& node, int64_t opset,
                                                 const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeSoftmaxCrossEntropyLoss(const Node& node, int64_t opset,
                                                          const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeSplit(const Node& node, int64_t opset,
                                        const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeSqrt(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeSqueeze(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeSub(const Node& node, int64_t opset,
                                      const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeTanh(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeTranspose(const Node& node, int64_t opset,
                                            const std::vector<OpInput>& inputs);
StatusOr<std::unique_ptr<Op>> MakeUnsqueeze(const Node& node, int64_t opset,
                                            const std::vector<OpInput>& inputs);

}  // namespace easyscale::graph
