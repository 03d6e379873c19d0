// File: worker/src/graph/ops/softmax.h
//
// Softmax and LogSoftmax share one op (softmax.cc): the same rows, maximum
// and sum of exponentials; log_softmax.cc only registers the log form.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "graph/op.h"
#include "graph/ops/dropout_mask.h"

namespace easyscale::graph {

// The op of a Softmax (log false) or LogSoftmax (log true) node, or with
// `scale` of a Mul+Softmax, or with `dropout` of a Softmax+Dropout
// (softmax.cc).
StatusOr<std::unique_ptr<Op>> MakeSoftmaxOp(const Node& node, int64_t opset,
                                            const std::vector<OpInput>& inputs, bool log,
                                            std::optional<float> scale = std::nullopt,
                                            std::optional<DropoutSettings> dropout = std::nullopt);

}  // namespace easyscale::graph
