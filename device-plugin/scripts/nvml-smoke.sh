#!/usr/bin/env bash
# NVML smoke check on a GPU machine: builds only the device plugin and prints
# what NVML finds (name, UUID, memory, compute capability, NUMA node) as JSON.
#   device-plugin/scripts/nvml-smoke.sh [build-folder]
#   DP_BIN=path/to/easyscale-device-plugin device-plugin/scripts/nvml-smoke.sh   (no build)
# Exit status: that of `easyscale-device-plugin --discover-only` (3: NVML
# missing), or 4 when no GPU was found.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${root}/build-nvml-smoke}"
out="${OUT:-${build}}"
mkdir -p "${out}"

bin="${DP_BIN:-}"
if [[ -z "${bin}" ]]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "${root}" -B "${build}" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DEASYSCALE_BUILD_WORKER=OFF -DEASYSCALE_BUILD_OPERATOR=OFF \
    -DEASYSCALE_BUILD_DEVICE_PLUGIN=ON -DEASYSCALE_BUILD_TESTS=OFF \
    -DEASYSCALE_BUILD_BENCH=OFF -DEASYSCALE_WITH_CUDA=OFF >/dev/null
  cmake --build "${build}" --target easyscale-device-plugin -j "$(nproc)" >/dev/null
  bin="${build}/bin/easyscale-device-plugin"
fi

status=0
"${bin}" --discover-only >"${out}/nvml-discovery.json" || status=$?
cat "${out}/nvml-discovery.json"
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=index,name,uuid,memory.total,compute_cap --format=csv \
    | tee "${out}/nvidia-smi.csv" || true
if [[ ${status} -eq 0 ]] && grep -q '"devices": \[\]' "${out}/nvml-discovery.json"; then
  echo "nvml-smoke: NVML loaded but found no GPU" >&2
  status=4
fi
exit "${status}"
