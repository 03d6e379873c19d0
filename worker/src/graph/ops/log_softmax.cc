// LogSoftmax (ONNX): the log form of softmax.cc's op, whose comment states the
// operation order of its reductions.
#include "graph/ops/ops.h"
#include "graph/ops/softmax.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeLogSoftmax(const Node& node, int64_t opset,
                                             const std::vector<OpInput>& inputs) {
  return MakeSoftmaxOp(node, opset, inputs, /*log=*/true);
}

}  // namespace easyscale::graph
