#!/bin/sh
# bench-trace.sh: what `faultline trace` costs a real paged decode.
#
# Runs the same paged `faultline run` untraced and under
# `faultline trace --out ... --report ...`, in interleaved pairs (the order
# inside a pair alternates) so that load on the machine hits both alike, and
# prints for each the median decode speed ("generation: ... t/s", which
# leaves out start-up and the tracer's attach) and the median CPU seconds of
# the traced process (wait4's rusage of the command in both arms: time(1)
# untraced, the tracer's own "cpu: command" line traced, probe handlers
# included), plus the tracer's CPU. Target: traced within 3 % of untraced
# (docs/trace.md, Overhead).
#
# Every run must really page: its own --stats must show uffd mode, expert
# loads and evictions (else the script stops). The per-token paging figures
# and the traced runs' probe hits ("probe hits: N uprobes") are printed too.
#
# usage: scripts/bench-trace.sh [BUILD_DIR] [MODEL] [TOKENS] [PAIRS] [BUDGET]
#   BUILD_DIR  holds faultline (default build)
#   MODEL      default: a 256 MiB qwen3moe Q8_0 from `faultline gen`, made once
#              under /tmp (10 layers x 128 experts, top 8)
#   TOKENS     decoded tokens per run (default 64), PAIRS (default 15),
#   BUDGET     --ram-budget (default 64M: about a quarter of the experts fit,
#              so every token loads and evicts experts)
# BASELINE=DIR also runs DIR/faultline (another build, e.g. before a change),
# untraced and traced, in the same rounds: before and after from one run.
# Extra flags for `faultline run` go in RUN_FLAGS (default "--pager uffd"),
# for the tracer in TRACE_FLAGS (default: --out and --report into a scratch
# folder). Needs root (or CAP_BPF+CAP_PERFMON).
set -eu
build=${1:-build}
model=${2:-}
tokens=${3:-64}
pairs=${4:-15}
budget=${5:-64M}
flags=${RUN_FLAGS:---pager uffd}
tmp=$(mktemp -d /tmp/bench-trace.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
tflags=${TRACE_FLAGS:---interval 1 --out $tmp/t.json --report $tmp/t.html}
die() { echo "bench-trace: $*" >&2; exit 1; }
[ -x "$build/faultline" ] || die "$build/faultline: not built"
arms="new:$build/faultline"
if [ -n "${BASELINE:-}" ]; then
    [ -x "$BASELINE/faultline" ] || die "$BASELINE/faultline: not built"
    arms="$arms base:$BASELINE/faultline"
fi
if [ -z "$model" ]; then
    model=/tmp/faultline-bench-trace-256M.gguf
    [ -s "$model" ] || "$build/faultline" gen --arch qwen3moe --type Q8_0 --size 256M \
        -o "$model" >/dev/null
fi
args="-m $model -p hello -n $tokens --temp 0 --disk-moe --ram-budget $budget $flags --stats"

# One run's figures from its stderr: "t/s cpu tracer_cpu uprobes tokens acquires
# waits loads prefetches evictions faults MiB", or nothing when it did not page.
figures() { # FILE MODE
    awk -v mode="$2" '
    /generation: .* tokens in .*t\/s\)/ {
        match($0, /prompt: [0-9]+ tokens/); pt = substr($0, RSTART + 8, RLENGTH - 15)
        match($0, /generation: [0-9]+ tokens/); gt = substr($0, RSTART + 12, RLENGTH - 19)
        match($0, /\([0-9.]+ t\/s\)$/); tps = substr($0, RSTART + 1, RLENGTH - 6) }
    /^pager: uffd mode/ { uffd = 1 }
    /^  acquires [0-9]+: cache hits/ { sub(":", "", $2); acq = $2 }
    /^  faults [0-9]+ \(.*prefetches .*loads .*evictions/ {
        f = $2; for (i = 1; i <= NF; i++) { v = $(i + 1); sub(",", "", v)
            if ($i == "prefetches") pf = v; if ($i == "loads") ld = v
            if ($i == "evictions") ev = v; if ($i == "read") mib = v } }
    /^  stalls [0-9]+, mean/ { sub(",", "", $2); st = $2 }
    /^cpu: [0-9.]+ [0-9.]+$/ { cpu = $2 + $3 }
    /^cpu: command / { cpu = $3; tr = $(NF - 1) }
    /^  probe hits: / { up = $3 }
    END { if (!uffd || tps + 0 <= 0 || ld + 0 <= 0 || ev + 0 <= 0) exit 1
          printf "%s %s %s %s %d %d %d %d %d %d %d %s\n", tps, cpu, mode == "traced" ? tr : 0,
              up + 0, pt + gt, acq, st, ld, pf, ev, f, mib }' "$1"
}

run_one() { # ARM BINARY MODE
    if [ "$3" = traced ]; then
        "$2" trace $tflags -- "$2" run $args >/dev/null 2>"$tmp/err" ||
            { tail -3 "$tmp/err" >&2; die "$1 traced: the run failed"; }
    else
        /usr/bin/time -f "cpu: %U %S" "$2" run $args >/dev/null 2>"$tmp/err" ||
            { tail -3 "$tmp/err" >&2; die "$1 untraced: the run failed"; }
    fi
    line=$(figures "$tmp/err" "$3") ||
        { tail -5 "$tmp/err" >&2; die "$1 $3: no uffd paging (loads, evictions) in its --stats"; }
    echo "$1 $3 $line" >>"$tmp/runs"
}

for a in $arms; do   # warm-up: page cache of the binary and the model's header
    "${a#*:}" run $args >/dev/null 2>"$tmp/err" || { tail -3 "$tmp/err" >&2; die "warm-up failed"; }
done
for i in $(seq "$pairs"); do
    for a in $arms; do
        if [ $((i % 2)) -eq 1 ]; then modes="untraced traced"; else modes="traced untraced"; fi
        for m in $modes; do run_one "${a%%:*}" "${a#*:}" "$m"; done
    done
done

echo "command: faultline run $args ($pairs pairs; tracer: faultline trace $tflags)"
awk -v arms="$arms" '
function med(key, n,   i, j, t, v) {
    n = cnt[key]; for (i = 1; i <= n; i++) v[i] = val[key, i]
    for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
function put(key, x) { val[key, ++cnt[key]] = x }
{ k = $1 " " $2; put(k " tps", $3); put(k " cpu", $4); put(k " tracer", $5)
  # the two runs of a pair ran back to back: their ratio cancels slow drifts in load
  r = $1 " pair"; p = ++seen[r]
  if (p % 2 == 0) { put($1 " rtps", ($2 == "traced" ? $3 / prev_tps[$1] : prev_tps[$1] / $3))
                    put($1 " rcpu", ($2 == "traced" ? $4 / prev_cpu[$1] : prev_cpu[$1] / $4)) }
  prev_tps[$1] = $3; prev_cpu[$1] = $4
  put(k " up", $6 / $7); put(k " acq", $8 / $7); put(k " wait", $9 / $7); put(k " load", $10 / $7)
  put(k " pf", $11 / $7); put(k " ev", $12 / $7); put(k " fault", $13 / $7); put(k " mib", $14 / $7) }
END {
    n = split(arms, A, " ")
    for (i = 1; i <= n; i++) {
        a = A[i]; sub(/:.*/, "", a); u = a " untraced"; t = a " traced"
        printf "%s (%s):\n", a, substr(A[i], length(a) + 2)
        printf "  paging per token (untraced medians): acquires %.1f, waits %.1f, loads %.1f, " \
               "prefetches %.1f, evictions %.1f, faults %.1f, %.2f MiB read\n", med(u " acq"),
               med(u " wait"), med(u " load"), med(u " pf"), med(u " ev"), med(u " fault"), med(u " mib")
        if (med(t " up") > 0)
            printf "  probe hits per token (traced): %.1f uprobes\n", med(t " up")
        else
            printf "  probe hits per token (traced): n/a (this tracer does not count them)\n"
        printf "  decode t/s median: untraced %.2f, traced %.2f: traced/untraced %.3f (%.1f %% slower)\n",
               med(u " tps"), med(t " tps"), med(t " tps") / med(u " tps"),
               (1 - med(t " tps") / med(u " tps")) * 100
        printf "  CPU s per run median: untraced %.3f, traced %.3f (%+.1f %%), + tracer %.3f\n",
               med(u " cpu"), med(t " cpu"), (med(t " cpu") / med(u " cpu") - 1) * 100, med(t " tracer")
        printf "  median of the pairs\047 ratios traced/untraced: decode speed %.3f (%.1f %% slower), " \
               "CPU %.3f (%+.1f %%)\n", med(a " rtps"), (1 - med(a " rtps")) * 100, med(a " rcpu"),
               (med(a " rcpu") - 1) * 100
    }
}' "$tmp/runs"
[ -z "${KEEP_RUNS:-}" ] || cp "$tmp/runs" "$KEEP_RUNS"
