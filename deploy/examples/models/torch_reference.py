"""One training step of an example model in PyTorch, as a JSON reference.

    python3 deploy/examples/models/torch_reference.py --model cnn --width 4 \
        --batch 8 --batch-seed 3 --lr 0.05 --weight-decay 1e-4 \
        --onnx cnn.onnx --out cnn-step.json

Rebuilds the model with the same knobs and seed as export.py (so its weights
equal the ONNX file's; --onnx checks that bit for bit), makes a deterministic
batch and labels from numpy's RandomState(batch seed), and runs one step:
forward in training mode (BatchNorm uses the batch's statistics and updates
its running ones), mean cross-entropy, backward, then one SGD step with
momentum and L2 weight decay. Dropout is built with p=0 (rather than calling
model.eval(), which would also switch BatchNorm to its running statistics),
so export the ONNX file with --dropout 0 to compare.

The update is torch.optim.SGD's (dampening 0, no Nesterov), which is the
worker's (worker/src/optimizer.cc) formula for every parameter, BatchNorm's
and biases included, with a velocity that starts at zero:
    g' = g + weight_decay * w;  v = momentum * v + g';  w = w - lr * v
The formula is the same, the rounding not quite: this torch (AVX2) computes
g + wd*w and w + (-lr)*v as fused multiply-adds (recomputing them so gives
params_after bit for bit), the worker, built with -ffp-contract=off, rounds
the products first. Compare with a tolerance, not bit for bit.

The JSON file (floats are float32 values written as Python floats, so they
read back exactly):
  {"model": {knobs}, "inputs": {"shape", "dtype": "float32"|"int64", "data"},
   "labels", "loss", "logits" (flat, [B, classes]),
   "grads": {state_dict key: flat}, "params_after": {key: flat},
   "buffers_after": {key: flat} (BatchNorm running_mean/var after the step),
   with --float64 also "float32_deviation": max |float32 step - float64 step|
   per tensor, in the same layout (logits, loss, grads.KEY, ...),
   "lr", "momentum", "weight_decay"}
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402

DIGITS_MAGIC = b"ESDIGITS"
DIGITS_HEADER = 32  # magic, then u32 version, count, channels, height, width, classes


def load_digits(path):
    """(pixels uint8 [N, C, H, W], labels uint8 [N]) of an EasyScale digits file."""
    raw = open(path, "rb").read()
    if raw[:8] != DIGITS_MAGIC:
        sys.exit(f"torch_reference.py: {path}: not an EasyScale digits file")
    _, count, c, h, w, _ = np.frombuffer(raw, "<u4", 6, 8)
    labels = np.frombuffer(raw, np.uint8, count, DIGITS_HEADER)
    pixels = np.frombuffer(raw, np.uint8, count * c * h * w, DIGITS_HEADER + count)
    return pixels.reshape(count, c, h, w), labels


def make_batch(a):
    """The input batch (a numpy array) and labels (int64) for a.batch_seed."""
    rng = np.random.RandomState(a.batch_seed)
    if a.model == "encoder":
        ids = rng.randint(0, a.vocab, size=(a.batch, a.seq_len)).astype(np.int64)
        return ids, rng.randint(0, a.classes, size=a.batch).astype(np.int64)
    if a.digits:
        pixels, labels = load_digits(a.digits)
        picked = rng.choice(len(labels), size=a.batch, replace=False)
        # As the worker's MakeBatch: float(pixel) * (1.0f / 255.0f), in float32.
        inv255 = np.float32(1) / np.float32(255)
        return pixels[picked].astype(np.float32) * inv255, labels[picked].astype(np.int64)
    # Multiples of 2^-24: exact in float32 and strictly below 1.
    shape = (a.batch, a.in_channels, a.image_size, a.image_size)
    images = rng.randint(0, 1 << 24, size=shape).astype(np.float32) / np.float32(1 << 24)
    return images, rng.randint(0, a.classes, size=a.batch).astype(np.int64)


def check_against_onnx(model, path):
    """Exit unless every float parameter and buffer equals the ONNX initializer of its name."""
    import onnx
    from onnx import numpy_helper
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    for key, value in model.state_dict().items():
        if not value.is_floating_point():
            continue
        if key not in inits:
            sys.exit(f"torch_reference.py: {path} has no initializer {key}")
        if not np.array_equal(inits[key], value.numpy()):
            sys.exit(f"torch_reference.py: {key} differs from {path}'s (another seed or knob?)")


def flat(t):
    return t.detach().reshape(-1).tolist()


def one_step(a, inputs, labels, dtype):
    """Forward, mean cross-entropy, backward and one SGD step in `dtype`."""
    model = export.build_from_args(a)
    model.train()
    if a.onnx:
        check_against_onnx(model, a.onnx)
    fed = torch.from_numpy(inputs)
    if dtype == torch.float64:
        model.double()
        fed = fed.double() if fed.is_floating_point() else fed
    logits = model(fed)
    loss = F.cross_entropy(logits, torch.from_numpy(labels))
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in model.named_parameters()}
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    opt.step()
    return {"loss": loss.detach(), "logits": logits.detach(), "grads": grads,
            "params_after": {k: v.detach() for k, v in model.named_parameters()},
            "buffers_after": {k: v.detach() for k, v in model.named_buffers()
                              if v.is_floating_point()},
            }, sum(v.numel() for v in model.parameters())


def flat_all(v):
    """A step's tensors as float32 lists (a dict of them stays a dict)."""
    if isinstance(v, dict):
        return {k: flat_all(t) for k, t in v.items()}
    t = v.float()
    return float(t) if t.dim() == 0 else flat(t)


def deviation(ours, ref):
    """max |ours - ref| per tensor, mirroring the step's layout."""
    if isinstance(ref, dict):
        return {k: deviation(ours[k], r) for k, r in ref.items()}
    return float((ours.double() - ref.double()).abs().max())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    export.add_model_args(p)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--batch-seed", type=int, default=0)
    p.add_argument("--digits", help="take images from this EasyScale digits file "
                                    "(default: uniform random pixels)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--onnx", help="check the rebuilt weights against this exported file")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--float64", action="store_true",
                   help="compute the step in float64 from the same float32 weights and batch "
                        "(a reference closer to exact than any float32 order)")
    p.add_argument("--out", required=True, help="the JSON file to write")
    a = p.parse_args()
    torch.set_num_threads(a.threads)

    requested_dropout, a.dropout = a.dropout, 0.0  # dropout has no weights: same init
    inputs, labels = make_batch(a)
    ref, parameters = one_step(a, inputs, labels, torch.float64 if a.float64 else torch.float32)
    result = {
        "model": {"name": a.model, "width": a.width, "seq_len": a.seq_len, "vocab": a.vocab,
                  "heads": a.heads, "layers": a.layers, "classes": a.classes, "seed": a.seed,
                  "dropout": 0.0, "batch_seed": a.batch_seed, "digits": a.digits,
                  "float64": a.float64},
        "inputs": {"shape": list(inputs.shape), "dtype": str(inputs.dtype),
                   "data": inputs.reshape(-1).tolist()},
        "labels": labels.tolist(),
        "lr": a.lr, "momentum": a.momentum, "weight_decay": a.weight_decay,
    }
    result.update({k: flat_all(v) for k, v in ref.items()})
    if a.float64:
        # How far PyTorch's own float32 step is from the float64 one, per
        # tensor: how well conditioned the step is, the scale any float32
        # implementation's distance is judged on.
        f32, _ = one_step(a, inputs, labels, torch.float32)
        result["float32_deviation"] = deviation(f32, ref)
    with open(a.out, "w") as f:
        json.dump(result, f)
    size = os.path.getsize(a.out)
    print(json.dumps({"out": a.out, "bytes": size, "loss": result["loss"],
                      "parameters": parameters,
                      "onnx_weights_match": bool(a.onnx)}))
    if requested_dropout:
        print("torch_reference.py: note: built with dropout 0 (export with --dropout 0 to "
              "compare)", file=sys.stderr)
    if size > 20 << 20:
        print(f"torch_reference.py: warning: {a.out} is {size >> 20} MB; use a narrower --width",
              file=sys.stderr)


if __name__ == "__main__":
    main()
