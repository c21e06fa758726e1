#!/usr/bin/env bash
# bench-prefetch.sh: the prefetch x cache-policy grid (docs/prefetch.md).
#
# Every predictor (--prefetch none, router, lookahead:1, history) with every
# cache policy (--cache lfu-next (the default), lfu-step, lfu-decay, lru, pinned-hot) at caps of 15, 25 and 50 %
# of the file, each run inside a memory cgroup capped there (v1 memory
# controller, or v2; the cap covers the page cache) after dropping caches, as
# scripts/bench-oversize.sh does (cgroup, cache and model helpers: scripts/lib-bench.sh).
# faultline's expert budget = cap - its RAM-tier bytes - RESERVE_MIB. A run
# is `faultline bench -p 0 -n N_GEN` (1 warm-up + N_GEN decodes of random
# tokens, 2 threads); pinned-hot's profile comes from one profiling run
# first: a decode of N_CAL other random tokens (bench --seed 7) with the 50 %
# cap's expert budget, --stats-json. Decode counts every token's choices (a
# prefill run would count each expert once per batch: a flat profile), and
# the other seed keeps the profile from seeing the measured tokens.
#
# env: MODEL=FILE   default: the oversize benchmark's model (qwen3moe Q4_K, n_embd
#                   2048, 24 layers, 64 experts top-8, expert n_ff 768, 4.05 GiB;
#                   generated once under ~/.cache/faultline like bench-oversize.sh)
#      N_GEN=16 N_CAL=64 THREADS=2 RESERVE_MIB=160 CAPS="15 25 50"
#      PREFETCH="none router lookahead:1 history" CACHE="lfu-next lfu-step lfu-decay lru pinned-hot"
#      FL=build/faultline  KEEP=1 (keep raw outputs)
#      REPLAY=0 (skip the replay below)  N_TRACE=0  SEQS=16  TRACES=DIR (reuse traces)
# Needs root (cgroups, drop_caches) and python3. Prints one table, sorted by
# decode tokens/s within each cap; then the same caps' expert budgets (in
# experts: budget / bytes of one expert) replayed offline by bench-xlru on
# held-apart routing traces (scripts/prompts/cache-held.txt read from each
# line on, or a line and N_TRACE greedy tokens: lib-bench.sh's bench_traces;
# pinned-hot's profile from cache-tune.txt),
# each trace alone and SEQS of them stepped together, with Belady's MIN
# beside every policy: how far each policy is from the optimum at the
# budgets measured above.
set -euo pipefail
cd "$(dirname "$0")/.."
N_GEN=${N_GEN:-16} N_CAL=${N_CAL:-64} THREADS=${THREADS:-2} RESERVE_MIB=${RESERVE_MIB:-160}
CAPS=${CAPS:-15 25 50}
PREFETCH=${PREFETCH:-none router lookahead:1 history}
CACHE=${CACHE:-lfu-next lfu-step lfu-decay lru pinned-hot}
FL=${FL:-build/faultline}
REPLAY=${REPLAY:-1} N_TRACE=${N_TRACE:-0} SEQS=${SEQS:-16}
BENCH_NAME=bench-prefetch
. scripts/lib-bench.sh

bench_start

budget_for() { echo $(( size * $1 / 100 - ram_tier - RESERVE_MIB * 1048576 )); }
drop_caches
bw_mib=$(count=$((size / 8388608 < 128 ? size / 8388608 : 128)); \
  dd if="$model" of=/dev/null bs=8M count=$count iflag=direct 2>&1 | \
  awk -v n=$count '/copied/ { for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) t = $(i - 1); print n * 8 / t }')
say "model $model ($((size / 1048576)) MiB, RAM tier $((ram_tier / 1048576)) MiB); disk ${bw_mib:-?} MiB/s"
common=(-m "$model" -t "$THREADS" -r 1 --disk-moe)
profile=$work/profile.json
# (capped at the file size: this run only counts expert uses)
say "profile: decode of $N_CAL other tokens (--seed 7), expert budget of the 50 % cap -> pinned-hot"
run_capped "$size" calibrate "$FL" bench "${common[@]}" -p 0 -n "$N_CAL" --seed 7 \
  --ram-budget "$(budget_for 50)" --stats-json "$profile"
[ -s "$profile" ] || die "calibration run wrote no profile"
for pct in $CAPS; do
  budget=$(budget_for "$pct")
  [ "$budget" -gt 0 ] || { say "cap $pct %: no room for experts, skipped"; continue; }
  for pf in $PREFETCH; do
    for c in $CACHE; do
      name="c$pct-${pf//:/_}-$c"
      arg=$c; [ "$c" = pinned-hot ] && arg="pinned-hot:$profile"
      say "cap $pct % (expert budget $((budget / 1048576)) MiB): --prefetch $pf --cache $c"
      run_capped $((size * pct / 100)) "$name" "$FL" bench "${common[@]}" -p 0 -n "$N_GEN" \
        --ram-budget "$budget" --prefetch "$pf" --cache "$arg" --stats --stats-json "$work/$name.json"
    done
  done
done

# --- the table: per cap, sorted by decode t/s ---------------------------------
python3 - "$work" "$size" "$ram_tier" "$RESERVE_MIB" "$N_GEN" "${bw_mib:-0}" "$CAPS" \
  "$PREFETCH" "$CACHE" "$model" <<'PY'
import json, os, re, sys
work, size, ram_tier, reserve, n_gen = sys.argv[1], *map(int, sys.argv[2:6])
bw = float(sys.argv[6]) * 1048576
caps, pfs, caches, model = sys.argv[7].split(), sys.argv[8].split(), sys.argv[9].split(), sys.argv[10]
MiB = 1048576.0
tokens = n_gen + 1  # bench's warm-up decode is in the statistics too

def read(path):
    try:
        return open(path).read()
    except OSError:
        return ""

def row(pct, pf, c):
    name = f"c{pct}-{pf.replace(':', '_')}-{c}"
    tps = None
    for line in read(f"{work}/{name}.out").splitlines():
        cols = [x.strip() for x in line.split("|")]
        if len(cols) > 7 and cols[6] == f"tg{n_gen}":
            tps = float(cols[7].split()[0])
    try:
        t = json.loads(read(f"{work}/{name}.json"))["totals"]
    except ValueError:
        t = None
    err = read(f"{work}/{name}.err")
    m = re.search(r"precision ([\d.]+)%, recall ([\d.]+)%", err)
    ready = re.search(r"([\d.]+)% of routed experts resident when chosen", err)
    r = {"pct": int(pct), "pf": pf, "cache": c, "tps": tps}
    if t:
        # hit = the expert was resident when the router chose it
        r["hit"] = float(ready.group(1)) if ready else 0.0
        r["read"] = t["bytes_read"] / tokens / MiB
        r["stall"] = t["stall_ns"] / tokens / 1e6
        r["bound"] = bw / (t["bytes_read"] / tokens) if t["bytes_read"] and bw else float("inf")
    r["prec"], r["rec"] = (m.group(1), m.group(2)) if m else ("-", "-")
    return r

print(f"\nbench-prefetch: {os.path.basename(model)}, {size / MiB:.0f} MiB, RAM tier "
      f"{ram_tier / MiB:.0f} MiB, reserve {reserve} MiB; decode of {n_gen} tokens, "
      f"disk {bw / MiB:.0f} MiB/s")
print("| cap | expert budget | --prefetch | --cache | decode t/s | hit % | precision % | recall % "
      "| MiB read/token | stall ms/token | I/O bound t/s |")
print("| --: | --: | --- | --- | --: | --: | --: | --: | --: | --: | --: |")
for pct in caps:
    budget = size * int(pct) // 100 - ram_tier - reserve * 1048576
    rows = [row(pct, pf, c) for pf in pfs for c in caches]
    rows.sort(key=lambda r: -(r["tps"] or 0))
    for r in rows:
        if r["tps"] is None or "hit" not in r:
            print(f"| {pct} % | {budget / MiB:.0f} MiB | {r['pf']} | {r['cache']} | failed | | | | | | |")
            continue
        bound = "inf" if r["bound"] == float("inf") else f"{r['bound']:.1f}"
        print(f"| {pct} % | {budget / MiB:.0f} MiB | {r['pf']} | {r['cache']} | {r['tps']:.2f} | "
              f"{r['hit']:.1f} | {r['prec']} | {r['rec']} | {r['read']:.1f} | {r['stall']:.1f} | "
              f"{bound} |")
PY

# --- the same budgets replayed offline, beside Belady's MIN --------------------
[ "$REPLAY" = 1 ] || exit 0
[ -x build/bench-xlru ] || cmake --build build --target bench-xlru >/dev/null
traces=${TRACES:-$work/traces}
bench_traces "$traces" "$N_TRACE" "$THREADS"
# one expert's bytes (the pager's charge), from the profiling run's units
unit=$(python3 -c 'import json, sys
u = [x["bytes"] for x in json.load(open(sys.argv[1]))["units"] if x.get("expert", -1) >= 0]
print(max(u) if u else 0)' "$profile")
[ "$unit" -gt 0 ] || die "$profile: no expert units"
slots=()
for pct in $CAPS; do
  b=$(budget_for "$pct")
  [ "$b" -ge "$unit" ] && slots+=(-c $((b / unit)))
done
tune=() held=()
for f in "${TRACE_TUNE[@]}"; do tune+=(-t "$f"); done
held=("${TRACE_HELD[@]}")
echo
echo "replay at the caps' expert budgets ($((unit / 1024)) KiB per expert): held-apart prompts, each alone"
build/bench-xlru "${slots[@]}" "${tune[@]}" "${held[@]}"
if [ "${#held[@]}" -ge "$SEQS" ]; then
  echo
  echo "replay at the caps' expert budgets: $SEQS held-apart prompts stepped together"
  build/bench-xlru -s "$SEQS" "${slots[@]}" "${tune[@]}" "${held[@]}"
fi
