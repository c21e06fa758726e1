#!/usr/bin/env bash
# bench-prompt-cache.sh: a long document asked several questions, one
# process each (`faultline run`, and given LLAMA_CPP, llama-completion), with
# and without --prompt-cache FILE, on the same model, threads and prompts,
# without a memory cap and inside bench-oversize's cap (CAP_PCT % of the
# file, a memory cgroup covering the page cache; caches dropped before every
# run). For each engine: a first run with the cache writes FILE (question
# 0), then for each of REPS questions a run without the cache and one that
# reads FILE, alternating. Prints each run's wall seconds (start-up
# included: what a user waits for), the prompt tokens it computed and those
# it read, the median of each kind and their ratio, and whether faultline's
# answers with the cache are its answers without it (greedy).
#
# env: MODEL=FILE (default bench-oversize's generated qwen3moe Q4_K),
#      LLAMA_CPP=DIR (llama-completion), WORDS=1200 (the document's words),
#      N_PREDICT=16, REPS=3, THREADS=2, CAP_PCT=25 (0: uncapped only; capped,
#      faultline's expert budget is its own: --ram-budget auto fits the cgroup),
#      FL=build/faultline, KEEP=1
# Needs root (cgroups, drop_caches) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
WORDS=${WORDS:-1200} N_PREDICT=${N_PREDICT:-16} REPS=${REPS:-3} THREADS=${THREADS:-2}
CAP_PCT=${CAP_PCT:-25} RESERVE_MIB=0 FL=${FL:-build/faultline}
BENCH_NAME=bench-prompt-cache
. scripts/lib-bench.sh
caps=(0)
[ "$CAP_PCT" -gt 0 ] && caps+=("$CAP_PCT")
bench_start
[ -z "${LLAMA_CPP:-}" ] || [ -x "$LLAMA_CPP/llama-completion" ] ||
  die "$LLAMA_CPP/llama-completion not found"
say "model $model: $((size / 1048576)) MiB; a $WORDS-word document, $REPS questions;" \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work" "$WORDS" "$REPS" <<'PY'
import random, sys
work, words, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(11)
w = ("the of and to in is was for on that with as by at from river engine market winter letter "
     "garden signal paper number station window memory report harbour quiet early").split()
doc = " ".join(rng.choice(w) for _ in range(words)) + "."
for q in range(reps + 1):
    open(f"{work}/prompt{q}.txt", "w").write(f"{doc}\n\nQuestion {q}: which word comes first?\n")
PY

# run_engine ENGINE CAP NAME PROMPT [cache args...]: one process, under the cap
run_engine() {
  local eng=$1 cap=$2 name=$3 prompt=$4; shift 4
  if [ "$eng" = fl ]; then
    run_capped "$limit" "$name" "$FL" run -m "$model" -f "$work/prompt$prompt.txt" -n "$N_PREDICT" \
      --temp 0 -no-cnv -t "$THREADS" --no-display-prompt "${fl_place[@]}" "$@"
  else
    run_capped "$limit" "$name" "$LLAMA_CPP/llama-completion" -m "$model" \
      -f "$work/prompt$prompt.txt" -n "$N_PREDICT" --temp 0 -no-cnv -t "$THREADS" \
      --no-display-prompt "${ll_place[@]}" "$@"
  fi
}
engines=(fl)
[ -n "${LLAMA_CPP:-}" ] && engines+=(ll)
for cap_pct in "${caps[@]}"; do
  cap_placement "$cap_pct" "$size"
  for eng in "${engines[@]}"; do
    say "cap $cap_pct %: $eng, the cache written, then without it and reading it in turn"
    rm -f "$work/$eng.state"
    run_engine "$eng" "$cap_pct" "$eng-cap$cap_pct-write" 0 --prompt-cache "$work/$eng.state"
    for q in $(seq 1 "$REPS"); do
      run_engine "$eng" "$cap_pct" "$eng-cap$cap_pct-plain$q" "$q"
      run_engine "$eng" "$cap_pct" "$eng-cap$cap_pct-read$q" "$q" --prompt-cache "$work/$eng.state"
    done
  done
done

python3 - "$work" "${caps[*]}" "$REPS" <<'PY'
import re, statistics, sys
work, caps, reps = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
def run(name):
    try:
        io = open(f"{work}/{name}.io").read().split()
        err = open(f"{work}/{name}.err", errors="replace").read()
        out = open(f"{work}/{name}.out", errors="replace").read()
    except OSError:
        return None
    secs, rc = float(io[2]), int(io[3])
    # faultline: "prompt: N tokens in"; llama.cpp: "prompt eval time = ... / N tokens"
    m = re.search(r"^prompt: (\d+) tokens in", err, re.M) or \
        re.search(r"prompt eval time =.*?/\s*(\d+) tokens", err)
    read = re.search(r"(\d+) of the prompt's \d+ tokens read", err)
    return {"secs": secs, "rc": rc, "computed": int(m.group(1)) if m else -1,
            "read": int(read.group(1)) if read else 0, "out": out}
print("\n| cap | engine | run | wall s | prompt tokens computed | read from the file |")
print("|---|---|---|--:|--:|--:|")
for cap in caps:
    for eng, label in (("fl", "faultline"), ("ll", "llama.cpp")):
        names = [f"{eng}-cap{cap}-write"]
        for q in range(1, reps + 1):
            names += [f"{eng}-cap{cap}-plain{q}", f"{eng}-cap{cap}-read{q}"]
        runs = {n: run(n) for n in names}
        if runs[names[0]] is None:
            continue
        for n, r in runs.items():
            if r:
                fail = "" if r["rc"] == 0 else f" (exit {r['rc']})"
                print(f"| {cap} % | {label} | {n.split('-')[-1]}{fail} | {r['secs']:.2f} | "
                      f"{r['computed']} | {r['read'] if eng == 'fl' else '-'} |")
        ok = lambda kind: [runs[f"{eng}-cap{cap}-{kind}{q}"] for q in range(1, reps + 1)
                           if runs[f"{eng}-cap{cap}-{kind}{q}"] and
                           runs[f"{eng}-cap{cap}-{kind}{q}"]["rc"] == 0]
        plain, read = ok("plain"), ok("read")
        if plain and read:
            mp = statistics.median(r["secs"] for r in plain)
            mr = statistics.median(r["secs"] for r in read)
            same = all(runs[f"{eng}-cap{cap}-plain{q}"]["out"] == runs[f"{eng}-cap{cap}-read{q}"]["out"]
                       for q in range(1, reps + 1)) if len(plain) == len(read) == reps else False
            print(f"cap {cap} %, {label}: without the cache {mp:.2f} s, reading it {mr:.2f} s "
                  f"(medians of {len(plain)} and {len(read)}): {mp / mr:.2f}x; the same answers "
                  f"with and without it: {'yes' if same else 'no'}")
PY
