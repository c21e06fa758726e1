#!/bin/sh
# bench-trace.sh: what `faultline trace` costs a real paged decode.
#
# Runs the same paged `faultline run` untraced (A) and under
# `faultline trace --out ... --report ...` (B), interleaved A B A B ... so
# that load on the machine hits both alike, and prints the median decode
# speed of each ("generation: ... t/s", which excludes start-up and the
# tracer's attach) and their ratio. Target: traced >= 0.97 x untraced
# (docs/trace.md).
#
# usage: scripts/bench-trace.sh [BUILD_DIR] [MODEL] [TOKENS] [PAIRS] [BUDGET]
#   MODEL   default: a 256 MiB qwen3moe Q8_0 from `faultline gen`, made once
#           under /tmp (10 layers x 128 experts, top 8)
#   TOKENS  decoded tokens per run (default 64), PAIRS (default 7),
#   BUDGET  --ram-budget (default 64M: about a quarter of the experts fit,
#           so every token loads and evicts experts)
# Extra flags for `faultline run` go in RUN_FLAGS (default "--pager uffd").
# Needs root (or CAP_BPF+CAP_PERFMON).
set -eu
build=${1:-build}
model=${2:-}
tokens=${3:-64}
pairs=${4:-7}
budget=${5:-64M}
fl="$build/faultline"
flags=${RUN_FLAGS:---pager uffd}
tmp=$(mktemp -d /tmp/bench-trace.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$model" ]; then
    model=/tmp/faultline-bench-trace-256M.gguf
    [ -s "$model" ] || "$fl" gen --arch qwen3moe --type Q8_0 --size 256M -o "$model" >/dev/null
fi
run="$fl run -m $model -p hello -n $tokens --temp 0 --disk-moe --ram-budget $budget $flags"

# "prompt: ...; generation: 64 tokens in 1.02 s (62.75 t/s)" -> 62.75
tps() { sed -n 's|.*generation:.*(\([0-9.]*\) t/s).*|\1|p' "$1" | tail -1; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END {
    if (NR == 0) exit 1; print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

$run --stats-json "$tmp/s.json" >/dev/null 2>"$tmp/warm.err" ||
    { cat "$tmp/warm.err" >&2; exit 1; }   # warm-up: page cache of the header, binary
# CPU seconds of the whole run: the untraced one from time(1); the traced
# one as the tracer reports it for its command ("cpu: command X s", probe
# handlers included) plus the tracer's own while the command ran.
plain=""; traced=""; pcpu=""; tcpu=""; tracer=""
for i in $(seq "$pairs"); do
    /usr/bin/time -f "cpu: %U %S" $run >/dev/null 2>"$tmp/a.err"
    "$fl" trace --interval 1 --out "$tmp/t.json" --report "$tmp/t.html" -- $run \
        >/dev/null 2>"$tmp/b.err" || { tail -3 "$tmp/b.err" >&2; exit 1; }
    a=$(tps "$tmp/a.err"); b=$(tps "$tmp/b.err")
    [ -n "$a" ] && [ -n "$b" ] || { echo "bench-trace: no t/s in the output" >&2; exit 1; }
    plain="$plain $a"; traced="$traced $b"
    pcpu="$pcpu $(sed -n 's|^cpu: \([0-9.]*\) \([0-9.]*\)$|\1 \2|p' "$tmp/a.err" | awk '{ print $1 + $2 }')"
    tcpu="$tcpu $(sed -n 's|^cpu: command \([0-9.]*\) s.*|\1|p' "$tmp/b.err")"
    tracer="$tracer $(sed -n 's|^cpu: command .*tracer \([0-9.]*\) s|\1|p' "$tmp/b.err")"
done
p=$(echo $plain | median); t=$(echo $traced | median)
echo "command:  $run"
echo "untraced: median $p t/s  (runs:$plain)"
echo "traced:   median $t t/s  (runs:$traced)"
awk -v p="$p" -v t="$t" 'BEGIN { printf "decode speed traced/untraced: %.3f (%.1f %% slower; target <= 3 %%)\n",
    t / p, (p - t) / p * 100 }'
pc=$(echo $pcpu | median); tc=$(echo $tcpu | median); tr=$(echo $tracer | median)
awk -v p="$pc" -v t="$tc" -v r="$tr" 'BEGIN { printf "CPU s per run (median): untraced %.3f, traced %.3f (%+.1f %%) + tracer %.3f\n",
    p, t, (t - p) / p * 100, r }'
grep -h "events dropped" "$tmp/b.err" | head -1 || true
