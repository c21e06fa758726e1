#!/usr/bin/env bash
# bench-serve.sh: `faultline serve` under 1, 8 and 32 concurrent streaming
# clients (scripts/serve-load.js: fetch and the event stream), beside
# llama-server -np N given LLAMA_CPP, on the same model, threads and lengths;
# without a memory cap and inside bench-oversize's cap (CAP_PCT % of the file,
# a memory cgroup covering the page cache; caches dropped before each server).
# Prints per run: time to first token and inter-token latency p50/p99, and
# aggregate generated tokens/s; and faultline bench -npl C's figure for the
# same lengths (the server should lose no throughput: target within 10 %).
#
# env: MODEL=FILE (default bench-oversize's generated qwen3moe Q4_K)
#      LLAMA_CPP=DIR (llama-server), CLIENTS="1 8 32", PER_CLIENT=2, NPP=32, NTG=16,
#      THREADS=2, CAP_PCT=25 (CAP_PCT=0: uncapped only), RESERVE_MIB=160, PORT=18080,
#      FL=build/faultline, KEEP=1
# Needs root (cgroups, drop_caches), python3 and node (18+: fetch).
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-1 8 32} PER_CLIENT=${PER_CLIENT:-2} NPP=${NPP:-32} NTG=${NTG:-16}
THREADS=${THREADS:-2} CAP_PCT=${CAP_PCT:-25} RESERVE_MIB=${RESERVE_MIB:-160} PORT=${PORT:-18080}
FL=${FL:-build/faultline}
BENCH_NAME=bench-serve
. scripts/lib-bench.sh
command -v node >/dev/null || die "needs node"
caps=(0)
[ "$CAP_PCT" -gt 0 ] && caps+=("$CAP_PCT")
bench_start
n_vocab=$("$FL" inspect "$model" | grep -o 'vocab [0-9]*' | head -1 | cut -d' ' -f2)
[ -n "$n_vocab" ] || n_vocab=1000
say "model $model: $((size / 1048576)) MiB; vocab $n_vocab; load $(cut -d' ' -f1-3 /proc/loadavg)"


for cap_pct in "${caps[@]}"; do
  for c in $CLIENTS; do
    cells=$((c * (NPP + NTG + 16)))
    if [ "$cap_pct" -gt 0 ]; then
      limit=$((size * cap_pct / 100))
      fl_place=(--disk-moe --ram-budget "$((limit - ram_tier - RESERVE_MIB * 1048576 - cells * 49152))")
    else
      limit=0 fl_place=(--cpu-moe --ram-budget "$size")
    fi
    tag=cap$cap_pct-c$c
    say "$tag: faultline serve -np $c"
    if server_start "fl-$tag" "$limit" "$FL" serve -m "$model" -t "$THREADS" -np "$c" -c "$cells" \
        --port "$PORT" --max-queue 1024 "${fl_place[@]}"; then
      node scripts/serve-load.js "http://127.0.0.1:$PORT/v1" "$c" "$PER_CLIENT" "$NPP" "$NTG" \
        "$n_vocab" >"$work/fl-$tag.json" || true
    fi
    server_stop
    if [ -n "${LLAMA_CPP:-}" ]; then
      say "$tag: llama-server -np $c"
      if server_start "ll-$tag" "$limit" "$LLAMA_CPP/llama-server" -m "$model" -t "$THREADS" \
          -np "$c" -c "$cells" --port "$PORT" -nr --no-webui; then
        # its streams end in an error on noise unless the text is held to plain characters
        EXTRA_BODY='{"grammar": "root ::= [ a-zA-Z0-9.,]*"}' \
        node scripts/serve-load.js "http://127.0.0.1:$PORT/v1" "$c" "$PER_CLIENT" "$NPP" "$NTG" \
          "$n_vocab" >"$work/ll-$tag.json" || true
      fi
      server_stop
    fi
    if [ "$cap_pct" = 0 ]; then # the engine alone, the same lengths
      "$FL" bench -m "$model" -t "$THREADS" -npp "$NPP" -ntg "$NTG" -npl "$c" --cpu-moe \
        --ram-budget "$size" >"$work/bench-c$c.out" 2>/dev/null || true
    fi
  done
done

python3 - "$work" "$CLIENTS" "${caps[*]}" <<'PY'
import json, sys
work, clients, caps = sys.argv[1], [int(c) for c in sys.argv[2].split()], sys.argv[3].split()
def load(name):
    try:
        return json.load(open(f"{work}/{name}.json"))
    except (OSError, ValueError):
        return None
def bench_gen_tps(c):
    """faultline bench -npl c: generated tokens over T (prefill included)"""
    try:
        for line in open(f"{work}/bench-c{c}.out"):
            f = [x.strip() for x in line.split("|")]
            if len(f) > 10 and f[1].isdigit() and int(f[3]) == c:
                return int(f[3]) * int(f[2]) / float(f[9])
    except OSError:
        pass
    return None
fmt = lambda x, p="%.1f": "-" if x is None else p % x
print("\n| cap | clients | server | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | gen t/s | failed |")
print("|---|---|---|---|---|---|---|---|---|")
res = {}
for cap in caps:
    for c in clients:
        for who in ("fl", "ll"):
            r = load(f"{who}-cap{cap}-c{c}")
            if not r:
                continue
            res[(cap, c, who)] = r
            print(f"| {cap} % | {c} | {'faultline' if who == 'fl' else 'llama-server'} | "
                  f"{fmt(r['ttft_p50'])} | {fmt(r['ttft_p99'])} | {fmt(r['itl_p50'])} | "
                  f"{fmt(r['itl_p99'])} | {fmt(r['tps'], '%.2f')} | {r['failed']} |")
print("\ntargets:")
for c in clients:
    r, b = res.get(("0", c, "fl")), bench_gen_tps(c)
    if r and b:
        print(f"  {'MET   ' if r['tps'] >= 0.9 * b else 'MISSED'} {c} clients: server {r['tps']:.2f} gen t/s "
              f"vs faultline bench -npl {c} {b:.2f} (prefill included): {100 * r['tps'] / b:.0f} %")
r1, r32 = res.get(("0", 1, "fl")), res.get(("0", 32, "fl"))
if r1 and r32 and r1["itl_p50"] and r32["itl_p99"]:
    x = r32["itl_p99"] / r1["itl_p50"]
    print(f"  {'MET   ' if x <= 3 else 'MISSED'} p99 ITL at 32 clients <= 3x the 1-client median: {x:.1f}x")
for cap in caps:
    for c in clients:
        f, l = res.get((cap, c, "fl")), res.get((cap, c, "ll"))
        if f and l and l["tps"]:
            print(f"  cap {cap} %, {c} clients: faultline / llama-server gen t/s = {f['tps'] / l['tps']:.2f}x")
PY
