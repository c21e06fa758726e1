#!/usr/bin/env bash
# The main job: on a fresh machine, installs what is missing, builds faultline,
# and runs it. With MODEL=path it uses that GGUF file; without, it generates a
# demo MoE model once (cached under ~/.cache/faultline) and uses that.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" >/dev/null

cache=${XDG_CACHE_HOME:-$HOME/.cache}/faultline
mkdir -p "$cache"
model=${MODEL:-$cache/demo-qwen3moe-Q8_0.gguf}
if [ ! -f "$model" ]; then
  echo "demo: generating $model" >&2
  build/faultline gen --arch qwen3moe --type Q8_0 --size 256M --seed 1 -o "$model.tmp"
  mv "$model.tmp" "$model"
fi
build/faultline inspect "$model"
