"""Export one of the example models to ONNX for the worker's graph runtime.

    python3 deploy/examples/models/export.py --model resnet18 --width 16 --out resnet18.onnx

Builds the model (models.py) after torch.manual_seed(seed) and exports it in
training mode (BatchNormalization with training_mode=1, Dropout with its ratio
and training_mode inputs) without constant folding, so every parameter and
buffer is an initializer named by its state_dict key. The input is "input"
(float32 [B, C, S, S] with C = --in-channels and S = --image-size, 1x28x28 by
default, or int64 [B, T] token ids for the encoder), the output "logits"
[B, classes]; the batch dimension is dynamic. The exporter is the TorchScript
one (dynamo=False where torch has the choice: torch 2.9 and later default to
the dynamo exporter, which has no training mode). The file is checked with
onnx.checker, and the export fails if the graph uses an op the worker's
runtime lacks. Prints the op histogram and the parameter count.
"""

import argparse
import copy
import inspect
import io
import json
import os
import sys

import onnx
from onnx import numpy_helper
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

DEFAULT_OPSET = 17  # the highest torch 1.13's exporter supports


def add_model_args(p):
    """The knobs that fix a model and its weights (shared with torch_reference.py)."""
    p.add_argument("--model", required=True, choices=models.MODELS)
    p.add_argument("--width", type=float, default=None,
                   help="cnn: first conv channels (8); resnet18: stem channels (64); "
                        "mobilenetv2: width_mult (1.0); encoder: d_model (64)")
    p.add_argument("--seq-len", type=int, default=32, help="encoder: tokens per sequence")
    p.add_argument("--vocab", type=int, default=1000, help="encoder: vocabulary size")
    p.add_argument("--heads", type=int, default=4, help="encoder: attention heads")
    p.add_argument("--layers", type=int, default=2, help="encoder: transformer blocks")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--in-channels", type=int, default=1, help="image models: input channels")
    p.add_argument("--image-size", type=int, default=28,
                   help="image models: input height and width")
    p.add_argument("--seed", type=int, default=1, help="torch.manual_seed before building")
    p.add_argument("--dropout", type=float, default=None,
                   help="dropout rate (default: the model's own; 0 for none)")


def build_from_args(a):
    """The model the arguments describe, with the weights its seed gives."""
    torch.manual_seed(a.seed)
    return models.build(a.model, a.width, a.dropout, seq_len=a.seq_len, vocab=a.vocab,
                        heads=a.heads, layers=a.layers, num_classes=a.classes,
                        in_channels=a.in_channels, image_size=a.image_size)


def export(model, a, out_path, opset=DEFAULT_OPSET):
    """Export `model` (in training mode) to out_path; returns the checked onnx.ModelProto.

    Tracing runs a training-mode forward, which updates BatchNorm's running
    statistics; the file gets the values from before it (the model's own too).
    """
    model.train()
    before = copy.deepcopy(model.state_dict())
    dummy = models.example_input(a.model, 2, a.seq_len, a.vocab, in_channels=a.in_channels,
                                 image_size=a.image_size)
    buf = io.BytesIO()
    legacy = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        legacy["dynamo"] = False  # the TorchScript exporter, as torch 1.13 has only
    torch.onnx.export(
        model, (dummy,), buf, opset_version=opset,
        training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
        input_names=["input"], output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **legacy)
    model.load_state_dict(before)
    proto = onnx.load_from_string(buf.getvalue())
    for init in proto.graph.initializer:
        if init.name in before:
            init.CopyFrom(numpy_helper.from_array(before[init.name].numpy(), init.name))
    onnx.checker.check_model(proto, full_check=True)  # with strict shape inference
    models.check_ops(proto)  # before writing: no unusable file is left behind
    onnx.save(proto, out_path)
    return proto


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(p)
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET, choices=range(13, 18),
                   metavar="13..17")
    p.add_argument("--out", required=True, help="the ONNX file to write")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    a = p.parse_args()
    torch.set_num_threads(a.threads)

    try:
        model = build_from_args(a)
        proto = export(model, a, a.out, a.opset)
    except ValueError as e:
        sys.exit(f"export.py: {a.model}: {e}")
    state = model.state_dict()
    inits = {t.name for t in proto.graph.initializer}
    missing = [k for k, v in state.items() if v.is_floating_point() and k not in inits]
    if missing:  # the runtime finds parameters and running stats by state_dict key
        sys.exit(f"export.py: {a.model}: no initializer named {', '.join(missing[:10])}")
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({
        "model": a.model, "out": a.out, "opset": a.opset, "bytes": os.path.getsize(a.out),
        "parameters": params, "nodes": len(proto.graph.node),
        "ops": models.op_histogram(proto),
    }))


if __name__ == "__main__":
    main()
