#!/usr/bin/env bash
# The main job: on a fresh machine, installs what is missing, builds faultline,
# and runs it. With MODEL=path it uses that GGUF file; without, it generates a
# demo MoE model once (cached under ~/.cache/faultline) and uses that.
#
# The run pages the experts from disk under a RAM budget a quarter of the file
# (RAM_BUDGET=SIZE to choose another), so the model is four times larger than
# the memory its experts may use, and it ends with the pager's per-expert
# statistics. env: MODEL, RAM_BUDGET, N_GEN (64), THREADS (all cores), PROMPT.
set -euo pipefail
# MODEL is relative to the caller's folder, not to the checkout
[ -n "${MODEL:-}" ] && MODEL=$(realpath -m -- "$MODEL")
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target faultline >/dev/null

cache=${XDG_CACHE_HOME:-$HOME/.cache}/faultline
mkdir -p "$cache"
# 1.5 GiB: several times a budget that leaves this machine's memory alone,
# small enough to generate in seconds and to page through in a minute on 2 cores.
model=${MODEL:-$cache/demo-qwen3moe-Q4_K-1536M.gguf}
if [ ! -f "$model" ]; then
  [ -n "${MODEL:-}" ] && { echo "demo: $model: no such file" >&2; exit 1; }
  echo "demo: generating $model (once; random weights, skewed router)" >&2
  build/faultline gen --arch qwen3moe --type Q4_K --size 1536M --seed 1 -o "$model"
fi

# faultline's own count: all the files of a model split into several
size=$(build/faultline inspect "$model" | awk '/^file size:/ {print $3}')
[ -n "$size" ] || { echo "demo: $model: faultline inspect cannot read it" >&2; exit 1; }
# in KiB: a model under 4 MiB still gets a quarter, not 0M
budget=${RAM_BUDGET:-$((size / 4 / 1024))K}
echo
build/faultline inspect "$model" | sed -n '/^file size/p;/^architecture/p;/^MoE:/,/^  non-expert/p'
echo
echo "demo: faultline run over $((size / 1048576)) MiB of weights with --ram-budget $budget:"
echo "demo: experts are read from disk when the router picks them and evicted when cold"
[ -z "${MODEL:-}" ] && echo "demo: (random weights: the text is noise, the paging is real)"
echo
build/faultline run -no-cnv -m "$model" -p "${PROMPT:-Once upon a time, in a city of glass,}" \
  -n "${N_GEN:-64}" -t "${THREADS:-$(nproc)}" --temp 0 --ram-budget "$budget" --stats
