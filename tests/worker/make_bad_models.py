"""Writes the malformed ONNX models the worker must refuse with a clear error.

Usage: make_bad_models.py OUT_DIR

Each file differs from a valid 1x28x28 -> 10 classifier (Flatten, Gemm) in one
way; model_file_test.cc names the error each must give.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def classifier(nodes, initializers, input_shape=(None, 1, 28, 28), opset=17):
    graph = helper.make_graph(
        nodes, "bad",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, 10])],
        initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def weights(dtype=np.float32, inputs=784):
    rng = np.random.default_rng(0)
    return [numpy_helper.from_array((rng.standard_normal((10, inputs)) * 0.01).astype(dtype), "fc.weight"),
            numpy_helper.from_array(np.zeros(10, dtype), "fc.bias")]


def flatten_gemm(extra=None):
    nodes = [helper.make_node("Flatten", ["input"], ["flat"], name="flatten", axis=1),
             helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc",
                              transB=1)]
    return nodes if extra is None else extra(nodes)


def main(out):
    os.makedirs(out, exist_ok=True)
    good = classifier(flatten_gemm(), weights())
    onnx.save(good, os.path.join(out, "good.onnx"))
    data = good.SerializeToString()
    with open(os.path.join(out, "truncated.onnx"), "wb") as f:
        f.write(data[: len(data) // 2])
    with open(os.path.join(out, "not_onnx.onnx"), "wb") as f:
        f.write(b"this is a text file, not a model\n" * 10)
    hardmax = flatten_gemm(lambda n: n[:1] + [
        helper.make_node("Hardmax", ["flat"], ["hard"], name="odd_one")] + [
        helper.make_node("Gemm", ["hard", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1)])
    onnx.save(classifier(hardmax, weights()), os.path.join(out, "unsupported_op.onnx"))
    missing = classifier(flatten_gemm(), weights()[:1])  # fc.bias never given
    onnx.save(missing, os.path.join(out, "missing_initializer.onnx"), )
    # Integer weights: nothing to train in float.
    onnx.save(classifier(
        [helper.make_node("Flatten", ["input"], ["flat"], name="flatten", axis=1),
         helper.make_node("Cast", ["flat"], ["flat_i"], name="to_int", to=TensorProto.INT64),
         helper.make_node("Mul", ["flat_i", "scale_i"], ["scaled"], name="scale"),
         helper.make_node("Slice", ["scaled", "starts", "ends", "axes"], ["first"], name="first10"),
         helper.make_node("Cast", ["first"], ["logits"], name="to_float", to=TensorProto.FLOAT)],
        [numpy_helper.from_array(np.ones(784, np.int64), "scale_i"),
         numpy_helper.from_array(np.array([0], np.int64), "starts"),
         numpy_helper.from_array(np.array([10], np.int64), "ends"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")]),
        os.path.join(out, "integer_parameters.onnx"))
    # A model for 3x32x32 images cannot take the 1x28x28 digits.
    onnx.save(classifier(flatten_gemm(), weights(inputs=3072), input_shape=(None, 3, 32, 32)),
              os.path.join(out, "wrong_input.onnx"))
    # A Reshape whose target shape is computed from data: unresolvable at load time.
    dyn = [helper.make_node("Flatten", ["input"], ["flat"], name="flatten", axis=1),
           helper.make_node("ReduceMean", ["flat"], ["m"], name="mean", axes=[0, 1], keepdims=0),
           helper.make_node("Cast", ["m"], ["mi"], name="to_int", to=TensorProto.INT64),
           helper.make_node("Unsqueeze", ["mi", "zero"], ["shape"], name="unsq"),
           helper.make_node("Reshape", ["flat", "shape"], ["flat2"], name="dynamic_reshape"),
           helper.make_node("Gemm", ["flat2", "fc.weight", "fc.bias"], ["logits"], name="fc",
                            transB=1)]
    onnx.save(classifier(dyn, weights() + [numpy_helper.from_array(np.array([0], np.int64), "zero")]),
              os.path.join(out, "unresolvable_shape.onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
