#!/usr/bin/env bash
# bench-spec.sh: speculative decoding without a draft model (--spec-type
# ngram-simple, docs/batching.md), or with one (DRAFT=FILE: -md FILE,
# llama.cpp's draft-simple), in `faultline serve` and, given LLAMA_CPP,
# llama-server, on the same model, threads and prompts: one client posts
# each prompt of PROMPTS (text that asks for a passage to be repeated) to
# /completion (greedy, N_PREDICT tokens, the prompt cache off so every
# request runs whole, the text held to plain characters by a grammar:
# llama-server fails a random model's invalid UTF-8), REPS passes, against a server without drafts and one
# with --spec-type ngram-simple SPEC_ARGS (or -md DRAFT DRAFT_ARGS), without a memory cap and inside
# bench-oversize's cap (CAP_PCT % of the file, a memory cgroup covering the
# page cache; caches dropped before each server). Servers run in the order
# faultline plain, faultline drafts, llama.cpp plain, llama.cpp drafts.
# Prints each server's median decode tokens/s (timings.predicted_per_second),
# the draft tokens and those kept (timings.draft_n, draft_n_accepted), the
# speed-up drafts give each engine, and whether each engine's answers were
# the same with drafts as without.
#
# env: MODEL=FILE (default bench-oversize's generated qwen3moe Q4_K)
#      LLAMA_CPP=DIR (llama-server), N_PREDICT=128, REPS=3, THREADS=2,
#      SPEC_ARGS="--spec-ngram-simple-size-n 12 --spec-ngram-simple-size-m 48" (llama.cpp's
#      defaults), DRAFT=FILE (a draft model of the same vocabulary in place
#      of ngram-simple), DRAFT_ARGS="--spec-draft-n-max 3" (llama.cpp's
#      default), CAP_PCT=25 (0: uncapped only; capped, faultline's expert
#      budget is its own: --ram-budget auto fits the cgroup's limit),
#      PORT=18082, FL=build/faultline, KEEP=1
# Needs root (cgroups, drop_caches), curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
N_PREDICT=${N_PREDICT:-128} REPS=${REPS:-3} THREADS=${THREADS:-2} CAP_PCT=${CAP_PCT:-25}
SPEC_ARGS=${SPEC_ARGS:---spec-ngram-simple-size-n 12 --spec-ngram-simple-size-m 48}
RESERVE_MIB=0 PORT=${PORT:-18082}
FL=${FL:-build/faultline}
BENCH_NAME=bench-spec
. scripts/lib-bench.sh
caps=(0)
[ "$CAP_PCT" -gt 0 ] && caps+=("$CAP_PCT")
bench_start
[ -z "${LLAMA_CPP:-}" ] || [ -x "$LLAMA_CPP/llama-server" ] || die "$LLAMA_CPP/llama-server not found"
DRAFT_ARGS=${DRAFT_ARGS:---spec-draft-n-max 3}
if [ -n "${DRAFT:-}" ]; then
  [ -f "$DRAFT" ] || die "DRAFT=$DRAFT: no such file"
  # llama.cpp 34af94c loads -md but drafts only with --spec-type draft-simple
  read -r -a spec <<<"-md $DRAFT --spec-type draft-simple $DRAFT_ARGS"
else
  read -r -a spec <<<"--spec-type ngram-simple $SPEC_ARGS"
fi
say "model $model: $((size / 1048576)) MiB; $N_PREDICT tokens a request, $REPS passes;" \
    "drafts: ${spec[*]}; load $(cut -d' ' -f1-3 /proc/loadavg)"

# one client, the prompts in turn: timings and content of each answer
cat >"$work/client.py" <<'PY'
import json, sys, urllib.request
url, n_predict, reps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
prompts = [
    "Repeat this passage twice: The river ran past the old mill, under the stone bridge, and on "
    "to the sea. The river ran past the old mill, under the stone bridge, and on to the sea.",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n"
    "    return a * b\n\ndef div(a, b):\n    return a / b\n\n# the same four functions again:\n",
    "apple, banana, cherry, date, elderberry, fig, grape, honeydew, kiwi, lemon, mango, apple, "
    "banana, cherry, date, elderberry, fig, grape, honeydew, kiwi, lemon, mango, apple, banana,",
]
res = []
for rep in range(reps):
    for i, p in enumerate(prompts):
        # llama-server answers 500 when a random model's text is not valid UTF-8: both
        # engines' answers are held to plain characters (as bench-serve does)
        body = json.dumps({"prompt": p, "n_predict": n_predict, "temperature": 0,
                           "cache_prompt": False, "grammar": "root ::= [ a-zA-Z0-9.,]*"}).encode()
        req = urllib.request.Request(url + "/completion", body, {"Content-Type": "application/json"})
        try:
            o = json.load(urllib.request.urlopen(req, timeout=3600))
        except Exception as e:  # noqa: BLE001 - a failed request is a row of the table
            res.append({"prompt": i, "error": str(e)})
            continue
        t = o.get("timings", {})
        res.append({"prompt": i, "content": o.get("content", ""), "tps": t.get("predicted_per_second", 0),
                    "n": t.get("predicted_n", 0), "draft_n": t.get("draft_n", 0),
                    "draft_kept": t.get("draft_n_accepted", 0)})
json.dump(res, open(out, "w"))
PY

run_server() { # NAME LIMIT CMD...
  local name=$1
  if server_start "$@"; then
    python3 "$work/client.py" "http://127.0.0.1:$PORT" "$N_PREDICT" "$REPS" "$work/$name.json" || true
  fi
  server_stop
}
for cap_pct in "${caps[@]}"; do
  cap_placement "$cap_pct" "$size"
  fl=("$FL" serve -m "$model" -t "$THREADS" -np 1 -c 4096 --port "$PORT" "${fl_place[@]}")
  say "cap $cap_pct %: faultline serve, without and with drafts"
  run_server "fl-cap$cap_pct-plain" "$limit" "${fl[@]}"
  run_server "fl-cap$cap_pct-spec" "$limit" "${fl[@]}" "${spec[@]}"
  if [ -n "${LLAMA_CPP:-}" ]; then
    ll=("$LLAMA_CPP/llama-server" -m "$model" -t "$THREADS" -np 1 -c 4096 --port "$PORT"
        --no-webui "${ll_place[@]}")
    say "cap $cap_pct %: llama-server, without and with drafts"
    run_server "ll-cap$cap_pct-plain" "$limit" "${ll[@]}"
    run_server "ll-cap$cap_pct-spec" "$limit" "${ll[@]}" "${spec[@]}"
  fi
done

python3 - "$work" "${caps[*]}" <<'PY'
import json, statistics, sys
work, caps = sys.argv[1], sys.argv[2].split()
def load(name):
    try:
        return json.load(open(f"{work}/{name}.json"))
    except (OSError, ValueError):
        return None
print("\n| cap | server | drafts | median t/s | draft tokens | kept | speed-up | same answers |")
print("|---|---|---|--:|--:|--:|--:|---|")
for cap in caps:
    for eng, label in (("fl", "faultline"), ("ll", "llama-server")):
        plain, spec = load(f"{eng}-cap{cap}-plain"), load(f"{eng}-cap{cap}-spec")
        if plain is None:
            continue
        def med(rs):
            v = [r["tps"] for r in rs if "tps" in r]
            return statistics.median(v) if v else 0.0
        failed = sum("error" in r for r in (plain or []) + (spec or []))
        mp = med(plain)
        print(f"| {cap} % | {label} | no | {mp:.2f} | - | - | - | - |")
        if spec is None:
            continue
        ms = med(spec)
        d = sum(r.get("draft_n", 0) for r in spec)
        k = sum(r.get("draft_kept", 0) for r in spec)
        same = all(a.get("content") == b.get("content") for a, b in zip(plain, spec))
        print(f"| {cap} % | {label} | yes | {ms:.2f} | {d} | {k} | {ms / mp if mp else 0:.2f}x |"
              f" {'yes' if same else 'no'}{f' ({failed} failed)' if failed else ''} |")
PY
