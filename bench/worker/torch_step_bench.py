"""One training step of each example model in PyTorch on the CPU.

The reference for the worker's ONNX graph runtime on the CPU: the models of
deploy/examples/models (models.py), in training mode with their own dropout,
one step = forward, mean cross-entropy, backward, SGD (momentum 0.9, weight
decay 1e-4) on one fixed random batch. Prints one JSON line per model:
{model, width, batch, threads, ms_median, ms_min, steps, parameters} over
--repeats timed repetitions of --steps steps each, after --warmup steps.

  python3 bench/worker/torch_step_bench.py --threads 1 [--models cnn,encoder]
      [--batch 32] [--width W] [--steps 10] [--repeats 5]

Default sizes are the README's training ones: cnn (width 8, the worker's
built-in), resnet18 width 16, mobilenetv2 width 0.5, encoder d_model 64,
2 layers, 4 heads, T=32, vocabulary 1000; all at batch 32.

Linear layers run on the BLAS torch was built with (the "blas" field):
Debian's python3-torch says "generic", i.e. the system libblas.so.3, which is
the unoptimized reference BLAS unless OpenBLAS or similar is installed, so
its Gemm/MatMul-heavy figures (encoder) are far slower than a pip wheel's
MKL ones; convolutions use oneDNN either way.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "deploy", "examples", "models"))
import models  # noqa: E402

TRAINING_WIDTH = {"cnn": 8, "resnet18": 16, "mobilenetv2": 0.5, "encoder": 64}


def step_times_ms(model, x, y, steps, repeats, warmup):
    """Per-step milliseconds of each of `repeats` runs of `steps` training steps."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

    def step():
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - start) * 1e3 / steps)
    return times


def blas_info():
    """torch's BLAS_INFO build setting ("mkl", "open", "generic", ...)."""
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return m.group(1) if m else "unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, required=True, help="torch.set_num_threads")
    p.add_argument("--models", default=",".join(TRAINING_WIDTH))
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--width", type=float, default=None,
                   help="every model's width (default: each one's training width)")
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--steps", type=int, default=10, help="steps per timed repetition")
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    blas = blas_info()

    for name in a.models.split(","):
        width = TRAINING_WIDTH[name] if a.width is None else a.width
        torch.manual_seed(a.seed)
        model = models.build(name, width, seq_len=a.seq_len, vocab=a.vocab, heads=a.heads,
                             layers=a.layers).train()
        x = models.example_input(name, a.batch, a.seq_len, a.vocab)
        y = torch.randint(0, 10, (a.batch,))
        times = step_times_ms(model, x, y, a.steps, a.repeats, a.warmup)
        print(json.dumps({
            "model": name, "width": width, "batch": a.batch, "threads": a.threads,
            "ms_median": round(statistics.median(times), 3), "ms_min": round(min(times), 3),
            "steps": a.steps * a.repeats,
            "parameters": sum(v.numel() for v in model.parameters()),
            "torch": torch.__version__, "blas": blas}), flush=True)


if __name__ == "__main__":
    main()
