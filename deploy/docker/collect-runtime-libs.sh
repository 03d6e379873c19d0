#!/usr/bin/env bash
# Copies a binary and the shared libraries it links into DEST/bin and DEST/lib,
# so a runtime image needs no -dev packages and no package manager.
# Left out: the C library family and libstdc++/libgcc_s (every base image has
# them, backward compatible), and NVIDIA driver libraries (the host's driver,
# mounted by the NVIDIA container toolkit, must be used).
# Usage: collect-runtime-libs.sh DEST BINARY
set -euo pipefail
dest=$1
binary=$2
[ -x "$binary" ] || { echo "collect-runtime-libs: $binary is not an executable" >&2; exit 1; }
mkdir -p "$dest/bin" "$dest/lib"
install -m 0755 "$binary" "$dest/bin/"
if ldd "$binary" | grep -q "not found"; then
  echo "collect-runtime-libs: $binary has unresolved libraries:" >&2
  ldd "$binary" | grep "not found" >&2
  exit 1
fi
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|libcuda|libnvidia-)[.-]'
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
  name=$(basename "$lib")
  if [[ "$name" =~ $skip ]]; then continue; fi
  cp -L "$lib" "$dest/lib/$name"
done
echo "collect-runtime-libs: $(ls "$dest/lib" | wc -l) libraries for $(basename "$binary")"
