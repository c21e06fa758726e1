#!/usr/bin/env bash
# The VRAM expert cache's eviction policies on a routing trace (no GPU
# needed: the cache's hits follow from its bookkeeping and the order of
# acquires alone; docs/cuda.md, "Cache policy"). Records the routing of a
# prompt and a greedy continuation of the oversize benchmark's model (or
# MODEL), then replays it through LRU and lfu-decay at several half-lives
# with bench-xlru, for caches of 10-50 % of the experts.
#   scripts/bench-vram-cache.sh        env: MODEL=FILE N_GEN=448 THREADS=2
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-vram-cache
FL=${FAULTLINE:-build/faultline}
. scripts/lib-bench.sh
N_GEN=${N_GEN:-448} THREADS=${THREADS:-2}
if [ ! -x "$FL" ] || [ ! -x build/bench-xlru ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build --target faultline bench-xlru >/dev/null
  FL=build/faultline
fi
bench_oversize_model
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say "recording the routing of $model (a prompt and $N_GEN greedy tokens)"
"$FL" eval -m "$model" -t "$THREADS" -n "$N_GEN" --logits-out "$work/rt.flrf" \
  --routing-out "$work/rt.flrt" -p "The quick brown fox jumps over the lazy dog while the cat \
watches from the window and the birds sing in the trees of the old garden near the river" >&2
build/bench-xlru "$work/rt.flrt"
