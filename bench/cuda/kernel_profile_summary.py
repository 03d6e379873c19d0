"""Summarises kernel_profile.sh's files: per model, our step's GPU time by
kernel (the implicit GEMMs by operand sources, tile and sink), with launches,
registers and FMA-pipe use, then PyTorch's largest kernels.

  python3 bench/cuda/kernel_profile_summary.py OUTDIR [MODEL ...]
"""
import collections
import csv
import json
import os
import re
import sys

# step_bench runs two passes under ncu (--steps 1 --warmup 1).
PASSES = 2


def ncu_rows(path):
    lines = open(path).read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    return [r for r in csv.DictReader(lines[start:]) if r["ID"].isdigit()]


def number(row, key):
    try:
        return float((row.get(key) or "0").replace(",", ""))
    except ValueError:
        return 0.0


def kernel_kind(name):
    name = name.replace("<unnamed>", "anon")
    m = re.search(r"TiledGemmKernel<(\d+), \d+, [^>]*?(\w+Source)<(\d+), \d+>, [^>]*?(\w+Source)"
                  r"<(\d+), \d+>, [^>]*?(\w+Sink)", name)
    if m:
        return f"tiled {m.group(1)} thr {m.group(2)}<{m.group(3)}> x {m.group(4)}<{m.group(5)}> -> {m.group(6)}"
    m = re.search(r"TiledGemmKernel<\d+, [^>]*?(\w+Source)<(\d+)>, [^>]*?(\w+Source)<(\d+)>, "
                  r"[^>]*?(\w+Sink)", name)
    if m:
        return f"tiled {m.group(1)}<{m.group(2)}> x {m.group(3)}<{m.group(4)}> -> {m.group(5)}"
    return re.sub(r"\(.*", "", name)[:100]


def summarise(outdir, model):
    ours = os.path.join(outdir, f"{model}-ours.csv")
    if os.path.exists(ours):
        rows = ncu_rows(ours)
        kinds = collections.defaultdict(lambda: {"launches": 0, "ns": 0.0, "regs": set(), "fma": 0.0})
        for r in rows:
            k = kinds[kernel_kind(r["Kernel Name"])]
            ns = number(r, "gpu__time_duration.sum")
            k["launches"] += 1
            k["ns"] += ns
            k["regs"].add(r.get("launch__registers_per_thread", "?"))
            k["fma"] += ns * number(r, "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active")
        total = sum(k["ns"] for k in kinds.values())
        print(f"== {model}, ours: {total / PASSES / 1e6:.2f} ms of kernels a pass")
        for name, k in sorted(kinds.items(), key=lambda kv: -kv[1]["ns"])[:20]:
            print(f"{k['ns'] / PASSES / 1e6:8.2f} ms {k['launches'] / PASSES:5.0f}x regs "
                  f"{','.join(sorted(k['regs'])):>8} fma {k['fma'] / max(k['ns'], 1):5.1f}%  {name}")
    torch = os.path.join(outdir, f"{model}-torch.jsonl")
    if os.path.exists(torch):
        lines = [json.loads(line) for line in open(torch) if line.startswith("{")]
        total = next((e["ms_per_step"] for e in lines if e["name"] == "TOTAL"), None)
        print(f"== {model}, PyTorch deterministic: {total} ms of kernels a step")
        for e in [e for e in lines if e["name"] != "TOTAL"][:12]:
            print(f"{e['ms_per_step']:8.2f} ms {e['calls_per_step']:5.0f}x  {e['name'][:110]}")


def main():
    outdir = sys.argv[1]
    models = sys.argv[2:] or sorted({f.split("-")[0] for f in os.listdir(outdir)
                                     if f.endswith((".csv", ".jsonl"))})
    for model in models:
        summarise(outdir, model)


if __name__ == "__main__":
    main()
