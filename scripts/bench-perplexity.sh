#!/usr/bin/env bash
# bench-perplexity.sh: `faultline perplexity` beside `llama-perplexity` on
# the oversize model -- the overnight kind of job, thousands of tokens
# scored with no generation -- without a memory cap and inside
# bench-oversize's cap (CAP_PCT % of the file, a memory cgroup that covers
# the page cache; caches dropped before every run), alternating faultline /
# llama.cpp, ROUNDS times. Prints per run the wall seconds (load included),
# tokens per second (CHUNKS x CTX over those seconds), bytes read from the
# block device per token, and the final PPL (the two must agree: same
# chunks, same scoring); then the medians and the ratios.
#
# faultline runs -b BATCH / -c CTX chunks per forward call as sequences, and
# capped lets its budget fit itself under the cgroup (--disk-moe); llama.cpp
# gets the same -c, -b, -t and, capped, --no-repack --no-warmup (mmap).
#
# env: MODEL=FILE       the GGUF (default: bench-oversize's generated qwen3moe Q4_K)
#      LLAMA_CPP=DIR    llama.cpp's bin folder (llama-perplexity): run it too
#      CTX=512 BATCH=2048 CHUNKS=16 THREADS=2 CAP_PCT=25 ROUNDS=1
#      FL=build/faultline KEEP=1 (keep the raw outputs)
#      FL_ARGS="--prefetch none"  more flags for every faultline run
#      LL_ARGS="-fa on"           more flags for every llama.cpp run
# Needs root (cgroups, drop_caches) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
CTX=${CTX:-512} BATCH=${BATCH:-2048} CHUNKS=${CHUNKS:-16} THREADS=${THREADS:-2}
CAP_PCT=${CAP_PCT:-25} ROUNDS=${ROUNDS:-1} RESERVE_MIB=${RESERVE_MIB:-160}
FL=${FL:-build/faultline}
BENCH_NAME=bench-perplexity
. scripts/lib-bench.sh

bench_start
if [ -n "${LLAMA_CPP:-}" ]; then
  [ -x "$LLAMA_CPP/llama-perplexity" ] || die "$LLAMA_CPP/llama-perplexity not found"
fi
# the text: tests/data/ppl's words repeated until CHUNKS chunks fit
text=$work/text.txt
: >"$text"
need=$((CHUNKS * CTX))
while :; do
  cat tests/data/ppl/text.txt >>"$text"
  n=$("$FL" tokenize -m "$model" -f "$text" --ids-only | tr -cd , | wc -c)
  [ "$n" -ge "$need" ] && break
done
say "model $model: $((size / 1048576)) MiB; cap $CAP_PCT % = $((size * CAP_PCT / 100 / 1048576)) MiB;" \
    "$CHUNKS chunks of $CTX tokens (text: $n tokens); load $(cut -d' ' -f1-3 /proc/loadavg)"

read -r -a fl_args <<<"${FL_ARGS:-}"
read -r -a ll_args <<<"${LL_ARGS:-}"
fl=("$FL" perplexity -m "$model" -f "$text" -c "$CTX" -b "$BATCH" --chunks "$CHUNKS" -t "$THREADS"
    "${fl_args[@]}")
ll=()
[ -n "${LLAMA_CPP:-}" ] && ll=("$LLAMA_CPP/llama-perplexity" -m "$model" -f "$text" -c "$CTX"
                               -b "$BATCH" --chunks "$CHUNKS" -t "$THREADS" "${ll_args[@]}")
for r in $(seq 1 "$ROUNDS"); do
  for pct in 0 "$CAP_PCT"; do
    cap_placement "$pct" "$size"
    say "round $r, cap $pct %: faultline"
    run_capped "$limit" "fl-$pct-$r" "${fl[@]}" "${fl_place[@]}"
    if [ ${#ll[@]} -gt 0 ]; then
      say "round $r, cap $pct %: llama-perplexity"
      run_capped "$limit" "ll-$pct-$r" "${ll[@]}" "${ll_place[@]}"
    fi
  done
done

python3 - "$work" "$ROUNDS" "$CAP_PCT" "$CHUNKS" "$CTX" "$ram_tier" <<'PY'
import re, statistics, sys
work, rounds, cap, chunks, ctx, ram_tier = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
tokens = chunks * ctx
def run(tool, pct, r):
    base = f"{work}/{tool}-{pct}-{r}"
    try:
        rbytes, peak, secs, rc, rss = open(base + ".io").read().split()
    except OSError:
        return None
    text = open(base + ".out", errors="replace").read() + open(base + ".err", errors="replace").read()
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", text)
    if int(rc) != 0 or not m:
        return None
    read = int(rbytes) - (ram_tier if tool == "fl" else 0)  # faultline reads its RAM tier once
    return {"s": float(secs), "tps": tokens / float(secs), "mib": max(read, 0) / tokens / 1048576,
            "ppl": m.group(1)}
print(f"\n| cap | tool | round | seconds | tokens/s | disk MiB/token | PPL |\n|---|---|---|---|---|---|---|")
med = {}
for pct in ("0", cap):
    for tool in ("fl", "ll"):
        rs = [x for x in (run(tool, pct, r) for r in range(1, rounds + 1)) if x]
        for i, x in enumerate(rs):
            print(f"| {pct} % | {'faultline' if tool == 'fl' else 'llama.cpp'} | {i + 1} | {x['s']:.1f} | "
                  f"{x['tps']:.1f} | {x['mib']:.2f} | {x['ppl']} |")
        if rs:
            med[pct, tool] = statistics.median(x["tps"] for x in rs)
for pct in ("0", cap):
    if (pct, "fl") in med and (pct, "ll") in med:
        print(f"cap {pct} %: faultline / llama.cpp tokens per second (medians): "
              f"{med[pct, 'fl']:.1f} / {med[pct, 'll']:.1f} = {med[pct, 'fl'] / med[pct, 'll']:.2f}x")
print("tokens/s: CHUNKS x CTX over the wall seconds of the whole run (load included); "
      "disk MiB/token: the process's block-device reads (faultline's RAM tier subtracted) over those tokens")
PY
