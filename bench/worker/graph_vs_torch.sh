#!/usr/bin/env bash
# One training step of each example model (deploy/examples/models) on this
# CPU: the graph runtime (step_bench --model-file, one EST, one thread) against
# PyTorch on the same CPU with one thread, the same model, batch and SGD, in
# one run; prints each side's JSON line and the ratio (PyTorch ms / ours ms:
# above 1 is faster than PyTorch).
#   bash bench/worker/graph_vs_torch.sh [BATCH]      (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin"
batch=${1:-32}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F), batch $batch, 1 thread"
rounds=${ROUNDS:-1}
while read -r name knobs; do
  case " ${MODELS:-cnn resnet18 mobilenetv2 encoder} " in *" $name "*) ;; *) continue ;; esac
  # shellcheck disable=SC2086
  "$py" "$root/deploy/examples/models/export.py" $knobs --seed 1 --dropout 0.1 --out "$tmp/$name.onnx" >/dev/null
  dataset=synthetic
  [ "$name" = encoder ] && dataset=tokens
  : >"$tmp/rounds"
  for ((round = 0; round < rounds; round++)); do
    ours=$(OMP_NUM_THREADS=1 "$bin/step_bench" --model-file "$tmp/$name.onnx" --dataset "$dataset" \
      --batch "$batch" --steps 20 --warmup 3)
    # shellcheck disable=SC2086
    theirs=$("$py" "$root/bench/worker/torch_step_bench.py" --models "$name" ${knobs#--model "$name"} \
      --batch "$batch" --threads 1 --steps 4 --repeats 5)
    echo "$ours"
    echo "$theirs"
    printf '%s\n%s\n' "$ours" "$theirs" >>"$tmp/rounds"
  done
  "$py" - "$tmp/rounds" "$name" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]  # ours, then PyTorch's, each round
pairs = [(o["median_ms"], t["ms_median"]) for o, t in zip(rows[0::2], rows[1::2])]
ratios = [t / o for o, t in pairs]
print(json.dumps({"model": sys.argv[2], "rounds": len(pairs),
                  "ours_ms": round(statistics.median(o for o, _ in pairs), 2),
                  "torch_ms": round(statistics.median(t for _, t in pairs), 2),
                  "ratio_torch_over_ours": round(statistics.median(ratios), 3),
                  "round_ratios": [round(r, 3) for r in ratios]}))
PY
done <<'MODELS'
cnn --model cnn
resnet18 --model resnet18 --width 16
mobilenetv2 --model mobilenetv2 --width 0.5
encoder --model encoder --width 64 --seq-len 32 --vocab 128
MODELS
