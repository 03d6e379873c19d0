"""Check an exported ONNX file against torch_reference.py's JSON, in numpy.

    python3 deploy/examples/models/onnx_check.py --onnx cnn.onnx --reference cnn-step.json

Runs the file's graph forward on the reference's input batch with a small
float64 numpy interpreter of the training-mode semantics the worker's runtime
implements (BatchNormalization normalizes with the batch's statistics; Dropout
must have ratio 0 or training_mode off), then compares the logits and the
BatchNorm running statistics after the step (PyTorch's update: momentum 0.1,
the unbiased batch variance) with the reference. It checks the export, not
the worker: no ONNX runtime is needed. Prints one JSON line and exits 1 when
the largest difference exceeds --tol.
"""

import argparse
import json
import math
import sys

import numpy as np
import onnx
from onnx import numpy_helper

ERF = np.vectorize(math.erf, otypes=[np.float64])


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def conv(x, w, b, a):
    """2-D convolution with groups, pads, strides, dilations (NCHW)."""
    g = a.get("group", 1)
    sh, sw = a.get("strides", [1, 1])
    dh, dw = a.get("dilations", [1, 1])
    pt, pl, pb, pr = a.get("pads", [0, 0, 0, 0])
    x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, oc, oh, ow))
    ocg = oc // g
    for gi in range(g):
        xs = x[:, gi * icg:(gi + 1) * icg]
        ws = w[gi * ocg:(gi + 1) * ocg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                           j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, gi * ocg:(gi + 1) * ocg] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


def max_pool(x, a):
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", [1, 1])
    if any(a.get("pads", [0])) or a.get("ceil_mode", 0):
        raise NotImplementedError("MaxPool with pads or ceil_mode")
    oh, ow = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
    return np.max([x[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
                   for i in range(kh) for j in range(kw)], axis=0)


def batch_norm(node, a, x, scale, bias, mean, var, stats):
    """Training mode: normalize with the batch's statistics; record PyTorch's running update."""
    training = a.get("training_mode", 0) == 1 or len(node.output) == 5
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    eps = a.get("epsilon", 1e-5)
    if training:
        m, v = x.mean(axis=axes), x.var(axis=axes)
        count = x.size // x.shape[1]
        stats[node.input[3]] = 0.9 * mean + 0.1 * m
        stats[node.input[4]] = 0.9 * var + 0.1 * v * count / (count - 1)
    else:
        m, v = mean, var
    y = (x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + eps)
    return y * scale.reshape(shape) + bias.reshape(shape)


def run_node(node, ins, stats):
    a, op = attrs(node), node.op_type
    x = ins[0] if ins else None
    if op == "Constant":
        return numpy_helper.to_array(a["value"])
    if op in ("Identity", "Cast"):
        return x if op == "Identity" else x.astype(
            onnx.helper.tensor_dtype_to_np_dtype(a["to"]))
    if op == "Dropout":
        ratio = float(ins[1]) if len(ins) > 1 and ins[1] is not None else 0.5
        training = bool(ins[2]) if len(ins) > 2 and ins[2] is not None else False
        if training and ratio != 0:
            raise ValueError(f"{node.name}: dropout {ratio} in training (export with --dropout 0)")
        return x
    if op == "Conv":
        return conv(x, ins[1], ins[2] if len(ins) > 2 else None, a)
    if op == "BatchNormalization":
        return batch_norm(node, a, *ins, stats)
    if op == "Relu":
        return np.maximum(x, 0)
    if op == "Clip":
        return np.clip(x, ins[1] if len(ins) > 1 else -np.inf, ins[2] if len(ins) > 2 else np.inf)
    if op == "MaxPool":
        return max_pool(x, a)
    if op == "GlobalAveragePool":
        return x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)
    if op == "Gemm":
        A = x.T if a.get("transA", 0) else x
        B = ins[1].T if a.get("transB", 0) else ins[1]
        y = a.get("alpha", 1.0) * A @ B
        return y + a.get("beta", 1.0) * ins[2] if len(ins) > 2 else y
    if op == "MatMul":
        return np.matmul(x, ins[1])
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
              "Pow": np.power}
    if op in binary:
        return binary[op](x, ins[1])
    unary = {"Sqrt": np.sqrt, "Erf": ERF, "Tanh": np.tanh, "Sigmoid": lambda v: 1 / (1 + np.exp(-v))}
    if op in unary:
        return unary[op](x)
    if op in ("Softmax", "LogSoftmax"):
        axis = a.get("axis", -1)
        z = x - x.max(axis=axis, keepdims=True)
        lse = np.log(np.exp(z).sum(axis=axis, keepdims=True))
        return np.exp(z - lse) if op == "Softmax" else z - lse
    if op == "LayerNormalization":
        axes = tuple(range(a.get("axis", -1) % x.ndim, x.ndim))
        m, v = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
        y = (x - m) / np.sqrt(v + a.get("epsilon", 1e-5)) * ins[1]
        return y + ins[2] if len(ins) > 2 else y
    if op == "ReduceMean":
        axes = a.get("axes", ins[1] if len(ins) > 1 else None)
        return x.mean(axis=None if axes is None else tuple(axes), keepdims=bool(a.get("keepdims", 1)))
    if op == "Gather":
        return np.take(x, ins[1], axis=a.get("axis", 0))
    if op == "Flatten":
        axis = a.get("axis", 1)
        return x.reshape(int(np.prod(x.shape[:axis])), -1)
    if op == "Reshape":
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(ins[1])]
        return x.reshape(shape)
    if op == "Transpose":
        return x.transpose(a.get("perm"))
    if op == "Shape":
        return np.array(x.shape, dtype=np.int64)
    if op == "Unsqueeze":
        return np.expand_dims(x, tuple(ins[1]))
    if op == "Squeeze":
        return np.squeeze(x, tuple(ins[1])) if len(ins) > 1 else np.squeeze(x)
    if op == "Concat":
        return np.concatenate(ins, axis=a["axis"])
    raise NotImplementedError(f"onnx_check.py: op {op} ({node.name})")


def forward(model, x):
    """(outputs by name, PyTorch-style running statistics after the step)."""
    vals = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    vals = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in vals.items()}
    vals[model.graph.input[0].name] = x
    stats = {}
    for node in model.graph.node:
        out = run_node(node, [vals[i] if i else None for i in node.input], stats)
        vals[node.output[0]] = out  # extra outputs (masks, running stats) are unused
    return {o.name: vals[o.name] for o in model.graph.output}, stats


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--onnx", required=True)
    p.add_argument("--reference", required=True, help="torch_reference.py's JSON")
    p.add_argument("--tol", type=float, default=1e-4, help="largest absolute difference allowed")
    a = p.parse_args()
    ref = json.load(open(a.reference))
    inp = ref["inputs"]
    x = np.array(inp["data"], dtype=inp["dtype"]).reshape(inp["shape"])
    if x.dtype == np.float32:
        x = x.astype(np.float64)
    try:
        outputs, stats = forward(onnx.load(a.onnx), x)
    except (ValueError, NotImplementedError) as e:
        sys.exit(f"onnx_check.py: {a.onnx}: {e}")
    logits = outputs["logits"]
    diffs = {"logits": float(np.abs(logits.reshape(-1) - np.array(ref["logits"])).max())}
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(len(ref["labels"])), ref["labels"]].mean()
    diffs["loss"] = abs(float(loss) - ref["loss"])
    missing = sorted(set(ref["buffers_after"]) - set(stats))
    if stats:
        diffs["running_stats"] = max(float(np.abs(v - np.array(ref["buffers_after"][k])).max())
                                     for k, v in stats.items())
    worst = max(diffs.values())
    ok = worst <= a.tol and not missing
    print(json.dumps({"onnx": a.onnx, "ok": ok, "max_abs_diff": diffs, "loss": float(loss),
                      "buffers_not_updated": missing}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
