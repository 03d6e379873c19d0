# shellcheck shell=bash disable=SC2034,SC2154  # the caller sets root and py, reads backend, device, specs
# Sourced by models_run.sh, compare_builds.sh and kernel_profile.sh: issue
# 19's four models as "name|export.py knobs|batch" lines in `specs` (tiny
# ones, and the CPU backend, with SMALL=1), step_bench's `backend`, and
# helpers. The caller sets root (the repository) and py (a Python with torch
# and onnx).
if [ "${SMALL:-0}" = 1 ]; then
  backend=cpu device=cpu
  specs="resnet50|--model resnet50 --width 16 --in-channels 3 --image-size 32|2
encoder|--model encoder --width 64 --heads 4 --layers 2 --seq-len 16 --vocab 1000|2
mobilenetv2|--model mobilenetv2_imagenet --width 0.25 --in-channels 3 --image-size 32|2
resnet18|--model resnet18 --width 8 --in-channels 3 --image-size 32|4"
else
  backend=cuda device=cuda
  specs="resnet50|--model resnet50 --in-channels 3 --image-size 224|64
encoder|--model encoder --width 768 --heads 12 --layers 12 --seq-len 128 --vocab 30522|32
mobilenetv2|--model mobilenetv2_imagenet --in-channels 3 --image-size 224|64
resnet18|--model resnet18 --width 64 --in-channels 3 --image-size 32|128"
fi

# Whether MODELS (default: all four) names model $1.
model_wanted() {
  case " ${MODELS:-resnet50 encoder mobilenetv2 resnet18} " in *" $1 "*) return 0 ;; esac
  return 1
}

# export_model KNOBS OUT: writes the model's ONNX file to OUT (export.py's
# output to OUT.log).
export_model() {
  # shellcheck disable=SC2086  # the knobs are words
  "$py" "$root/deploy/examples/models/export.py" $1 --seed 1 --out "$2" >"$2.log" 2>&1
}

# The vocabulary the knobs $1 name (128 without one): step_bench's token ids
# stay below it.
vocab_of() {
  if [[ $1 =~ --vocab\ ([0-9]+) ]]; then echo "${BASH_REMATCH[1]}"; else echo 128; fi
}
