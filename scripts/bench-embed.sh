#!/usr/bin/env bash
# bench-embed.sh: embeddings of many documents (an indexing job) through
# `faultline serve` and, given LLAMA_CPP, llama-server --embeddings, on the
# same model, threads and pooling: C clients (scripts/embed-load.py) post the
# DOCS documents to /v1/embeddings, without a memory cap and inside
# bench-oversize's cap (CAP_PCT % of the file, a memory cgroup covering the
# page cache; caches dropped before each server). Prints documents/s and
# prompt tokens/s per run, the ratios, and how close the two engines'
# vectors are (cosine similarity per document: the same model, pooling and
# normalization, so it should be ~1). llama-server runs with its defaults
# (mmap), capped with --no-repack --no-warmup as bench-oversize's runs.
#
# env: MODEL=FILE (default bench-oversize's generated qwen3moe Q4_K)
#      LLAMA_CPP=DIR (llama-server), DOCS=32, WORDS=100 (words a document),
#      CLIENTS=4, POOLING=last, THREADS=2, CAP_PCT=25 (0: uncapped only; capped,
#      faultline's expert budget is its own: --ram-budget auto fits the cgroup's
#      limit, its KV cache and a -b step's scratch), PORT=18081, FL=build/faultline, KEEP=1
# Needs root (cgroups, drop_caches) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
DOCS=${DOCS:-32} WORDS=${WORDS:-100} CLIENTS=${CLIENTS:-4} POOLING=${POOLING:-last}
THREADS=${THREADS:-2} CAP_PCT=${CAP_PCT:-25} RESERVE_MIB=0 PORT=${PORT:-18081}
FL=${FL:-build/faultline}
BENCH_NAME=bench-embed
. scripts/lib-bench.sh
caps=(0)
[ "$CAP_PCT" -gt 0 ] && caps+=("$CAP_PCT")
bench_start
[ -z "${LLAMA_CPP:-}" ] || [ -x "$LLAMA_CPP/llama-server" ] || die "$LLAMA_CPP/llama-server not found"
say "model $model: $((size / 1048576)) MiB; $DOCS documents of $WORDS words, $CLIENTS clients;" \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/docs.json" "$DOCS" "$WORDS" <<'PY'
import json, random, sys
rng = random.Random(7)
words = ("the of and to in is was for on that with as by at from his her it an be this are "
         "river engine market winter letter garden signal paper number station window memory "
         "report harbour quiet early distant simple careful golden narrow").split()
docs = [" ".join(rng.choice(words) for _ in range(int(sys.argv[3]))) + "." for _ in range(int(sys.argv[2]))]
json.dump(docs, open(sys.argv[1], "w"))
PY
cells=$((CLIENTS * (WORDS * 2 + 64)))
for cap_pct in "${caps[@]}"; do
  cap_placement "$cap_pct" "$size"
  say "cap $cap_pct %: faultline serve"
  if server_start "fl-cap$cap_pct" "$limit" "$FL" serve -m "$model" -t "$THREADS" -np "$CLIENTS" \
      -c "$cells" --port "$PORT" --pooling "$POOLING" "${fl_place[@]}"; then
    python3 scripts/embed-load.py "http://127.0.0.1:$PORT/v1" "$CLIENTS" "$work/docs.json" \
      "$work/fl-cap$cap_pct.json" || true
  fi
  server_stop
  if [ -n "${LLAMA_CPP:-}" ]; then
    say "cap $cap_pct %: llama-server --embeddings"
    if server_start "ll-cap$cap_pct" "$limit" "$LLAMA_CPP/llama-server" -m "$model" -t "$THREADS" \
        -np "$CLIENTS" -c "$cells" --port "$PORT" --embeddings --pooling "$POOLING" --no-webui \
        "${ll_place[@]}"; then
      python3 scripts/embed-load.py "http://127.0.0.1:$PORT/v1" "$CLIENTS" "$work/docs.json" \
        "$work/ll-cap$cap_pct.json" || true
    fi
    server_stop
  fi
done

python3 - "$work" "${caps[*]}" <<'PY'
import json, math, sys
work, caps = sys.argv[1], sys.argv[2].split()
def load(name):
    try:
        return json.load(open(f"{work}/{name}.json"))
    except (OSError, ValueError):
        return None
print("\n| cap | server | documents/s | prompt tokens/s | seconds | failed |")
print("|---|---|---|---|---|---|")
for cap in caps:
    for who, name in (("fl", "faultline serve"), ("ll", "llama-server")):
        r = load(f"{who}-cap{cap}")
        if r:
            print(f"| {cap} % | {name} | {r['docs_per_s']:.2f} | {r['tokens_per_s']:.1f} | "
                  f"{r['seconds']:.1f} | {r['failed']} |")
for cap in caps:
    f, l = load(f"fl-cap{cap}"), load(f"ll-cap{cap}")
    if not (f and l and l["docs_per_s"]):
        continue
    cos = []
    for a, b in zip(f["vectors"], l["vectors"]):
        if a and b:
            cos.append(sum(x * y for x, y in zip(a, b)) /
                       math.sqrt(sum(x * x for x in a) * sum(y * y for y in b)))
    cos.sort()
    print(f"cap {cap} %: faultline / llama-server documents/s = {f['docs_per_s'] / l['docs_per_s']:.2f}x; "
          f"cosine similarity of their vectors: median {cos[len(cos) // 2]:.6f}, lowest {cos[0]:.6f} "
          f"({len(cos)} documents)" if cos else "")
PY
