#!/usr/bin/env bash
# The first command of the README: installs every dependency (Debian packages,
# npm packages), builds everything, and runs the main job: an elastic EST
# training run on the MNIST digits on CPU with 8 ESTs on 2 then 4 worker
# processes (one scale event at step 60), printing progress, accuracy, digest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
echo "setup: running the main job: build/bin/easyscale-worker local"
exec "$root/build/bin/easyscale-worker" local
