"""Loads the model a job wrote into the original PyTorch module and compares logits.

    python3 tests/worker/check_model_output.py --model cnn --width 4 \
        --safetensors OUT/model.safetensors --inputs inputs.npy \
        [--logits logits.npy --tolerance 1e-3] [--onnx OUT/model.onnx]

Reads the safetensors file with numpy and json (Debian has no python3-
safetensors), checks the layout the worker documents (tensors in ascending
name order, back to back, the data 8-byte aligned), loads it into the module
models.py builds for the same knobs with load_state_dict(strict=True), runs it
in eval() on the held-out inputs (as `easyscale-worker predict --inputs` wrote
them), and with --logits compares with the worker's logits: every
|torch - worker| <= tolerance * max(1, max |worker logit|). With --onnx it also
runs onnx.checker.check_model(full_check=True) on the written ONNX file.
Prints one JSON line (max_abs_diff, scale, accuracy_vs_argmax, ...); exits 1
when a check fails.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "deploy", "examples", "models"))
import export  # noqa: E402

DTYPES = {"F32": np.float32, "I64": np.int64}


def read_safetensors(path):
    """{name: tensor} of a safetensors file, checking the worker's layout."""
    raw = open(path, "rb").read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    begin = 8 + size
    if begin % 8:
        sys.exit(f"{path}: the data starts at byte {begin}, not 8-byte aligned")
    header.pop("__metadata__", None)
    names = sorted(header)
    offset = 0
    state = {}
    for name in names:
        entry = header[name]
        start, end = entry["data_offsets"]
        if start != offset:
            sys.exit(f"{path}: {name} starts at {start}, want {offset} (name order, no holes)")
        offset = end
        values = np.frombuffer(raw[begin + start:begin + end], DTYPES[entry["dtype"]])
        state[name] = torch.from_numpy(values.reshape(entry["shape"]).copy())
    if begin + offset != len(raw):
        sys.exit(f"{path}: {len(raw) - begin - offset} bytes after the last tensor")
    return state


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    export.add_model_args(p)
    p.add_argument("--safetensors", required=True)
    p.add_argument("--inputs", required=True, help=".npy of the held-out inputs (float32)")
    p.add_argument("--logits", help=".npy of the worker's logits for the same inputs")
    p.add_argument("--tolerance", type=float, default=1e-3)
    p.add_argument("--onnx", help="the written ONNX file, for onnx.checker")
    a = p.parse_args()
    torch.set_num_threads(1)

    model = export.build_from_args(a)
    model.load_state_dict(read_safetensors(a.safetensors), strict=True)
    model.eval()
    inputs = torch.from_numpy(np.load(a.inputs))
    if a.model == "encoder":
        inputs = inputs.reshape(inputs.shape[0], -1).long()  # token ids, exact as floats
    with torch.no_grad():
        logits = model(inputs).numpy()
    report = {"samples": int(logits.shape[0])}
    ok = True
    if a.logits:
        worker = np.load(a.logits)
        if worker.shape != logits.shape:
            sys.exit(f"worker logits {worker.shape}, PyTorch's {logits.shape}")
        diff = float(np.max(np.abs(worker.astype(np.float64) - logits)))
        scale = max(1.0, float(np.max(np.abs(worker))))
        report.update(max_abs_diff=diff, scale=scale, tolerance=a.tolerance,
                      same_argmax=float(np.mean(worker.argmax(1) == logits.argmax(1))))
        ok = diff <= a.tolerance * scale
    if a.onnx:
        import onnx
        onnx.checker.check_model(a.onnx, full_check=True)
        report["onnx_checker"] = "passed"
    print(json.dumps(report))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
