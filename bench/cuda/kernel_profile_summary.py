"""Summarises kernel_profile.sh's files: per model, our step's GPU time by
kernel (the implicit GEMMs by operand sources, tile and sink), with launches,
registers and FMA-pipe use; the implicit GEMMs' occupancy and warp stall
reasons (each a share of a warp's cycles per issued instruction, from
NAME-gemm.csv); then PyTorch's largest kernels.

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
    name = re.sub(r"<?unnamed>", "anon", name)  # ncu spells it both ways
    m = re.search(r"TiledGemmKernel<(\d+), \d+, [^>]*?(\w+Source)<(\d+), \d+>, [^>]*?(\w+Source)"
                  r"<(\d+), \d+>, [^>]*?(\w+Sink)", name)
    if m:
        return f"tiled {m.group(1)} thr {m.group(2)}<{m.group(3)}> x {m.group(4)}<{m.group(5)}> -> {m.group(6)}"
    m = re.search(r"TiledGemmKernel<\d+, [^>]*?(\w+Source)<(\d+)>, [^>]*?(\w+Source)<(\d+)>, "
                  r"[^>]*?(\w+Sink)", name)
    if m:
        return f"tiled {m.group(1)}<{m.group(2)}> x {m.group(3)}<{m.group(4)}> -> {m.group(5)}"
    return re.sub(r"\(.*", "", name)[:100]


def summarise_stalls(rows):
    prefix, suffix = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    reasons = [k for k in rows[0] if k.startswith(prefix) and k.endswith(suffix)]
    kinds = collections.defaultdict(list)
    for r in rows:
        kinds[kernel_kind(r["Kernel Name"])].append(r)
    print("   implicit GEMMs (time-weighted): occupancy, stall reasons as % of warp cycles")
    for name, rs in sorted(kinds.items(), key=lambda kv: -sum(number(r, "gpu__time_duration.sum")
                                                                for r in kv[1])):
        ns = sum(number(r, "gpu__time_duration.sum") for r in rs) or 1.0

        def weighted(key):
            return sum(number(r, key) * number(r, "gpu__time_duration.sum") for r in rs) / ns

        latency = weighted("smsp__average_warp_latency_per_inst_issued.ratio") or 1.0
        shares = sorted(((weighted(k) / latency * 100, k[len(prefix):-len(suffix)])
                         for k in reasons), reverse=True)
        print(f"   {name}: occupancy "
              f"{weighted('sm__warps_active.avg.pct_of_peak_sustained_active'):.1f}%; "
              + ", ".join(f"{reason} {share:.0f}%" for share, reason in shares[:4]))


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
    gemm = os.path.join(outdir, f"{model}-gemm.csv")
    if os.path.exists(gemm):
        summarise_stalls(ncu_rows(gemm))
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
