#!/bin/sh
# test-bench-batched.sh: `faultline bench -npp/-ntg/-npl` (llama-batched-bench's
# mode) from outside:
#   - every combination gets one row, in order, with PP, TG, B and
#     N_KV = B * (PP + TG) as given, times >= 0 and positive speeds;
#   - paged (--disk-moe): a paging row for each case's prompt and generation;
#   - a -c too small for a case skips that case with a line, the rest run;
#   - bad lists, a missing list, -pps and -c without the mode: a one-line
#     error and exit 2.
# usage: test-bench-batched.sh FAULTLINE
set -u
cli=$1
model=tests/data/qwen3moe-tiny-Q8_0.gguf
dir=$(mktemp -d /tmp/test-bench-batched.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

rows() { # FILE: the table's data rows as "PP TG B N_KV"; checks the numbers
    awk -F'|' '/^\| *[0-9]+ \|/ {
        for (i = 6; i <= 11; i++)
            if ($i + 0 < 0 || (i % 2 && $i + 0 <= 0)) { print "bad number in: " $0; exit 1 }
        gsub(/ /, ""); print $2, $3, $4, $5 }' "$1"
}

"$cli" bench -m $model -npp 8,20 -ntg 4 -npl 1,3 -t 2 >"$dir/out" 2>"$dir/err" ||
    fail "bench -npp: exit $? ($(tail -1 "$dir/err"))"
got=$(rows "$dir/out") || fail "$got"
want="8 4 1 12
8 4 3 36
20 4 1 24
20 4 3 72"
[ "$got" = "$want" ] || fail "rows: got '$got', want '$want'"
grep -q '| *PP | *TG | *B | *N_KV | *T_PP s | S_PP t/s | *T_TG s | S_TG t/s | *T s | *S t/s |' \
    "$dir/out" || fail "no llama-batched-bench header"

"$cli" bench -m $model -npp 8 -ntg 4 -npl 2 -t 2 --disk-moe >"$dir/out" 2>"$dir/err" ||
    fail "paged: exit $? ($(tail -1 "$dir/err"))"
grep -q '^| pp8 B2 ' "$dir/out" && grep -q '^| tg4 B2 ' "$dir/out" ||
    fail "paged: no paging rows: $(cat "$dir/out")"

# 16 cells per block: B 2 of 8+4 needs 32 cells, B 4 needs 64
"$cli" bench -m $model -npp 8 -ntg 4 -npl 2,4 -c 40 -t 2 >"$dir/out" 2>"$dir/err" ||
    fail "-c 40: exit $?"
[ "$(rows "$dir/out")" = "8 4 2 24" ] || fail "-c 40: rows $(rows "$dir/out")"
grep -q 'B 4 needs 64 cells of the 40.*skipped' "$dir/err" || fail "-c 40: $(cat "$dir/err")"

for args in "-npp 0 -ntg 4 -npl 1" "-npp 8 -ntg 4 -npl 0" "-npp 8,x -ntg 4 -npl 1" \
            "-npp 8 -ntg 4" "-npp 8 -ntg 4 -npl 1 -pps" "-c 64 -p 8 -n 4" "-npp"; do
    "$cli" bench -m $model $args -t 2 >"$dir/out" 2>"$dir/err"
    rc=$?
    [ $rc -eq 2 ] || fail "'$args': exit $rc, want 2"
    [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "'$args': not one line: $(cat "$dir/err")"
done
echo "test-bench-batched: all checks passed"
