#!/bin/sh
# bench-trace.sh: what `faultline trace` costs a paged decode.
#
# Runs the same paged decode N times untraced and N times under
# `faultline trace` (live tables on, JSON and HTML written) and prints the
# best tokens/s of each and the slowdown. Target: <= 3 % (docs/trace.md).
#
# usage: scripts/bench-trace.sh [BUILD_DIR] [MODEL] [TOKENS] [RUNS] [BUDGET_EXPERTS]
# The decode is build/trace-driver, a paged stand-in: per token and MoE
# layer it reads every byte of n_expert_used skewed picks (uffd faults,
# io_uring reads, prefetch, eviction) under a budget of BUDGET_EXPERTS
# experts per layer (default 12 = 3 x n_expert_used of qwen3moe-tiny: a warm cache that still
# faults), with no matmuls, so stalls weigh more than in a real decode. Set
# BENCH_CMD to time another command instead; it must print "tokens/s: X"
# (e.g. a `faultline bench` wrapper once `faultline run` pages experts).
# Needs root (or CAP_BPF+CAP_PERFMON).
set -eu
build=${1:-build}
model=${2:-tests/data/qwen3moe-tiny-F16.gguf}
tokens=${3:-400}
runs=${4:-5}
budget=${5:-12}
fl="$build/faultline"
tmp=$(mktemp -d /tmp/bench-trace.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmd=${BENCH_CMD:-"$build/trace-driver $model $tmp/stats.json $tokens $budget"}

best() { sort -n | tail -1; }
least() { sort -n | head -1; }
field() { sed -n "s|.*$1: *\([0-9.]*\).*|\1|p" | tail -1; }

# Interleaved, so that load on the machine hits both alike; best of each.
plain=""; traced=""; pcpu=""; tcpu=""
for i in $(seq "$runs"); do
    $cmd >"$tmp/p.out" 2>/dev/null
    "$fl" trace --interval 1 --out "$tmp/t.json" --report "$tmp/t.html" -- $cmd \
        >"$tmp/t.out" 2>/dev/null
    plain="$plain $(field 'tokens/s' <"$tmp/p.out")"; pcpu="$pcpu $(field 'cpu ms/token' <"$tmp/p.out")"
    traced="$traced $(field 'tokens/s' <"$tmp/t.out")"; tcpu="$tcpu $(field 'cpu ms/token' <"$tmp/t.out")"
done
p=$(echo $plain | tr ' ' '\n' | best)
t=$(echo $traced | tr ' ' '\n' | best)
[ -n "$p" ] && [ -n "$t" ] || { echo "bench-trace: no tokens/s from the runs (root needed?)" >&2; exit 1; }
echo "untraced: $p tokens/s  (runs:$plain)"
echo "traced:   $t tokens/s  (runs:$traced)"
awk -v p="$p" -v t="$t" 'BEGIN { printf "slowdown: %.2f %% (target <= 3 %%)\n", (p - t) / p * 100 }'
pc=$(echo $pcpu | tr ' ' '\n' | least); tc=$(echo $tcpu | tr ' ' '\n' | least)
if [ -n "$pc" ] && [ -n "$tc" ]; then
    echo "decode CPU per token: untraced $pc ms, traced $tc ms (probe handlers included)"
    awk -v p="$pc" -v t="$tc" 'BEGIN { printf "CPU overhead: %.2f %%\n", (t - p) / p * 100 }'
fi
