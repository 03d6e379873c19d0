"""PyTorch's GPU kernels in one training step of an example model, for
kernel_profile.sh: the same Step as torch_models_bench.py (model, batch, SGD,
fp32 with TF32 off, deterministic or default mode), warmed up, then
torch.profiler over --steps steps. Prints one JSON line per kernel name (on
--device cpu, per operator: a check of the script), most time first: {"bench": "torch_kernels", name, calls_per_step, ms_per_step}, and
a total line.

  python3 bench/cuda/torch_kernel_profile.py --model resnet50 --in-channels 3 \
      --image-size 224 --batch 64 --mode deterministic
"""
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_models_bench as tmb  # noqa: E402


def main():
    tmb.set_cublas_workspace()
    a, export = tmb.parse_args()
    import models
    import torch
    from torch.profiler import ProfilerActivity, profile

    tmb.set_mode(torch, a.mode)
    device = torch.device(a.device)
    step = tmb.Step(torch, export, models, a, device)
    for _ in range(a.warmup):
        step()
    step.sync()
    on_gpu = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if on_gpu else ProfilerActivity.CPU]) as prof:
        for _ in range(a.steps):
            step()
        step.sync()
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if on_gpu and e.device_type == torch.autograd.DeviceType.CUDA:
            us = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        elif not on_gpu and e.device_type == torch.autograd.DeviceType.CPU:
            us = e.self_cpu_time_total
        else:
            continue
        entry = by_name[e.name]
        entry[0] += 1
        entry[1] += us
    total = 0.0
    for name, (calls, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        total += us
        print(json.dumps({"bench": "torch_kernels", "model": a.model, "mode": a.mode,
                          "name": name[:200], "calls_per_step": calls / a.steps,
                          "ms_per_step": round(us / 1e3 / a.steps, 4)}))
    print(json.dumps({"bench": "torch_kernels", "model": a.model, "mode": a.mode,
                      "name": "TOTAL", "ms_per_step": round(total / 1e3 / a.steps, 3)}))


if __name__ == "__main__":
    main()
