#!/bin/sh
# test-perplexity.sh: `faultline perplexity` against llama-perplexity
# (tests/data/ppl/README.md):
#   - every case of tests/data/ppl/llama-perplexity.txt (seven architectures:
#     several chunks per forward call, one, a chunk longer than a batch, a
#     recurrent model, a BOS model, sliding-window attention): the final PPL
#     and every chunk's running value within the case's bound of llama.cpp's
#     on the log scale;
#   - the same text alone or several chunks per call, and resident or with
#     the experts paged under a budget: stdout byte for byte the same;
#   - --ppl-output-type 1: a row per chunk and the same final estimate;
#   - a text shorter than two chunks, -b not a multiple of -c, a file that is
#     not there, --chunks 0: one line, exit 1 or 2.
# usage: test-perplexity.sh FAULTLINE   (run from the source folder; exit 77: no python3)
set -u
cli=$1
data=tests/data/ppl
dir=$(mktemp -d /tmp/test-perplexity.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "no python3"; exit 77; }

n=0
while IFS='|' read -r head chunks final; do
  case $head in '#'*) continue ;; esac
  # shellcheck disable=SC2086
  set -- $head
  model=$1 tol=$2
  shift 2
  "$cli" perplexity -m "tests/data/$model.gguf" -f "$data/text.txt" -t 2 "$@" >"$dir/out" \
    2>"$dir/err" || fail "$model $*: exit $?: $(cat "$dir/err")"
  python3 - "$dir/out" "$chunks" "$final" "$tol" "$model" <<'PY' || fail "$model $*: see above"
import math, re, sys
out = open(sys.argv[1]).read()
ref_chunks = [float(v) for v in re.findall(r"\[\d+\]([0-9.]+),", sys.argv[2])]
ours_chunks = [float(v) for v in re.findall(r"\[\d+\]([0-9.]+),", out)]
m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
tol = float(sys.argv[4])
if not m or len(ours_chunks) != len(ref_chunks) or not ref_chunks:
    sys.exit(f"{len(ours_chunks)} chunks and final {m and m.group(1)}; llama.cpp {len(ref_chunks)}")
worst = max(abs(math.log(a) - math.log(b)) for a, b in zip(ours_chunks, ref_chunks))
final = abs(math.log(float(m.group(1))) - math.log(float(sys.argv[3])))
print(f"  {sys.argv[5]:22s} PPL {m.group(1)} (llama.cpp {sys.argv[3]}): |ln diff| final {final:.2e}, "
      f"worst chunk {worst:.2e} (bound {tol:g})")
sys.exit(0 if final <= tol and worst <= tol else "beyond the bound")
PY
  n=$((n + 1))
done <"$data/llama-perplexity.txt"
[ $n -ge 7 ] || fail "only $n cases"
echo "$n cases as llama-perplexity's"

m=tests/data/qwen3moe-tiny-F16.gguf
ppl() { "$cli" perplexity -m $m -f "$data/text.txt" -t 2 -c 128 --chunks 12 "$@" 2>"$dir/err"; }
ppl -b 512 >"$dir/four" || fail "-b 512: $(cat "$dir/err")"
for args in "-b 128" "-b 64" "-b 512 -ub 128" "-b 512 --disk-moe --ram-budget 300K" "-b 256 --disk-moe --ram-budget 300K --pager explicit"; do
  # shellcheck disable=SC2086
  ppl $args >"$dir/other" || fail "$args: $(cat "$dir/err")"
  cmp -s "$dir/four" "$dir/other" || fail "$args: another output than -b 512's: $(cat "$dir/other")"
done
echo "4 chunks per call, 1 (by -b or -ub), half a chunk, experts paged: the same output byte for byte"
ppl -b 512 --ppl-output-type 1 >"$dir/table" || fail "--ppl-output-type 1: $(cat "$dir/err")"
[ "$(grep -c '^ *[0-9][0-9]*  [0-9.]*  [0-9.]*  [0-9.]*$' "$dir/table")" = 12 ] &&
  [ "$(grep Final "$dir/table")" = "$(grep Final "$dir/four")" ] ||
  fail "--ppl-output-type 1: $(cat "$dir/table")"
echo "--ppl-output-type 1: a row per chunk, the same estimate"

bad() { # STATUS WHAT ARGS...
  want=$1 what=$2
  shift 2
  "$cli" perplexity -m $m -t 2 "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  [ $rc = "$want" ] && [ "$(wc -l <"$dir/err")" = 1 ] && grep -q -- "$what" "$dir/err" ||
    fail "perplexity $*: exit $rc (want $want): $(cat "$dir/err")"
}
bad 1 "needs at least 8192" -f "$data/text.txt" -c 4096
bad 2 "no multiple of -c" -f "$data/text.txt" -c 128 -b 300
bad 1 "$dir/none" -f "$dir/none"
bad 1 "nothing to measure" -f "$data/text.txt" -c 128 --chunks 0
echo "refused in one line: a short text, -b 300 -c 128, a missing file, --chunks 0"
echo "test-perplexity: all checks passed"
