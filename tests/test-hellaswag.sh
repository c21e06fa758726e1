#!/bin/sh
# test-hellaswag.sh: `faultline perplexity --hellaswag` against
# llama-perplexity --hellaswag (tests/data/hellaswag/README.md):
#   - seven models (dense attention, a recurrent hybrid, delta attention,
#     MLA, sliding windows; F16, MXFP4, Q4_K_M): every task's line (the
#     running acc_norm and its interval over 60 tasks drawn as llama.cpp
#     draws them) as llama.cpp printed it;
#   - more or fewer tasks per forward call (-b):
#     the same bytes; --hellaswag-tasks 10 gives the first 10 lines;
#   - refused in one line: a file whose lines are not whole tasks, a gold
#     index that is not 0-3, a task larger than -b, --hellaswag beside the
#     KL-divergence.
# usage: test-hellaswag.sh FAULTLINE   (from the source folder)
set -u
cli=$1
data=tests/data/hellaswag
dir=$(mktemp -d /tmp/test-hellaswag.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
hs() { # MODEL ARGS...
  hm=$1
  shift
  "$cli" perplexity -m "tests/data/$hm.gguf" -f $data/tasks.txt --hellaswag -t 2 "$@" 2>"$dir/err" |
    grep -v '^$'
}

n=0
for m in qwen3moe-tiny-F16 qwen35moe-tiny-F16 glm4moe-tiny-F16 deepseek2-tiny-F16 gpt-oss-tiny-MXFP4 \
  mixtral-tiny-Q4_K_M kimi-linear-tiny-F16; do
  hs $m --hellaswag-tasks 60 >"$dir/ours" || fail "$m: $(cat "$dir/err")"
  grep -v '^$' "$data/llama-$m.txt" >"$dir/ref"
  [ "$(wc -l <"$dir/ours")" = 61 ] && cmp -s "$dir/ours" "$dir/ref" ||
    fail "$m: not llama-perplexity's lines: $(diff "$dir/ref" "$dir/ours" | head -5)"
  echo "  $m: $(tail -1 "$dir/ours")"
  n=$((n + 1))
done
echo "$n models: every task's line as llama-perplexity's"

for m in qwen3moe-tiny-F16 qwen35moe-tiny-F16; do
  hs $m --hellaswag-tasks 60 -b 128 >"$dir/b128" || fail "$m -b 128: $(cat "$dir/err")"
  grep -v '^$' "$data/llama-$m.txt" | cmp -s - "$dir/b128" || fail "$m: -b 128 changed the lines"
done
hs qwen3moe-tiny-F16 --hellaswag-tasks 10 >"$dir/ten" || fail "10 tasks: $(cat "$dir/err")"
grep -v "^$" "$data/llama-qwen3moe-tiny-F16.txt" | head -11 | cmp -s - "$dir/ten" || fail "10 tasks: not the first 10 lines"
echo "-b 128 (fewer tasks a call), --hellaswag-tasks 10: the same lines"

bad() { # WHAT FILE ARGS...
  what=$1 file=$2
  shift 2
  "$cli" perplexity -m tests/data/qwen3moe-tiny-F16.gguf -f "$file" --hellaswag -t 2 "$@" >/dev/null 2>"$dir/err"
  rc=$?
  [ $rc -ne 0 ] && [ "$(grep -vc '^hellaswag: ' "$dir/err")" = 1 ] && grep -q -- "$what" "$dir/err" ||
    fail "$file $*: exit $rc: $(cat "$dir/err")"
}
head -7 $data/tasks.txt >"$dir/seven"
bad "not a multiple of 6" "$dir/seven"
sed '2s/.*/four/' $data/tasks.txt >"$dir/gold"
bad "line 2: the gold ending's index is 'four'" "$dir/gold"
bad "needs 97 tokens in a forward call; -b is 64" $data/tasks.txt -b 64
bad "one at a time" $data/tasks.txt --kl-divergence-base "$dir/x.kld"
echo "refused in one line: 7 lines, a gold index 'four', a task past -b, beside the KL-divergence"
echo "test-hellaswag: all checks passed"
