#!/usr/bin/env bash
# bench-batch.sh: many sequences decoding together (docs/batching.md) on the
# oversize model, faultline beside llama-batched-bench, without a memory cap
# and inside bench-oversize's cap (CAP_PCT % of the file, a memory cgroup
# that covers the page cache; caches dropped before every run).
#
# For every B of NPL, one process per tool and setting, in the order
# faultline / llama.cpp uncapped, faultline / llama.cpp capped (alternating,
# so load changes hit both), each `-npp NPP -ntg NTG -npl B`. Prints S_TG
# (generated tokens per second of the generation phase) per B, the ratios,
# bytes read from the disk per generated token, faultline's expert hit rate,
# and the issue's targets.
#
# faultline capped gets --ram-budget = cap - RAM tier - RESERVE - what the
# same B used above B = 1 uncapped (KV cells, scratch of a B-token step), so
# the process fits the cap.
#
# env: MODEL=FILE       the GGUF (default: bench-oversize's generated qwen3moe Q4_K)
#      LLAMA_CPP=DIR    llama.cpp's bin folder (llama-batched-bench): run it too
#      NPP=32 NTG=16 NPL=1,16,64 THREADS=2 CAP_PCT=25 RESERVE_MIB=160
#      FL=build/faultline  KEEP=1 (keep the raw outputs)
#      FL_ARGS="-ctk q8_0 -ctv q8_0"  more flags for every faultline run
#      LL_ARGS="-ctk q8_0 -ctv q8_0 -fa on"  more flags for every llama.cpp run
# Needs root (cgroups, drop_caches) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
NPP=${NPP:-32} NTG=${NTG:-16} NPL=${NPL:-1,16,64} THREADS=${THREADS:-2}
CAP_PCT=${CAP_PCT:-25} RESERVE_MIB=${RESERVE_MIB:-160}
FL=${FL:-build/faultline}
BENCH_NAME=bench-batch
. scripts/lib-bench.sh

bench_start
if [ -n "${LLAMA_CPP:-}" ]; then
  [ -x "$LLAMA_CPP/llama-batched-bench" ] || die "$LLAMA_CPP/llama-batched-bench not found"
fi
say "model $model: $((size / 1048576)) MiB; cap $CAP_PCT % = $((cap / 1048576)) MiB;" \
    "RAM tier $((ram_tier / 1048576)) MiB; load $(cut -d' ' -f1-3 /proc/loadavg)"

IFS=, read -r -a bs <<<"$NPL"
read -r -a fl_args <<<"${FL_ARGS:-}"
read -r -a ll_args <<<"${LL_ARGS:-}"
fl=("$FL" bench -m "$model" -t "$THREADS" -npp "$NPP" -ntg "$NTG" "${fl_args[@]}")
rss_of() { local r; read -r _ _ _ _ r <"$work/$1.io"; echo "${r:-0}"; }
for b in "${bs[@]}"; do
  cells=$((b * (NPP + NTG) > 4096 ? b * (NPP + NTG) : 4096))
  say "B = $b: faultline uncapped (all resident)"
  run_capped 0 "fl-free-$b" "${fl[@]}" -npl "$b" --cpu-moe --ram-budget "$size"
  if [ -n "${LLAMA_CPP:-}" ]; then
    ll=("$LLAMA_CPP/llama-batched-bench" -m "$model" -t "$THREADS" -npp "$NPP" -ntg "$NTG"
        -npl "$b" -c "$cells" -nr "${ll_args[@]}")
    say "B = $b: llama-batched-bench uncapped (mmap, --no-repack)"
    run_capped 0 "ll-free-$b" "${ll[@]}"
  fi
  # what this B needs beyond B = 1 (KV, a B-token step's scratch)
  extra=$(( $(rss_of "fl-free-$b") - $(rss_of "fl-free-${bs[0]}") ))
  [ "$extra" -gt 0 ] || extra=0
  # faultline's start-up check counts the largest step its cells allow (B
  # decodes beside a -b chunk reading every cell), more than these reach
  [ "$b" -eq "${bs[0]}" ] || extra=$((extra + (32 << 20)))
  bb=$((budget - extra))
  [ "$bb" -gt 0 ] || { say "B = $b: no expert budget left under the cap; skipped"; continue; }
  say "B = $b: faultline capped, expert budget $((bb / 1048576)) MiB"
  run_capped "$cap" "fl-cap-$b" "${fl[@]}" -npl "$b" --disk-moe --ram-budget "$bb"
  if [ -n "${LLAMA_CPP:-}" ]; then
    say "B = $b: llama-batched-bench capped"
    run_capped "$cap" "ll-cap-$b" "${ll[@]}"
  fi
done

python3 - "$work" "$NPL" "$NTG" "$ram_tier" "${LLAMA_CPP:-}" <<'PY'
import os, sys
work, npl, ntg, ram_tier, llama = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
bs = [int(b) for b in npl.split(",")]
MiB = 1048576.0

def text(name):
    out = ""
    for ext in (".out", ".err"):
        try:
            out += open(f"{work}/{name}{ext}").read()
        except OSError:
            pass
    return out

def s_tg(name, b):
    """S_TG of the row with this B in a llama-batched-bench table"""
    for line in text(name).splitlines():
        c = [x.strip() for x in line.split("|")]
        if len(c) > 10 and c[1].isdigit() and int(c[3]) == b:
            return float(c[8])
    return None

def paging(name, b):
    """faultline's paging row of the generation phase: hit %, MiB/token"""
    for line in text(name).splitlines():
        c = [x.strip() for x in line.split("|")]
        if len(c) > 6 and c[1] == f"tg{ntg} B{b}":
            hit = None if c[2] == "-" else float(c[2])
            return hit, float(c[5])
    return None, None

def dev_read(name, b, tool_ram):
    """block-device bytes read per generated token, start-up and prefill included"""
    try:
        r = int(open(f"{work}/{name}.io").read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return max(r - tool_ram, 0) / (b * ntg) / MiB

f = lambda x, p="%.2f": "-" if x is None else p % x
ratio = lambda a, b: a / b if a and b else None
print()
print("| B | fl S_TG | ll S_TG | fl/ll | fl S_TG capped | ll S_TG capped | fl/ll capped "
      "| fl hit % capped | fl expert MiB read/token (TG) | disk MiB/gen token fl / ll |")
print("|---|---|---|---|---|---|---|---|---|---|")
res = {}
for b in bs:
    ff, lf = s_tg(f"fl-free-{b}", b), s_tg(f"ll-free-{b}", b) if llama else None
    fc, lc = s_tg(f"fl-cap-{b}", b), s_tg(f"ll-cap-{b}", b) if llama else None
    hit, mib = paging(f"fl-cap-{b}", b)
    dfl = dev_read(f"fl-cap-{b}", b, ram_tier)
    dll = dev_read(f"ll-cap-{b}", b, 0) if llama else None
    res[b] = dict(ff=ff, lf=lf, fc=fc, lc=lc, mib=mib)
    print(f"| {b} | {f(ff)} | {f(lf)} | {f(ratio(ff, lf))} | {f(fc)} | {f(lc)} | "
          f"{f(ratio(fc, lc))} | {f(hit, '%.1f')} | {f(mib, '%.1f')} | {f(dfl, '%.1f')} / {f(dll, '%.1f')} |")
print()
print("fl expert MiB read/token: the pager's reads in the generation phase over its tokens;")
print("disk MiB/gen token: the process's block-device reads (start-up and prefill included,")
print("faultline's RAM tier subtracted) over the generated tokens.")
def target(name, ok, detail):
    print(f"  {'MET   ' if ok else 'MISSED' if ok is not None else 'n/a   '} {name}: {detail}")
print("targets:")
for b, want in ((16, 1.5), (64, 1.5)):
    r = res.get(b, {})
    x = ratio(r.get("ff"), r.get("lf"))
    target(f"uncapped S_TG at B = {b} >= {want}x llama.cpp", x and x >= want if x else None, f(x) + "x")
for b, want in ((16, 3.0), (64, 2.0)):
    r = res.get(b, {})
    x = ratio(r.get("fc"), r.get("lc"))
    target(f"capped S_TG at B = {b} >= {want}x llama.cpp", x and x >= want if x else None, f(x) + "x")
m1, m64 = res.get(1, {}).get("mib"), res.get(64, {}).get("mib")
if m1 and m64:
    target("expert bytes per generated token at B = 64 <= 1/6 of B = 1", m64 <= m1 / 6,
           f"{m64:.1f} vs {m1:.1f} MiB ({m1 / m64:.1f}x less)")
PY
