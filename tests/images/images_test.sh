#!/usr/bin/env bash
# The images, built and run: deploy/docker/build-images.sh builds them from the
# host build's binaries (--prebuilt, and --prebuilt-cuda for the CUDA worker),
# then each runs from its own root filesystem (buildah mount, then chroot,
# since no container runtime starts here) as the image's configured user, with
# its env, workdir and entrypoint: `--help` of each binary, and each worker
# image's CPU training job (the README's elastic `local` run, shortened), whose
# digest must equal the host build's. Needs root, buildah and mmdebstrap;
# exits 77 (skipped) without them.
#   images_test.sh BUILD_DIR [CUDA_BUILD_DIR]
# The CUDA worker image (target worker) is built and checked when BUILD_DIR or
# CUDA_BUILD_DIR was configured with EASYSCALE_WITH_CUDA=ON; worker-cpu when
# BUILD_DIR was not.
set -euo pipefail
build=$(cd "$1" && pwd)
cuda_build_dir=${2:+$(cd "$2" && pwd)}
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "images_test: needs root (CI runs as root)"; exit 77; }
for tool in buildah mmdebstrap unshare chroot; do
  command -v "$tool" >/dev/null || { echo "images_test: $tool is not installed (scripts/install-deps.sh)"; exit 77; }
done
tag=test-$$
work=$(mktemp -d)
cleanup() {
  # run_image's working containers (it runs in subshells: found by name).
  buildah containers --format '{{.ContainerName}}' | grep "^easyscale-images-test-$$-" |
    while read -r c; do buildah rm "$c" >/dev/null 2>&1 || true; done
  for t in operator device-plugin worker-cpu worker; do
    buildah rmi "localhost/easyscale-$t:$tag" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "images_test: FAIL: $*" >&2; exit 1; }

cuda_build() { grep -q '^EASYSCALE_WITH_CUDA:BOOL=ON$' "$1/CMakeCache.txt" 2>/dev/null; }
workers=(worker-cpu)
cuda_args=()
if cuda_build "$build"; then workers=(worker); fi
if [ -n "$cuda_build_dir" ]; then
  cuda_build "$cuda_build_dir" || fail "$cuda_build_dir is not configured with EASYSCALE_WITH_CUDA=ON"
  workers+=(worker)
  cuda_args=(--prebuilt-cuda "$cuda_build_dir")
fi
"$root/deploy/docker/build-images.sh" --prebuilt "$build" "${cuda_args[@]}" --out "$work/archives" \
  --tag "$tag"

# Runs the image's entrypoint with ARGS as its container would start: the
# image's user, env and workdir; /proc and /dev mounted in a private mount
# namespace that ends with it. Prints its stdout. With --command CMD, CMD
# (looked up on the image's PATH) replaces the entrypoint, as a pod's command does.
run_image() {
  local image=$1; shift
  local command=""
  if [ "$1" = --command ]; then command=$2; shift 2; fi
  local c mnt config
  c=$(buildah from --pull-never --name "easyscale-images-test-$$-$RANDOM$RANDOM" "$image")
  mnt=$(buildah mount "$c")
  config=$(buildah inspect --type image "$image")
  # The image's config, one field at a time.
  field() {
    /usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin)["OCIv1"]["config"].get(sys.argv[1])
print("\n".join(v) if isinstance(v, list) else v or "")' "$1" <<<"$config"
  }
  local user workdir
  user=$(field User)
  workdir=$(field WorkingDir)
  mapfile -t env < <(field Env)
  mapfile -t entrypoint < <(field Entrypoint)
  [ -z "$command" ] || entrypoint=("$command")
  [ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] || fail "$image runs as root ($user)"
  unshare --mount --fork /bin/bash -c '
    mnt=$1; user=$2; workdir=${3:-/}; shift 3
    mount -t proc proc "$mnt/proc" && mount --rbind /dev "$mnt/dev" &&
    exec chroot --userspec="$user" "$mnt" /usr/bin/env -i -C "$workdir" "$@"' \
    run "$mnt" "$user" "$workdir" "${env[@]}" "${entrypoint[@]}" "$@"
}

for target in operator device-plugin "${workers[@]}"; do
  help=$(run_image "localhost/easyscale-$target:$tag" --help 2>&1) || fail "$target --help: $help"
  grep -q "easyscale-${target%-cpu} " <<<"$(head -n 1 <<<"$help")" || fail "$target --help printed: $help"
  echo "images_test: easyscale-$target --help: ok ($(head -n 1 <<<"$help"))"
done

job=(local --ests 8 --steps 60 --schedule 0:2,30:3 --model mlp --checkpoint-dir)
host=$("$build/bin/easyscale-worker" "${job[@]}" "$work/host-ckpt" | grep '^digest: ') ||
  fail "the host build's training job printed no digest"
for target in "${workers[@]}"; do
  image=localhost/easyscale-$target:$tag
  # The worker pods' command as the operator writes it (--worker-command's default).
  help=$(run_image "$image" --command easyscale-worker --help 2>&1) ||
    fail "easyscale-worker is not on the $target image's PATH: $help"
  echo "images_test: worker pods' command easyscale-worker on the $target image's PATH: ok"
  # The CPU backend: the CUDA image's worker too, on a machine without a GPU.
  digest=$(run_image "$image" "${job[@]}" /tmp/ckpt | grep '^digest: ') ||
    fail "the $target image's training job printed no digest"
  echo "images_test: host $host; $target image $digest"
  [ "$host" = "$digest" ] || fail "the $target image's digest differs from the host build's"
done
echo "images_test: ok"
