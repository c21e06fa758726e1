#!/bin/sh
# test-kv-cache-types.sh: -ctk/-ctv (a quantized KV cache) against llama.cpp's
# own runs with the same cache types (tests/data/ref/kv/README.md):
#   - every reference: `faultline eval` with its K and V types; per type pair
#     the median of the cases' mean KL(llama.cpp || faultline) <= 1e-6 and
#     every case's top-1 agreement >= 90 % (most cases agree to the last bits
#     of a float; the rest as the F16 cache's runs do, see the README);
#   - heads of 64 and 128 values (models from `faultline gen`, checked by
#     sha256): llama.cpp rotates such a quantized cache (Walsh-Hadamard); the
#     references it wrote with the rotation switched off must be >= 100x
#     further from faultline's logits than the rotated ones;
#   - refused with one line: a type the cache cannot hold (exit 2), an MLA
#     model's latent cache and heads that are not whole blocks (exit 1).
# usage: test-kv-cache-types.sh FAULTLINE   (run from the source folder)
set -u
cli=$1
refs=tests/data/ref/kv
dir=$(mktemp -d /tmp/test-kv-types.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# --- the models with 64- and 128-value heads, as the references' were made ---
gen() {
  "$cli" gen -q --seed 7 --n-embd 256 --layers 2 --experts 8 --top-k 2 --expert-ff 128 \
    --heads 4 --heads-kv 2 "$@" || fail "gen $*"
}
gen --arch qwen3moe --type Q8_0 --head-dim 128 -o "$dir/qwen3moe-h128-Q8_0.gguf"
gen --arch gpt-oss --type MXFP4 --head-dim 64 -o "$dir/gpt-oss-h64-MXFP4.gguf"
gen --arch deepseek2 --type Q8_0 -o "$dir/deepseek2-r96-Q8_0.gguf" # MLA: latent rows of 96
(cd "$dir" && sha256sum -c --quiet) <<EOF || fail "faultline gen writes other bytes than the references' models: regenerate tests/data/ref/kv"
4bbe3987b9dc9ecab05cf20a35dedf31cc011dafac707bf8341be52570f3b0e1  qwen3moe-h128-Q8_0.gguf
6480b7ddec9882dcfb6aa7e41de1483ad71aa22e17f3bf7c8ab4593e1076c8c3  gpt-oss-h64-MXFP4.gguf
8ba3499c6b8e28963f194338f15a6d29c9d502d45d342385cad523fbbaef6cee  deepseek2-r96-Q8_0.gguf
EOF

# --- every reference -------------------------------------------------------
# name: MODEL.PROMPT.kTYPE-vTYPE[.norot].flrf
: > "$dir/results"
for ref in "$refs"/*.flrf; do
  name=$(basename "$ref" .flrf)
  model=${name%%.*}
  rest=${name#*.}
  prompt=${rest%%.*}
  pair=${rest#*.}
  types=${pair%%.*}
  ctk=${types%%-*}; ctk=${ctk#k}
  ctv=${types#*-}; ctv=${ctv#v}
  path=tests/data/$model.gguf
  [ -f "$path" ] || path=$dir/$model.gguf
  # the MLA models' references came from llama.cpp built for AVX2 only (the
  # README): faultline at its AVX2 level sums as that build does; its
  # AVX-512 level sums the weight products in another order, a few ulps that
  # a q4_0 cache's rounding can turn into another top-1 on a tiny model
  level=
  case $model in deepseek32-tiny-F16 | glm-dsa-tiny-F16 | deepseek2-r96-Q8_0) level=avx2 ;; esac
  FL_CPU_FEATURES=${level:-${FL_CPU_FEATURES:-}} "$cli" eval -m "$path" -f "$refs/$prompt.txt" -t 2 \
    -c 512 -ctk "$ctk" -ctv "$ctv" --logits-out "$dir/out.flrf" --force > "$dir/eval.log" 2>&1 ||
    { cat "$dir/eval.log"; fail "$name: eval -ctk $ctk -ctv $ctv"; }
  "$cli" compare "$ref" "$dir/out.flrf" > "$dir/cmp.log" 2>&1
  line=$(grep '^logits:' "$dir/cmp.log") || { cat "$dir/cmp.log"; fail "$name: compare"; }
  kl=$(echo "$line" | sed -n 's/.*KL mean \([^ ]*\) .*/\1/p')
  top=$(echo "$line" | sed -n 's/.*top-1 \([0-9]*\)\/\([0-9]*\) .*/\1 \2/p')
  echo "$pair $name $kl $top" >> "$dir/results"
done
awk '{ printf "  %-46s KL %-10s top-1 %s/%s\n", $2, $3, $4, $5 }' "$dir/results"

awk '
  $1 ~ /norot/ || $1 == "kf16-vf16" { next }
  { n[$1]++; kl[$1, n[$1]] = $3 + 0
    if ($4 < 0.9 * $5) { print "FAIL: " $2 ": top-1 " $4 "/" $5 " below 90 %"; bad = 1 } }
  END {
    for (p in n) {
      m = n[p]
      for (i = 1; i <= m; i++) v[i] = kl[p, i]
      for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      med = m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
      printf "  %-14s %2d cases: median mean KL %.3g (<= 1e-6)\n", p, m, med
      if (!(med <= 1e-6)) { print "FAIL: " p ": median mean KL " med " above 1e-6"; bad = 1 }
    }
    exit bad
  }' "$dir/results" || fail "faultline's quantized caches do not follow llama.cpp's"

# the rotation: the unrotated references are far, the rotated ones near
for norot in $(awk '$1 ~ /norot/ { print $2 }' "$dir/results"); do
  rot=${norot%.norot}
  awk -v a="$rot" -v b="$norot" '
    $2 == a { near = $3 + 0 } $2 == b { far = $3 + 0 }
    END {
      printf "  %s: KL %.3g to the rotated reference, %.3g to the unrotated one\n", a, near, far
      exit !(far >= 1e-4 && far >= 100 * near)
    }' "$dir/results" || fail "$rot: not rotated as llama.cpp rotates a quantized cache"
done

# --- refusals --------------------------------------------------------------
refused() { # STATUS WORDS -- ARGS...
  want=$1 words=$2
  shift 3
  "$cli" eval -t 2 -n 1 -p hi --logits-out "$dir/x.flrf" --force "$@" > "$dir/err" 2>&1
  rc=$?
  [ $rc -eq "$want" ] || { cat "$dir/err"; fail "$*: exit $rc, expected $want"; }
  [ "$(wc -l < "$dir/err")" -eq 1 ] || { cat "$dir/err"; fail "$*: not one line"; }
  grep -q "$words" "$dir/err" || { cat "$dir/err"; fail "$*: the line does not say '$words'"; }
}
refused 2 "not a KV cache type" -- -m tests/data/qwen3moe-tiny-Q8_0.gguf -ctk bf16
refused 2 "not a KV cache type" -- -m tests/data/qwen3moe-tiny-Q8_0.gguf -ctv q4_K
refused 1 "whole 32-value blocks" -- -m tests/data/deepseek2-tiny-F16.gguf -ctk q8_0 # rows of 80
gen --arch qwen3moe --type Q8_0 --head-dim 48 -o "$dir/h48.gguf"
refused 1 "whole 32-value blocks" -- -m "$dir/h48.gguf" -ctv q8_0
refused 1 "the KV cache stays F16" -- -m tests/data/minimax-m3-tiny-F16.gguf -ctk q8_0 # MSA's keys
echo "ok: $(wc -l < "$dir/results") references, refusals"
