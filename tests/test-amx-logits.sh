#!/bin/sh
# test-amx-logits.sh: `faultline eval --all-logits` writes the same bytes with
# AMX on and off (FL_CPU_FEATURES=avx512), on every tests/data model and on
# generated Q4_K models (qwen3moe, llama/Mixtral, glm4moe, qwen35moe) and Q8_0 / MXFP4 ones
# wide enough that their products of 16+ tokens run on the tiles: resident
# (repacked Q4_K_R8) and with the experts paged from disk (file layout).
# Exit 77 where the CPU has no AMX (or the OS refuses it).
# usage: test-amx-logits.sh FAULTLINE
set -u
cli=$1
dir=$(mktemp -d /tmp/test-amx-logits.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$cli" version | grep -q '^cpu: amx ' || { echo "skipped: no AMX ($("$cli" version | grep '^cpu:'))"; exit 77; }

# ~90 tokens: the experts of the generated models get 32+ of them (file rows
# take AMX from 32 tokens, repacked rows from 16)
p1="It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness, it was the epoch of belief."
prompt="$p1 $p1 $p1"
eval_both() { # NAME MODEL ARGS...: AMX and VNNI logits, byte for byte
    name=$1 model=$2
    shift 2
    "$cli" eval -m "$model" -p "$prompt" -n 8 -t 2 --all-logits "$@" \
        --logits-out "$dir/$name.amx.flrf" >"$dir/log" 2>&1 || fail "$name: eval (amx): $(tail -1 "$dir/log")"
    FL_CPU_FEATURES=avx512 "$cli" eval -m "$model" -p "$prompt" -n 8 -t 2 --all-logits "$@" \
        --logits-out "$dir/$name.vnni.flrf" >"$dir/log" 2>&1 || fail "$name: eval (avx512): $(tail -1 "$dir/log")"
    cmp -s "$dir/$name.amx.flrf" "$dir/$name.vnni.flrf" || fail "$name $*: AMX and VNNI logits differ"
    echo "ok  $name $*"
}

for m in tests/data/*.gguf; do
    eval_both "$(basename "$m" .gguf)" "$m"
done
for spec in qwen3moe:Q4_K llama:Q4_K glm4moe:Q4_K qwen35moe:Q4_K qwen3moe:Q8_0 gpt-oss:MXFP4 llama:MXFP4; do
    arch=${spec%%:*} type=${spec#*:}
    g="$dir/gen-$arch-$type.gguf"
    "$cli" gen --arch "$arch" --type "$type" --n-embd 512 --layers 2 --experts 8 -o "$g" \
        >"$dir/log" 2>&1 || fail "gen $spec: $(tail -1 "$dir/log")"
    eval_both "gen-$arch-$type" "$g"
    eval_both "gen-$arch-$type" "$g" --disk-moe --ram-budget 4M
done
echo "test-amx-logits: all checks passed"
