#!/bin/sh
# cmake --install puts the binary and its presets under a prefix; the installed
# binary, run from another directory, finds its presets relative to itself, and
# MESHTRAIN_CONFIG_DIR still overrides them.
# Usage: install_test.sh CMAKE BUILD_DIR
set -eu
cmake=$1 build=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
"$cmake" --install "$build" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/meshtrain"
test -f "$prefix/share/meshtrain/configs/models/175b.json"
test -f "$prefix/share/meshtrain/configs/systems/frontier.json"
cd /
out=$(env -u MESHTRAIN_CONFIG_DIR "$prefix/bin/meshtrain" predict --model 175b --system frontier --num-gpus 1024 \
  --tensor-model-parallel-size 4 --pipeline-model-parallel-size 16 --micro-batch-size 1 \
  --global-batch-size 5120 --zero-stage 1 --bf16 --use-flash-attn --recompute-granularity full --json)
echo "$out" | grep -q '"step_time_s"' || { echo "install_test: no prediction from the installed binary"; exit 1; }
# The override wins: an empty config folder has no presets.
mkdir "$prefix/empty"
if MESHTRAIN_CONFIG_DIR="$prefix/empty" "$prefix/bin/meshtrain" predict --model 175b --system frontier \
     --num-gpus 1024 --micro-batch-size 1 --global-batch-size 1024 >/dev/null 2>&1; then
  echo "install_test: MESHTRAIN_CONFIG_DIR did not override the installed presets"; exit 1
fi
echo "install_test: installed binary found its presets from /"
