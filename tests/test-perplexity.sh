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
#     not there, --chunks 0: one line, exit 1 or 2;
#   - --kl-divergence of qwen3moe Q8_0 from llama-perplexity's base of the
#     F16 model (tests/data/kld): its report's lines as llama.cpp's, the
#     base's PPL to the byte, the KL-divergence and same-top figures within
#     the two engines' noise; the same stdout by 4 or 1 chunks per call and
#     with the experts paged;
#   - --kl-divergence-base written here: llama.cpp's header and tokens byte
#     for byte, the F16 model against it (KL ~ 0); a failed run leaves an
#     existing file as it was; refusals of a bad base in one line.
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

# --- KL-divergence --------------------------------------------------------
kbase=tests/data/kld/qwen3moe-tiny-F16.c64.kld
q8=tests/data/qwen3moe-tiny-Q8_0.gguf
kld() { # MODEL BASE ARGS...
  km=$1 kb=$2
  shift 2
  "$cli" perplexity -m "$km" --kl-divergence-base "$kb" --kl-divergence -t 2 "$@" 2>"$dir/err"
}
kld $q8 $kbase -b 256 >"$dir/kld" || fail "--kl-divergence: $(cat "$dir/err")"
python3 - "$dir/kld" tests/data/kld/llama-kld-qwen3moe-tiny-Q8_0.txt <<'PY' || fail "--kl-divergence: see above"
import re, sys
ours, ref = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
def labels(t):  # the report's lines without their numbers
    return [re.sub(r"-?[0-9]+\.?[0-9]*", "#", l) for l in t.splitlines() if l.strip() and "minutes" not in l]
if labels(ours) != labels(ref):
    sys.exit("the report's lines are not llama-perplexity's:\n" + "\n".join(labels(ours)))
def val(t, key):
    return float(re.search(re.escape(key) + r"\s*:\s*(-?[0-9.]+)", t).group(1))
base = [l for l in ours.splitlines() if l.startswith("Mean PPL(base)")]
if base != [l for l in ref.splitlines() if l.startswith("Mean PPL(base)")]:
    sys.exit(f"PPL(base) differs: {base}")
k, kr = val(ours, "Mean    KLD"), val(ref, "Mean    KLD")
top, topr = val(ours, "Same top p"), val(ref, "Same top p")
lr, lrr = val(ours, "Mean ln(PPL(Q)/PPL(base))"), val(ref, "Mean ln(PPL(Q)/PPL(base))")
print(f"  KLD {k} (llama.cpp {kr}), same top {top} % ({topr}), ln ratio {lr} ({lrr})")
ok = abs(k - kr) <= 0.05 * kr and abs(top - topr) <= 2 * 100 / 124 + 1e-3 and abs(lr - lrr) <= 1e-2
sys.exit(0 if ok else "beyond the two engines' noise")
PY
for args in "-b 64" "-b 256 --disk-moe --ram-budget 300K"; do
  # shellcheck disable=SC2086
  kld $q8 $kbase $args >"$dir/other" || fail "--kl-divergence $args: $(cat "$dir/err")"
  cmp -s "$dir/kld" "$dir/other" || fail "--kl-divergence $args: another report than -b 256's"
done
echo "--kl-divergence from llama-perplexity's base: its report, 4 or 1 chunks per call, paged: the same bytes"

"$cli" perplexity -m $m -f "$data/text.txt" -t 2 -c 64 -b 256 --chunks 4 --kl-divergence-base "$dir/base.kld" \
  >"$dir/out" 2>"$dir/err" || fail "--kl-divergence-base: $(cat "$dir/err")"
ppl -b 512 -c 64 --chunks 4 >"$dir/plain" || fail "plain: $(cat "$dir/err")"
cmp -s "$dir/out" "$dir/plain" || fail "saving a base changed the perplexity printed"
[ "$(wc -c <"$dir/base.kld")" = "$(wc -c <$kbase)" ] &&
  cmp -s -n $((20 + 4 * 64 * 4)) "$dir/base.kld" $kbase || fail "the base's header or tokens are not llama.cpp's"
kld $m "$dir/base.kld" >"$dir/self" || fail "F16 against its own base: $(cat "$dir/err")"
grep -q "^Same top p: 100.000" "$dir/self" && grep -Eq "^Mean    KLD: +-?0.00000[0-9]" "$dir/self" ||
  fail "F16 against its own base: $(grep -E 'Mean    KLD|Same top' "$dir/self")"
echo "--kl-divergence-base: llama.cpp's header and tokens, the model against its base KL ~ 0"

printf 'keep me' >"$dir/kept.kld"
"$cli" perplexity -m $m -f "$data/text.txt" -t 2 -c 4096 --kl-divergence-base "$dir/kept.kld" >/dev/null 2>&1 &&
  fail "a too short text succeeded"
[ "$(cat "$dir/kept.kld")" = "keep me" ] && [ "$(ls "$dir" | grep -c kept)" = 1 ] ||
  fail "a failed run touched the existing base or left a temporary file: $(ls "$dir")"
head -c 100000 $kbase >"$dir/short.kld"
bad 1 "truncated or not a base file" --kl-divergence-base "$dir/short.kld" --kl-divergence
bad 1 "not a file of log-probabilities" --kl-divergence-base "$data/text.txt" --kl-divergence
python3 - "$dir/v1000.kld" <<'PY'
import struct, sys  # a well-formed base over a vocabulary of 1000 (rows of zeros)
n_ctx, n_vocab, n_chunk = 64, 1000, 2
rows = n_chunk * (n_ctx - 1 - n_ctx // 2) * (2 * ((n_vocab + 1) // 2) + 4)
open(sys.argv[1], "wb").write(b"_logits_" + struct.pack("<Iii", n_ctx, n_vocab, n_chunk)
                              + struct.pack(f"<{n_ctx * n_chunk}i", *range(n_ctx * n_chunk)) + bytes(2 * rows))
PY
bad 1 "a vocabulary of 1000 tokens; the model's has 1025" --kl-divergence-base "$dir/v1000.kld" --kl-divergence
bad 2 "needs --kl-divergence-base" --kl-divergence
bad 1 "$dir/no/such" -f "$data/text.txt" -c 128 --kl-divergence-base "$dir/no/such/base.kld"
echo "refused in one line: a truncated base, a text file, a base of another vocabulary, no base, a missing folder; a failed run keeps the old base"
echo "test-perplexity: all checks passed"
