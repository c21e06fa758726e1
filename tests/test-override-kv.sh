#!/bin/sh
# test-override-kv.sh: llama.cpp's --override-kv KEY=TYPE:VALUE[,...] on a
# file's metadata.
#   - two models from `faultline gen` that differ only in their experts per
#     token (2 and 4; the same seed gives the same weights): the first with
#     qwen3moe.expert_used_count=int:4 writes the second's logits byte for
#     byte, and without it others (so the check can fail);
#   - a key the file lacks is added (tokenizer.ggml.add_bos_token=bool:true:
#     one prompt token more), a comma list applies each item, and the same
#     flag works in run's and bench's sessions;
#   - the first override of a key wins (as llama.cpp's loader keeps it), and
#     an override mends a key the file holds with the wrong type (the keys
#     are checked after the overrides, as llama.cpp checks them);
#   - one line and exit 1: a kind the key table refuses, an empty item, a
#     value the key table refuses, a malformed item, a bool that is neither,
#     a str over 127 bytes, a count the model cannot hold.
# usage: test-override-kv.sh FAULTLINE   (run from the source folder)
set -u
cli=$1
dir=$(mktemp -d /tmp/test-override-kv.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export CUDA_VISIBLE_DEVICES=
PROMPT="The capital of France is"

for k in 2 4; do
  "$cli" gen -q --arch qwen3moe --n-embd 128 --layers 2 --experts 8 --top-k $k --expert-ff 64 \
    --heads 4 --heads-kv 2 --seed 5 -o "$dir/k$k.gguf" || fail "gen --top-k $k"
done
ev() { # MODEL OUT [flags]
  m=$1 out=$2
  shift 2
  "$cli" eval -m "$m" -p "$PROMPT" -n 8 -t 2 --logits-out "$dir/$out" "$@" 2> "$dir/$out.err" ||
    { cat "$dir/$out.err"; fail "eval $m $*"; }
}
ev "$dir/k4.gguf" k4.flrf
ev "$dir/k2.gguf" k2.flrf
ev "$dir/k2.gguf" k2-as-4.flrf --override-kv qwen3moe.expert_used_count=int:4
cmp -s "$dir/k2.flrf" "$dir/k4.flrf" && fail "top-2 and top-4 give the same logits: the check cannot fail"
cmp -s "$dir/k2-as-4.flrf" "$dir/k4.flrf" || fail "expert_used_count=int:4: not the top-4 model's logits"
echo "ok: --override-kv qwen3moe.expert_used_count=int:4 gives the top-4 model's logits"
# the first override of a key wins (llama.cpp's loader keeps the first)
ev "$dir/k2.gguf" k2-first.flrf --override-kv qwen3moe.expert_used_count=int:4 \
  --override-kv qwen3moe.expert_used_count=int:3
cmp -s "$dir/k2-first.flrf" "$dir/k4.flrf" || fail "a second override of the key won"
# an override mends a key the file holds wrongly: expert_used_count stored as an f32
python3 - "$dir/k2.gguf" "$dir/bad.gguf" <<'PY' || fail "cannot write the mistyped model"
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
key = b"qwen3moe.expert_used_count"
at = d.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
assert struct.unpack_from("<I", d, at)[0] == 4  # u32
struct.pack_into("<I", d, at, 6)                # now f32
open(sys.argv[2], "wb").write(d)
PY
"$cli" eval -m "$dir/bad.gguf" -p "$PROMPT" -n 1 --logits-out "$dir/bad.flrf" 2> "$dir/bad.err" &&
  fail "the mistyped model opened"
ev "$dir/bad.gguf" mended.flrf --override-kv qwen3moe.expert_used_count=int:4
cmp -s "$dir/mended.flrf" "$dir/k4.flrf" || fail "the mended model: not the top-4 model's logits"
echo "ok: the first override of a key wins; an override mends a mistyped key ($(cat "$dir/bad.err"))"

# a key the file lacks, and a comma list
ev "$dir/k4.gguf" bos.flrf --override-kv "tokenizer.ggml.add_bos_token=bool:true,general.name=str:x"
grep -q "^eval: 11 prompt tokens" "$dir/bos.flrf.err" && grep -q "^eval: 10 prompt tokens" "$dir/k4.flrf.err" ||
  { cat "$dir/bos.flrf.err" "$dir/k4.flrf.err"; fail "add_bos_token=bool:true: not one prompt token more"; }
echo "ok: a key the file lacks is added (a BOS: one prompt token more), a list applies each"

# the other commands' sessions take it
"$cli" bench -m "$dir/k2.gguf" -p 8 -n 4 -r 1 --override-kv qwen3moe.expert_used_count=int:3 \
  > "$dir/bench" 2>&1 || { cat "$dir/bench"; fail "bench --override-kv"; }
"$cli" run -m "$dir/k2.gguf" -no-cnv -p "$PROMPT" -n 4 --temp 0 \
  --override-kv qwen3moe.expert_used_count=int:4 > "$dir/run" 2>&1 || { cat "$dir/run"; fail "run --override-kv"; }
echo "ok: bench and run take it"

refused() { # WHAT WORDS SPEC: eval exits 1 with one line holding WORDS
  what=$1 words=$2 spec=$3
  "$cli" eval -m "$dir/k4.gguf" -p "$PROMPT" -n 1 --logits-out "$dir/r.flrf" --override-kv "$spec" \
    > /dev/null 2> "$dir/err"
  rc=$?
  [ $rc -eq 1 ] || { cat "$dir/err"; fail "$what: exit $rc, not 1"; }
  [ "$(wc -l < "$dir/err")" -eq 1 ] || { cat "$dir/err"; fail "$what: not one line"; }
  grep -q -- "$words" "$dir/err" || { cat "$dir/err"; fail "$what: no '$words' in the message"; }
  echo "ok: $what: $(cat "$dir/err")"
}
refused "a kind the key table refuses" "general.architecture" "general.architecture=int:3"
refused "an empty item" "expected KEY=TYPE:VALUE" "general.name=str:x,,general.name=str:y"
refused "a value the key table refuses" "expert_used_count" "qwen3moe.expert_used_count=int:-1"
refused "a malformed item" "expected KEY=TYPE:VALUE" "qwen3moe.expert_used_count"
refused "an unknown type" "TYPE int, float, bool or str" "qwen3moe.expert_used_count=long:4"
refused "a bool that is neither" "expected true or false" "tokenizer.ggml.add_bos_token=bool:yes"
refused "a str over 127 bytes" "at most 127 bytes" "general.name=str:$(printf '%0130d' 0)"
refused "more experts per token than the layer has" "expert" "qwen3moe.expert_used_count=int:9"
echo "test-override-kv: all checks passed"
