#!/bin/sh
# test-check-tensors.sh: --check-tensors (llama.cpp's), on copies of
# tests/data models with one value or scale broken by hand:
#   - an F16 weight NaN, an F32 norm weight infinite, a Q8_0 block's d
#     infinite, a Q4_K block's dmin NaN, a Q6_K block's d NaN, an MXFP4
#     block's exponent 0xff: `eval --check-tensors` refuses each in one line
#     that names the tensor, what is wrong and the block or value, exit 1,
#     before any output is written; without the flag the same copy runs (as
#     llama.cpp, which checks only when asked);
#   - a model split in three (tests/gguf_split.py) with the NaN in its last
#     part: the line names that part's file;
#   - a draft model (-md) with a broken value is refused too;
#   - the untouched models pass the check and give the same logits.
# usage: test-check-tensors.sh FAULTLINE   (from the source folder; 77: no python3)
set -u
cli=$1
dir=$(mktemp -d /tmp/test-check-tensors.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "no python3"; exit 77; }

# break MODEL TENSOR AT HEX OUT: writes the bytes HEX at offset AT of
# TENSOR's data in a copy of MODEL (offsets from `inspect --tensors`)
brk() {
  off=$("$cli" inspect --tensors "$1" 2>/dev/null | awk -v t="$2" '$1 == t { print $(NF - 1) }')
  [ -n "$off" ] || fail "no tensor $2 in $1"
  python3 - "$1" "$5" $((off + $3)) "$4" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
at, patch = int(sys.argv[3]), bytes.fromhex(sys.argv[4])
data[at:at + len(patch)] = patch
open(sys.argv[2], "wb").write(data)
PY
}

eval1() { # MODEL OUT ARGS...: one prompt's logits
  em=$1 eo=$2
  shift 2
  "$cli" eval -m "$em" -p "The quick brown fox" -n 2 -t 2 --logits-out "$eo" "$@" 2>"$dir/err"
}

n=0
# MODEL TENSOR OFFSET BYTES WHAT (offsets: F16 value 7 = byte 14; Q8_0 block 5 (34 bytes) d = 170;
# Q4_K block 3 (144 bytes) dmin = 434; Q6_K block 2 (210 bytes) d at 208 = 628; MXFP4 block 9 (17
# bytes) e = 153; F32 value 3 = byte 12)
while read -r model tensor at hex what; do
  case $model in '#'* | '') continue ;; esac
  bad=$dir/bad.gguf
  brk "tests/data/$model.gguf" "$tensor" "$at" "$hex" "$bad"
  eval1 "$bad" "$dir/out.flrf" --check-tensors
  rc=$?
  [ $rc = 1 ] && [ "$(wc -l <"$dir/err")" = 1 ] && grep -q "tensor '$tensor' has invalid data: $what" "$dir/err" &&
    [ ! -e "$dir/out.flrf" ] || fail "$model $tensor: exit $rc: $(cat "$dir/err")"
  echo "  $model: $(cat "$dir/err")"
  eval1 "$bad" "$dir/out.flrf" || fail "$model $tensor without --check-tensors: $(cat "$dir/err")"
  rm -f "$dir/out.flrf"
  n=$((n + 1))
done <<'CASES'
qwen3moe-tiny-F16 blk.1.ffn_down_exps.weight 14 ff7f NaN at value 7
qwen3moe-tiny-F16 output_norm.weight 12 0000807f an infinity at value 3
qwen3moe-tiny-Q8_0 blk.0.ffn_down_exps.weight 170 007c an infinity at block 5
mixtral-tiny-Q4_K_M blk.0.ffn_gate_exps.weight 434 01fe NaN at block 3
mixtral-tiny-Q4_K_M output.weight 628 017e NaN at block 2
gpt-oss-tiny-MXFP4 blk.1.ffn_up_exps.weight 153 ff the exponent 0xff (no number) at block 9
CASES
[ $n = 6 ] || fail "only $n cases"
echo "refused in one line, exit 1, no output written: $n broken values and scales; without the flag they run"

m=tests/data/qwen3moe-tiny-F16.gguf
python3 tests/gguf_split.py --split-max-tensors 10 "$m" "$dir/split" >/dev/null 2>&1 ||
  fail "cannot split $m"
last=$(ls "$dir"/split-0000*-of-*.gguf | tail -1)
first=$(ls "$dir"/split-0000*-of-*.gguf | head -1)
t=$("$cli" inspect --tensors "$last" 2>/dev/null | awk '$2 == "F16" { print $1; exit }')
[ -n "$t" ] || fail "no F16 tensor in $last"
brk "$last" "$t" 0 ff7f "$dir/broken-part"
mv "$dir/broken-part" "$last"
eval1 "$first" "$dir/out.flrf" --check-tensors
[ $? = 1 ] && grep -q "^faultline eval: $last: tensor '$t' has invalid data: NaN at value 0" "$dir/err" ||
  fail "split: $(cat "$dir/err")"
echo "a split model: the broken tensor's own part named ($(basename "$last"))"

brk tests/data/qwen3moe-tiny-F16.gguf blk.1.ffn_down_exps.weight 14 ff7f "$dir/bad-draft.gguf"
"$cli" run -m tests/data/qwen3moe-tiny-Q8_0.gguf -md "$dir/bad-draft.gguf" -p "The quick brown fox" -n 4 -t 2 \
  --check-tensors >/dev/null 2>"$dir/err"
rc=$?
[ $rc = 1 ] && grep -q "draft model: $dir/bad-draft.gguf: tensor 'blk.1.ffn_down_exps.weight' has invalid data" "$dir/err" ||
  fail "a broken draft model: exit $rc: $(cat "$dir/err")"
echo "a broken draft model (-md) refused under --check-tensors"

for model in qwen3moe-tiny-F16 mixtral-tiny-Q4_K_M gpt-oss-tiny-MXFP4; do
  eval1 "tests/data/$model.gguf" "$dir/plain.flrf" || fail "$model: $(cat "$dir/err")"
  eval1 "tests/data/$model.gguf" "$dir/checked.flrf" --check-tensors || fail "$model checked: $(cat "$dir/err")"
  cmp -s "$dir/plain.flrf" "$dir/checked.flrf" || fail "$model: --check-tensors changed the logits"
done
echo "untouched models pass the check, the same logits"
echo "test-check-tensors: all checks passed"
