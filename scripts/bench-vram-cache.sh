#!/usr/bin/env bash
# The expert caches' eviction policies on routing traces, beside Belady's
# MIN on the same requests (no GPU needed: a cache's hits follow from its
# bookkeeping and the order of acquires alone; docs/cuda.md, "Cache
# policy", docs/prefetch.md). Records the routing of the oversize
# benchmark's model (or MODEL) on the prompts of scripts/prompts/ (the
# file's text read from each line on, or with N_GEN > 0 a line and N_GEN
# greedy tokens: scripts/lib-bench.sh's bench_traces; cache-tune.txt for
# pinned-hot's profile and any tuning, cache-held.txt held apart for the
# figures), then replays the
# held-apart traces with bench-xlru through the VRAM cache (LRU, lfu-decay)
# and the RAM cache (the pager's lru, lfu-decay, pinned-hot, lfu-step, lfu-next) at
# caches of 15, 25 and 50 % of the experts: each trace alone (the mean over
# them), and SEQS of them stepped together as one batch.
#   scripts/bench-vram-cache.sh   env: MODEL=FILE N_GEN=0 THREADS=2 SEQS=16
#                                      TRACES=DIR (keep / reuse the traces)
#                                      GRID=1 (also lfu-step's constants on the tuning traces)
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-vram-cache
FL=${FAULTLINE:-build/faultline}
. scripts/lib-bench.sh
N_GEN=${N_GEN:-0} THREADS=${THREADS:-2} SEQS=${SEQS:-16}
if [ ! -x "$FL" ] || [ ! -x build/bench-xlru ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build --target faultline bench-xlru >/dev/null
  FL=build/faultline
fi
bench_oversize_model
if [ -n "${TRACES:-}" ]; then
  traces=$TRACES
else
  traces=$(mktemp -d)
  trap 'rm -rf "$traces"' EXIT
fi
bench_traces "$traces" "$N_GEN" "$THREADS"
tune=() tune_files=() held=()
for f in "${TRACE_TUNE[@]}"; do tune+=(-t "$f"); tune_files+=("$f"); done
held=("${TRACE_HELD[@]}")
echo "## $(basename "$model"): held-apart prompts, each alone"
build/bench-xlru "${tune[@]}" "${held[@]}"
if [ "${#held[@]}" -ge "$SEQS" ]; then
  echo
  echo "## $(basename "$model"): $SEQS held-apart prompts stepped together"
  build/bench-xlru -s "$SEQS" "${tune[@]}" "${held[@]}"
fi
if [ -n "${GRID:-}" ]; then
  echo
  echo "## lfu-step's constants on the tuning prompts (each alone, then all stepped together)"
  build/bench-xlru -g "${tune_files[@]}"
  build/bench-xlru -g -s "${#tune_files[@]}" "${tune_files[@]}"
fi
