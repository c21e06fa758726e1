#!/usr/bin/env bash
# bench-cpu.sh: faultline's CPU speed, and llama.cpp's on the same model in
# the same run when LLAMA_CPP points at a llama.cpp build (the directory
# holding bin/llama-bench). The R repetitions alternate between the two
# (one faultline run, one llama-bench run, ...) so that load from other
# processes hits both alike; prints every table, then per test the median
# t/s of each and the ratio faultline / llama.cpp (>= 1.0: as fast).
#
#   scripts/bench-cpu.sh -m MODEL [-p 512] [-n 128] [-t THREADS] [-r 5]
#   LLAMA_CPP=/work/llama.cpp-build scripts/bench-cpu.sh -m MODEL
#
# FAULTLINE=/path/to/faultline picks the binary (default: build/faultline).
# LLAMA_ARGS adds llama-bench options, e.g. LLAMA_ARGS='-ot .*=CPU' keeps
# the weights in the plain CPU buffer: no repacking into llama.cpp's 8-row
# interleaved layouts (this llama-bench has no --no-repack).
# BASELINE=/path/to/another/faultline compares two faultline builds the
# same way (new / old; a refactor's speed check) instead of llama.cpp.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
faultline=${FAULTLINE:-$root/build/faultline}
model=${MODEL:-}
p=512 n=128 r=5
t=$(lscpu -p=core,socket 2>/dev/null | grep -v '^#' | sort -u | wc -l || true)
[ "${t:-0}" -ge 1 ] || t=$(nproc)

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model=$2; shift 2 ;;
    -p) p=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -t) t=$2; shift 2 ;;
    -r) r=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-cpu.sh: unknown option $1" >&2; usage ;;
  esac
done
[ -n "$model" ] || { echo "bench-cpu.sh: -m MODEL (or MODEL=...) is required" >&2; exit 2; }
[ -r "$model" ] || { echo "bench-cpu.sh: cannot read $model" >&2; exit 1; }
[ -x "$faultline" ] || { echo "bench-cpu.sh: no faultline binary at $faultline (build it or set FAULTLINE)" >&2; exit 1; }

# mean t/s of test $2 in llama-bench markdown tables $1; the columns are
# found by their header names (options such as -ot add columns)
mean_of() {
  awk -F'|' -v test="$2" '
    $2 ~ /^ *model *$/ { tc = vc = 0
      for (i = 1; i <= NF; i++) { h = $i; gsub(/ /, "", h); if (h == "test") tc = i; if (h == "t/s") vc = i }
      next }
    tc && vc { x = $tc; gsub(/ /, "", x)
      if (x == test) { split($vc, a, "±"); gsub(/ /, "", a[1]); print a[1] } }' <<<"$1"
}

bench_ours() { "$faultline" bench -m "$model" -p "$p" -n "$n" -t "$t" -r 1; }
# LLAMA_ARGS split into words, without glob expansion (.*=CPU is a regex)
read -r -a llama_args <<<"${LLAMA_ARGS:-}"
bench_theirs() { "$lb" -m "$model" -p "$p" -n "$n" -t "$t" -r 1 "${llama_args[@]}" -o md 2>/dev/null | grep '^|'; }
# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

if [ -n "${BASELINE:-}" ]; then
  [ -x "$BASELINE" ] || { echo "bench-cpu.sh: no faultline binary at $BASELINE" >&2; exit 1; }
  lb=$BASELINE
  other="baseline"
  bench_theirs() { "$lb" bench -m "$model" -p "$p" -n "$n" -t "$t" -r 1; }
elif [ -z "${LLAMA_CPP:-}" ]; then
  echo "== faultline ($faultline)"
  "$faultline" bench -m "$model" -p "$p" -n "$n" -t "$t" -r "$r"
  echo "(set LLAMA_CPP=/path/to/llama.cpp/build to compare with llama-bench)"
  exit 0
fi
if [ -z "${BASELINE:-}" ]; then
  # LLAMA_CPP may name the build directory or its bin/ folder
  lb=$LLAMA_CPP/llama-bench
  [ -x "$lb" ] || lb=$LLAMA_CPP/bin/llama-bench
  [ -x "$lb" ] || { echo "bench-cpu.sh: no llama-bench at $lb" >&2; exit 1; }
  other="llama.cpp"
fi

ours_all="" theirs_all=""
declare -A pair_ratios=()
for i in $(seq 1 "$r"); do
  echo "== run $i/$r: faultline ($faultline)"
  ours=$(bench_ours) || { echo "bench-cpu.sh: faultline bench failed" >&2; exit 1; }
  echo "$ours"; ours_all+="$ours"$'\n'
  echo "== run $i/$r: $other ($lb)"
  theirs=$(bench_theirs) || { echo "bench-cpu.sh: $other bench failed" >&2; exit 1; }
  echo "$theirs"; theirs_all+="$theirs"$'\n'
  # the two runs of a pair saw the same load: their ratio is the steadier figure
  for test in "pp$p" "tg$n"; do
    a=$(mean_of "$ours" "$test"); b=$(mean_of "$theirs" "$test")
    [ -n "$a" ] && [ -n "$b" ] && pair_ratios[$test]+="$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }') "
  done
done

echo "== faultline / $other (median of $r alternating runs, $t threads)"
status=0
for test in "pp$p" "tg$n"; do
  [ "$test" = pp0 ] || [ "$test" = tg0 ] && continue
  a=$(mean_of "$ours_all" "$test" | median); b=$(mean_of "$theirs_all" "$test" | median)
  if [ -z "$a" ] || [ -z "$b" ]; then echo "$test: missing a result"; status=1; continue; fi
  pr=$(tr ' ' '\n' <<<"${pair_ratios[$test]:-}" | grep . | median)
  awk -v t="$test" -v a="$a" -v b="$b" -v o="$other" -v pr="$pr" 'BEGIN { printf "%-8s faultline %10.2f t/s   %s %10.2f t/s   ratio %.2fx   (median of the %s pairs\x27 ratios %.2fx)\n", t, a, o, b, a / b, "per-run", pr }'
done
exit $status
