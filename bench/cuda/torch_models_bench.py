"""One training step of an example model in PyTorch: the reference of issue 19.

The model is deploy/examples/models/models.py's, built with export.py's knobs
and seed (so its weights are the exported ONNX file's), trained in fp32 with
TF32 off: forward, mean cross-entropy, backward, SGD with the worker's
default optimizer (lr 0.05, momentum 0.9, weight decay 1e-4; the worker's
cosine schedule changes only the lr's value) on one fixed random batch.
One mode family per run, because CUBLAS_WORKSPACE_CONFIG must be set before
CUDA starts:
  deterministic  torch.use_deterministic_algorithms(True), cudnn.deterministic,
                 no cudnn.benchmark, CUBLAS_WORKSPACE_CONFIG=:4096:8
  default        cudnn.benchmark=True, nothing else changed
Each is timed eager and replayed from a captured CUDA graph (when capture
fails, graph_ms is null and graph_error says why). Prints one JSON line:
  {"bench": "torch_models", model, batch, mode, eager_ms, eager_error,
   graph_ms, graph_error, peak_mib, graph_peak_mib, flops, eager_tflops, graph_tflops, ...}
with medians over --repeats runs of --steps steps, peak_mib from
torch.cuda.max_memory_allocated (null on the CPU), flops of one forward and
backward pass from torch.utils.flop_counter (null where torch lacks it).

  python3 bench/cuda/torch_models_bench.py --model resnet50 --in-channels 3 \
      --image-size 224 --batch 64 --mode deterministic
  python3 bench/cuda/torch_models_bench.py --model encoder --width 64 --seq-len 16 \
      --vocab 100 --batch 2 --device cpu --steps 2 --repeats 1 --warmup 1
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "deploy", "examples", "models"))


def parse_args():
    import export  # noqa: E402  (imports torch: called after the environment is set)

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    export.add_model_args(p)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--mode", choices=("deterministic", "default"), required=True)
    p.add_argument("--device", default="cuda", help="cuda | cpu")
    p.add_argument("--steps", type=int, default=20, help="steps per timed repetition")
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions (the median)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--no-graph", action="store_true", help="eager only")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's)")
    return p.parse_args(), export


def set_mode(torch, mode):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    deterministic = mode == "deterministic"
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic


class Step:
    """A model, its SGD, one fixed batch and a step function, on `device`."""

    def __init__(self, torch, export, models, a, device):
        self.torch, self.device = torch, device
        self.model = export.build_from_args(a).to(device).train()
        gen = torch.Generator().manual_seed(a.seed + 1)
        self.x = models.example_input(a.model, a.batch, a.seq_len, a.vocab, gen,
                                      in_channels=a.in_channels,
                                      image_size=a.image_size).to(device)
        self.y = torch.randint(0, a.classes, (a.batch,), generator=gen).to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9,
                                   weight_decay=1e-4)

    def forward_backward(self):
        loss = self.torch.nn.functional.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        return loss

    def __call__(self):
        self.opt.zero_grad(set_to_none=False)
        loss = self.forward_backward()
        self.opt.step()
        return loss

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()


def time_ms(torch, run, device, steps, repeats):
    """The median and smallest per-step milliseconds of `repeats` runs of `steps` calls."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps):
                run()
            stop.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(stop) / steps)
        else:
            t0 = time.perf_counter()
            for _ in range(steps):
                run()
            times.append((time.perf_counter() - t0) * 1e3 / steps)
    return statistics.median(times), min(times)


def reset_peak(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_mib(torch, device):
    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def count_flops(torch, step):
    """FLOPs of one forward and backward pass (torch's counter), or None without one."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    step.opt.zero_grad(set_to_none=False)
    with FlopCounterMode(display=False) as counter:
        step.forward_backward()
    step.sync()
    return int(counter.get_total_flops())


def graphed(torch, step):
    """step() captured into a CUDA graph after warm-up on a side stream; its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def set_cublas_workspace():
    """Deterministic mode's cuBLAS workspace, set before torch starts CUDA."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--mode")
    if pre.parse_known_args()[0].mode == "deterministic":
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"


def main():
    set_cublas_workspace()
    a, export = parse_args()
    import models
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    set_mode(torch, a.mode)
    out = {"bench": "torch_models", "torch": torch.__version__,
           "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "model": a.model, "width": a.width, "in_channels": a.in_channels,
           "image_size": a.image_size, "seq_len": a.seq_len, "vocab": a.vocab,
           "heads": a.heads, "layers": a.layers, "batch": a.batch, "mode": a.mode,
           "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
           "steps": a.steps, "repeats": a.repeats}

    flops_step = Step(torch, export, models, a, device)
    try:
        out["flops"] = count_flops(torch, flops_step)
    except RuntimeError:  # the eager run below says why
        out["flops"] = None
    out["parameters"] = sum(p.numel() for p in flops_step.model.parameters())
    del flops_step

    reset_peak(torch, device)
    out["eager_ms"], out["eager_ms_min"], out["eager_error"], out["peak_mib"] = [None] * 4
    step = Step(torch, export, models, a, device)
    try:
        for _ in range(a.warmup):
            step()
        step.sync()
        out["eager_ms"], out["eager_ms_min"] = time_ms(torch, step, device, a.steps, a.repeats)
        out["peak_mib"] = peak_mib(torch, device)
    except RuntimeError as e:  # e.g. an op without a deterministic implementation
        out["eager_error"] = str(e).splitlines()[0][:300]
    del step

    out["graph_ms"], out["graph_error"], out["graph_peak_mib"] = None, None, None
    if a.no_graph:
        out["graph_error"] = "not asked (--no-graph)"
    elif device.type != "cuda":
        out["graph_error"] = "CUDA graphs need a CUDA device"
    else:
        reset_peak(torch, device)
        step = Step(torch, export, models, a, device)
        try:
            for _ in range(a.warmup):
                step()
            replay = graphed(torch, step)
            out["graph_ms"], _ = time_ms(torch, replay, device, a.steps, a.repeats)
            out["graph_peak_mib"] = peak_mib(torch, device)
        except Exception as e:  # noqa: BLE001  capture refused (an op that syncs, ...)
            out["graph_error"] = str(e).splitlines()[0][:300]
    for key in ("eager", "graph"):
        ms = out[f"{key}_ms"]
        out[f"{key}_tflops"] = round(out["flops"] / (ms * 1e-3) / 1e12, 2) \
            if out["flops"] and ms else None
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
