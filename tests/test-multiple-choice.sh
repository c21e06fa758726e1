#!/bin/sh
# test-multiple-choice.sh: `faultline perplexity --multiple-choice` against
# llama-perplexity --multiple-choice (tests/data/multiple-choice/README.md):
#   - seven models (dense attention, a recurrent hybrid, delta attention,
#     MLA, sliding windows; F16, MXFP4, Q4_K_M) on 120 tasks of 2-6 answers:
#     every task's line, the final result and random chance as llama.cpp
#     printed them;
#   - --multiple-choice-tasks 50: the tasks llama.cpp draws, its lines;
#   - -b 160 (fewer tasks per call): the same bytes; -b 128 refused (a task
#     needs 132 tokens) before any line;
#   - refused in one line: a file cut inside a task, a count of 0, an empty
#     answer, beside --hellaswag.
# usage: test-multiple-choice.sh FAULTLINE   (from the source folder; 77: no python3)
set -u
cli=$1
data=tests/data/multiple-choice
dir=$(mktemp -d /tmp/test-multiple-choice.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "no python3"; exit 77; }
mc() { # MODEL FILE ARGS...
  mm=$1 mf=$2
  shift 2
  "$cli" perplexity -m "tests/data/$mm.gguf" -f "$mf" --multiple-choice -t 2 "$@" 2>"$dir/err" |
    grep -v '^$'
}

for m in qwen3moe-tiny-F16 qwen35moe-tiny-F16 glm4moe-tiny-F16 deepseek2-tiny-F16 gpt-oss-tiny-MXFP4 \
  mixtral-tiny-Q4_K_M kimi-linear-tiny-F16; do
  mc $m $data/tasks.bin >"$dir/ours" || fail "$m: $(cat "$dir/err")"
  cmp -s "$dir/ours" "$data/llama-$m.txt" ||
    fail "$m: not llama-perplexity's lines: $(diff "$data/llama-$m.txt" "$dir/ours" | head -5)"
  echo "  $m: $(grep Final "$dir/ours")"
done
echo "7 models: every task's line, the final result and random chance as llama-perplexity's"

m=qwen3moe-tiny-F16
mc $m $data/tasks.bin --multiple-choice-tasks 50 >"$dir/fifty" || fail "50 tasks: $(cat "$dir/err")"
cmp -s "$dir/fifty" "$data/llama-$m-50.txt" || fail "50 tasks: not llama-perplexity's draw"
mc $m $data/tasks.bin -b 160 >"$dir/b160" || fail "-b 160: $(cat "$dir/err")"
cmp -s "$dir/b160" "$data/llama-$m.txt" || fail "-b 160 changed the lines"
echo "--multiple-choice-tasks 50: llama.cpp's draw and lines; -b 160 the same bytes"

bad() { # WHAT FILE ARGS...
  what=$1 file=$2
  shift 2
  "$cli" perplexity -m tests/data/$m.gguf -f "$file" --multiple-choice -t 2 "$@" >/dev/null 2>"$dir/err"
  rc=$?
  [ $rc -ne 0 ] && [ "$(grep -vc '^multiple-choice: ' "$dir/err")" = 1 ] && grep -q -- "$what" "$dir/err" ||
    fail "$file $*: exit $rc: $(cat "$dir/err")"
}
head -c 12000 $data/tasks.bin >"$dir/cut.bin"
bad "runs past the end of the file" "$dir/cut.bin"
printf '\0\0\0\0' >"$dir/zero.bin"
bad "no tasks" "$dir/zero.bin"
python3 - "$dir/empty.bin" <<'PY'
import struct, sys  # one task whose second answer is empty
s = lambda x: struct.pack("<I", len(x)) + x
task = s(b"Why?") + struct.pack("<I", 2) + s(b"yes") + s(b"") + struct.pack("<2i", 1, 0) + struct.pack("<I", 0)
open(sys.argv[1], "wb").write(struct.pack("<II", 1, 8) + task)
PY
bad "task 1: answer 2 is empty" "$dir/empty.bin"
bad "one at a time" $data/tasks.bin --hellaswag
"$cli" perplexity -m tests/data/$m.gguf -f $data/tasks.bin --multiple-choice -t 2 -b 128 >"$dir/out" 2>"$dir/err"
[ $? = 1 ] && [ ! -s "$dir/out" ] && grep -q "needs 132 tokens in a forward call; -b is 128" "$dir/err" ||
  fail "-b 128: $(cat "$dir/err") / $(head -3 "$dir/out")"
echo "refused in one line: a file cut in a task, no tasks, an empty answer, beside --hellaswag, a task past -b (nothing on stdout)"
echo "test-multiple-choice: all checks passed"
