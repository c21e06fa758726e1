#!/bin/sh
# test-rope-flags.sh: llama.cpp's rope flags (--rope-scaling, --rope-scale,
# --rope-freq-base, --rope-freq-scale, --yarn-*) and YaRN a file's metadata
# asks for, against llama.cpp's own runs with the same flags
# (tests/data/ref/rope/README.md):
#   - every case of tests/data/ref/rope/cases on prompts p2 and p4:
#     `faultline eval` with the case's flags meets the case's mean KL and
#     top-1 agreement against llama.cpp's logits, and the same run without
#     the flags misses them (the flags change the answer, and the reference
#     tells the two apart);
#   - a bad value is one line and exit 2;
#   - -c past the trained context warns, unless --rope-scale stretches it that far.
# usage: test-rope-flags.sh FAULTLINE   (run from the source folder)
set -u
cli=$1
refs=tests/data/ref/rope
dir=$(mktemp -d /tmp/test-rope-flags.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

eval_to() { # OUT MODEL PROMPT FLAGS...
  out=$1 model=$2 prompt=$3
  shift 3
  "$cli" eval -m "tests/data/$model.gguf" -f "$refs/$prompt.txt" -t 2 -c 512 "$@" \
    --logits-out "$out" --force >"$dir/eval.log" 2>&1 || { cat "$dir/eval.log"; fail "eval $model $*"; }
}

n=0
while read -r name model max_kl min_top1 flags; do
  case $name in '#'* | '') continue ;; esac
  for p in p2 p4; do
    ref=$refs/$model.$p.$name.flrf
    [ -f "$ref" ] || fail "$ref is missing"
    # shellcheck disable=SC2086
    eval_to "$dir/with.flrf" "$model" "$p" $flags
    "$cli" compare "$ref" "$dir/with.flrf" --max-kl "$max_kl" --min-top1 "$min_top1" \
      >"$dir/cmp" 2>&1 || { cat "$dir/cmp"; fail "$model $p $name: $flags"; }
    echo "  $model $p $name: $(grep '^logits:' "$dir/cmp")"
    eval_to "$dir/without.flrf" "$model" "$p"
    if "$cli" compare "$ref" "$dir/without.flrf" --max-kl "$max_kl" --min-top1 "$min_top1" \
      >"$dir/cmp" 2>&1; then
      fail "$model $p $name: the run without the flags meets the reference too"
    fi
    n=$((n + 1))
  done
done <"$refs/cases"
[ "$n" -ge 20 ] || fail "only $n cases ran"
echo "$n rope cases meet llama.cpp's logits with their flags and miss them without"

m=tests/data/qwen3moe-tiny-F16.gguf
for bad in "--rope-scaling longrope" "--rope-scale 0" "--rope-scale -2" "--rope-freq-base x" \
           "--rope-freq-scale -1" "--yarn-orig-ctx 1.5" "--yarn-beta-fast nan" "--yarn-ext-factor"; do
  # shellcheck disable=SC2086
  "$cli" run -m $m -p hi -n 1 $bad >"$dir/out" 2>"$dir/err"
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$dir/err")" = 1 ] && grep -q -- "${bad%% *}" "$dir/err" ||
    fail "run $bad: exit $rc: $(cat "$dir/err")"
done
echo "bad values: one line, exit 2"
# -c beyond the trained 4096: llama.cpp's warning, unless the flags stretch the rope that far
"$cli" run -m $m -p hi -n 1 -c 16384 2>"$dir/err" >/dev/null || fail "run -c 16384: $(cat "$dir/err")"
grep -q "trained on only 4096" "$dir/err" || fail "no warning for -c 16384: $(cat "$dir/err")"
"$cli" run -m $m -p hi -n 1 -c 16384 --rope-scaling yarn --rope-scale 4 2>"$dir/err" >/dev/null ||
  fail "run -c 16384 --rope-scale 4: $(cat "$dir/err")"
! grep -q "trained on only" "$dir/err" || fail "a warning for -c 16384 at --rope-scale 4"
echo "-c past the trained context: a warning, none when --rope-scale reaches it"
echo "test-rope-flags: all checks passed"
