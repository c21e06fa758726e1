#!/bin/sh
# test-split-gguf.sh: a model split into several files, as the big MoE GGUFs
# are published (llama.cpp's gguf-split: PREFIX-00001-of-0000N.gguf ...),
# opened from its first file as llama.cpp opens it.
#   - tests/gguf_split.py (llama-gguf-split's bytes, from the format) splits
#     three tests/data models, 8 tensors a file, one of them with a first file
#     that holds only the metadata (--no-tensor-first-split);
#   - `faultline eval` on the first file writes the unsplit model's logits
#     byte for byte: resident (--cpu-moe), experts paged (--disk-moe) in
#     uffd and explicit mode, and experts and a non-expert tensor paged (-ot);
#     each paged run really reads from the parts (loads > 0);
#   - `inspect` names every part, `inspect --json` too, and `--tensors`
#     gives each tensor's part and its offset in that file (the bytes there
#     are the unsplit file's); a later part alone shows its own header;
#   - one line and exit 1: a later part given, a part missing, a part that
#     says another index, a truncated part, a tensor in two parts, a first
#     file not named as one.
# usage: test-split-gguf.sh FAULTLINE   (run from the source folder)
set -u
cli=$1
# the CPU's bits: with a GPU (or the emulated one) the tensors -ot pages would
# move off the device, and its products give other bits than the CPU's
export CUDA_VISIBLE_DEVICES=
dir=$(mktemp -d /tmp/test-split-gguf.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
PROMPT="The capital of France is"

eval_to() { # MODEL OUT [flags...]: eval's FLRF file and paging statistics
  m=$1 out=$2
  shift 2
  "$cli" eval -m "$m" -p "$PROMPT" -n 8 -t 2 --logits-out "$out" --stats-json "$out.json" "$@" \
    2> "$out.err" || { cat "$out.err"; fail "eval $m $*"; }
}
loads() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['totals']['loads'])" "$1"; }

uffd=uffd
"$cli" eval -m tests/data/qwen3moe-tiny-Q8_0.gguf -p "$PROMPT" -n 1 --logits-out "$dir/probe.flrf" \
  --disk-moe --pager uffd > /dev/null 2>&1 || { uffd=; echo "userfaultfd unavailable: explicit mode only"; }

for spec in "qwen3moe-tiny-Q8_0 400K" "deepseek2-tiny-F16 1M --no-tensor-first-split" \
            "gpt-oss-tiny-MXFP4 1M"; do
  set -- $spec
  name=$1 budget=$2
  shift 2
  n=$(python3 tests/gguf_split.py --split-max-tensors 8 "$@" "tests/data/$name.gguf" "$dir/$name") ||
    fail "gguf_split.py $name"
  first=$(printf '%s/%s-00001-of-%05d.gguf' "$dir" "$name" "$n")
  [ "$n" -ge 3 ] && [ -f "$first" ] || fail "$name: $n parts"
  eval_to "tests/data/$name.gguf" "$dir/$name.whole.flrf" --cpu-moe
  for mode in $uffd explicit; do
    for place in "--disk-moe" "-ot attn_output=disk,exps=disk"; do
      out="$dir/$name.$mode.$(echo "$place" | tr -dc 'a-z').flrf"
      eval_to "$first" "$out" $place --pager $mode --ram-budget "$budget"
      cmp -s "$out" "$dir/$name.whole.flrf" || fail "$name split, $place --pager $mode: other logits"
      [ "$(loads "$out.json")" -gt 0 ] || fail "$name split, $place --pager $mode: nothing paged"
    done
  done
  eval_to "$first" "$dir/$name.split.flrf" --cpu-moe
  cmp -s "$dir/$name.split.flrf" "$dir/$name.whole.flrf" || fail "$name split, resident: other logits"
  "$cli" inspect "$first" > "$dir/inspect" || fail "inspect $first"
  [ "$(grep -c "part [0-9]* of $n:" "$dir/inspect")" -eq "$n" ] || fail "inspect: not $n parts"
  "$cli" inspect --json "$first" |
    python3 -c "import json,sys; d=json.load(sys.stdin); assert len(d['parts']) == $n, d.get('parts')" ||
    fail "inspect --json: not $n parts"
  # every tensor's part and offset in that file hold the unsplit file's bytes of it
  "$cli" inspect --tensors --json "$first" > "$dir/split.json" &&
    "$cli" inspect --tensors --json "tests/data/$name.gguf" > "$dir/whole.json" || fail "inspect --tensors"
  python3 - "$dir/split.json" "$dir/whole.json" "tests/data/$name.gguf" <<'PY' || fail "$name: inspect --tensors: offsets"
import json, sys
s, w = (json.load(open(f)) for f in sys.argv[1:3])
whole = {t["name"]: t for t in w["tensors"]}
parts = [p["path"] for p in s["parts"]]
def read(path, off, n):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(n)
for t in s["tensors"]:
    u = whole[t["name"]]
    n = min(t["bytes"], 4096)
    assert read(parts[t["part"] - 1], t["offset"], n) == read(sys.argv[3], u["offset"], n), t["name"]
assert len(s["tensors"]) == len(w["tensors"])
PY
  echo "ok: $name in $n files: the same logits resident and paged (${uffd:+uffd and }explicit)"
done

# --- broken splits: one line, exit 1 -------------------------------------------------------
q="$dir/q"
mkdir "$q"
refused() { # WHAT MODEL WORDS: eval of MODEL exits 1 with one line holding WORDS
  what=$1 m=$2 words=$3
  "$cli" eval -m "$m" -p "$PROMPT" -n 1 --logits-out "$dir/refused.flrf" > /dev/null 2> "$dir/err"
  rc=$?
  [ $rc -eq 1 ] || { cat "$dir/err"; fail "$what: exit $rc, not 1"; }
  [ "$(wc -l < "$dir/err")" -eq 1 ] || { cat "$dir/err"; fail "$what: not one line"; }
  grep -q -- "$words" "$dir/err" || { cat "$dir/err"; fail "$what: no '$words' in the message"; }
  echo "ok: $what: $(cat "$dir/err")"
}
fresh() {
  rm -f "$q"/*
  python3 tests/gguf_split.py --split-max-tensors 8 tests/data/qwen3moe-tiny-Q8_0.gguf "$q/m" > /dev/null
}
fresh
# inspect shows a later part alone (as gguf-dump does), where eval refuses it
"$cli" inspect "$q/m-00002-of-00004.gguf" > "$dir/part2" 2>&1 && grep -q "^tensors: *8," "$dir/part2" ||
  { cat "$dir/part2"; fail "inspect of a later part: not its 8 tensors"; }
refused "the second part given" "$q/m-00002-of-00004.gguf" "open PREFIX-00001-of-00004.gguf"
rm "$q/m-00003-of-00004.gguf"
refused "a part missing" "$q/m-00001-of-00004.gguf" "m-00003-of-00004.gguf: No such file"
fresh
cp "$q/m-00002-of-00004.gguf" "$q/m-00003-of-00004.gguf"
refused "a part that says another index" "$q/m-00001-of-00004.gguf" "not part 3 of 4"
# the same part again with its index (split.no, the first key: byte 44) made 2: its tensors twice
printf '\002' | dd of="$q/m-00003-of-00004.gguf" bs=1 seek=44 conv=notrunc 2> /dev/null
refused "a tensor in two parts" "$q/m-00001-of-00004.gguf" "is in two of its 4 split files"
fresh
truncate -s -100 "$q/m-00004-of-00004.gguf"
refused "a truncated part" "$q/m-00001-of-00004.gguf" "m-00004-of-00004.gguf"
fresh
mv "$q/m-00001-of-00004.gguf" "$q/m.gguf"
refused "a first file not named as one" "$q/m.gguf" "not named as one"
echo "test-split-gguf: all checks passed"
