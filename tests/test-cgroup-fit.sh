#!/bin/sh
# test-cgroup-fit.sh: faultline inside a memory cgroup (a container's
# --memory, a systemd unit's MemoryMax=) fits itself to the cgroup's limit
# instead of being killed by it.
#   - a 128 MiB model (faultline gen) in a cgroup capped at 112 MiB, no
#     placement flags: the run finishes (exit 0, no OOM kill in the cgroup),
#     its experts paged under an auto budget below the cap, with evictions,
#     the resident peak within the budget;
#   - --cpu-moe (the whole model in RAM), --disk-moe --ram-budget 1G, a
#     KV cache of a million cells (-c) and, with a budget given, 2,048-token
#     steps (-b/-ub 2048, whose scratch the cgroup cannot hold beside it) in
#     the same cgroup: refused at start, exit 1, one line naming the
#     cgroup's limit and what to lower, not a SIGKILL (the KV cache's cells
#     and the scratch are allocated as they are used, so those would have
#     died deep into a long prompt);
#   - no flags but -c 16384 and a 4,000-token prompt: the auto budget is
#     lowered so that the KV cache and the scratch fit, and the run finishes;
#   - no -c (or -c 0) on a model trained on 131,072 positions, its weights in
#     RAM, the cgroup raised to 1.5 GiB: the context is the longest that fits
#     beside the weights with llama.cpp's 1 GiB margin (a multiple of 256,
#     above 4,096, under the trained length, within what the limit predicts),
#     and the run finishes;
#   - a draft model (-md): a small one makes the auto budget room (the answer
#     unchanged), one as large as the model is refused in one line.
# Before faultline read cgroups, the first run placed the whole file in RAM
# (the machine's MemAvailable is far larger) and the kernel killed it.
# Needs root and a memory cgroup controller it may write: exit 77 otherwise.
# usage: test-cgroup-fit.sh FAULTLINE
set -u
cli=$1
[ "$(id -u)" -eq 0 ] || { echo "not root: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
dir=$(mktemp -d /tmp/test-cgroup-fit.XXXXXX)
cg=""
cleanup() { [ -n "$cg" ] && rmdir "$cg" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
limit=$((112 << 20))

set_limit() { # the cgroup's limit: v1's file, else v2's
  if [ -f "$cg/memory.limit_in_bytes" ]; then echo "$1" >"$cg/memory.limit_in_bytes"
  else echo "$1" >"$cg/memory.max"; fi 2>/dev/null
}
# A fresh memory cgroup capped at $limit: v1's controller, else v2's.
make_cgroup() {
  v1=/sys/fs/cgroup/memory
  if [ -f $v1/memory.limit_in_bytes ]; then
    cg=$v1/fl-test-cgroup-fit-$$
    mkdir "$cg" 2>/dev/null && set_limit $limit && return 0
  elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
    cg=/sys/fs/cgroup/fl-test-cgroup-fit-$$
    mkdir "$cg" 2>/dev/null && set_limit $limit &&
      { echo 0 >"$cg/memory.swap.max" 2>/dev/null; return 0; }
  fi
  echo "no writable memory cgroup: skipped"
  exit 77
}
oom_kills() { # v1: memory.oom_control, v2: memory.events
  cat "$cg/memory.oom_control" "$cg/memory.events" 2>/dev/null | awk '$1 == "oom_kill" { n += $2 } END { print n + 0 }'
}
# in_cgroup NAME ARGS...: faultline ARGS in the cgroup; NAME.out/.err, status in $rc
in_cgroup() {
  name=$1; shift
  sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$cli" "$@" \
    >"$dir/$name.out" 2>"$dir/$name.err"
  rc=$?
}

"$cli" gen --arch qwen3moe --type Q8_0 --size 128M -o "$dir/m.gguf" >/dev/null 2>&1 ||
  fail "faultline gen"
make_cgroup

# 1. no flags: paged to fit, finishes
in_cgroup auto run -m "$dir/m.gguf" -p "The capital of France is" -n 24 -t 2 \
  --stats-json "$dir/auto.json"
[ "$(oom_kills)" -eq 0 ] || fail "the kernel killed a run in the cgroup (oom_kill $(oom_kills))"
[ $rc -eq 0 ] || fail "no flags in a 112 MiB cgroup: exit $rc: $(tail -2 "$dir/auto.err")"
python3 - "$dir/auto.json" $limit <<'EOF' || exit 1
import json, sys
s, limit = json.load(open(sys.argv[1])), int(sys.argv[2])
t = s["totals"]
ok = True
def check(cond, what):
    global ok
    if not cond:
        print("FAIL:", what, {k: s[k] for k in ("budget", "min_budget", "peak_resident")}, t)
        ok = False
check(t["loads"] > 0, "experts paged (loads > 0)")
check(t["evictions"] > 0, "the budget evicts (the model's experts do not fit it)")
check(s["min_budget"] <= s["budget"] < limit, "auto budget under the cgroup's limit")
check(s["peak_resident"] <= s["budget"], "resident peak within the budget")
print("auto budget %.1f MiB under a %.0f MiB cgroup, %d loads, %d evictions"
      % (s["budget"] / 2**20, limit / 2**20, t["loads"], t["evictions"]))
sys.exit(0 if ok else 1)
EOF

# 2. plans that cannot fit: one line, exit 1, before any reading
for case in "resident --cpu-moe" "budget --disk-moe --ram-budget 1G" "kv -c 1000000" \
  "scratch --disk-moe --ram-budget 40M -c 2048 -b 2048 -ub 2048"; do
  set -- $case
  name=$1; shift
  in_cgroup "$name" run -m "$dir/m.gguf" -p "Hi" -n 4 "$@"
  [ $rc -eq 1 ] || fail "$*: exit $rc (want 1): $(cat "$dir/$name.err")"
  [ "$(wc -l <"$dir/$name.err")" -eq 1 ] || fail "$*: not one line: $(cat "$dir/$name.err")"
  grep -q "memory cgroup's limit of 112.00 MiB" "$dir/$name.err" ||
    fail "$*: the line does not name the limit: $(cat "$dir/$name.err")"
  [ "$name" = resident ] || grep -q -- "--ram-budget" "$dir/$name.err" ||
    fail "$*: the line does not say to lower --ram-budget: $(cat "$dir/$name.err")"
  [ "$name" != kv ] || grep -q -- "KV cache of .* a smaller -c" "$dir/$name.err" ||
    fail "$*: the line does not blame the KV cache: $(cat "$dir/$name.err")"
  [ "$name" != scratch ] || grep -q -- "scratch of a 2049-token step .* a smaller -c, -b" \
    "$dir/$name.err" || fail "$*: the line does not blame the step's scratch: $(cat "$dir/$name.err")"
  echo "$*: $(cat "$dir/$name.err")"
done
[ "$(oom_kills)" -eq 0 ] || fail "oom_kill in the cgroup"

# 3. a long context with the auto budget: lowered to fit, finishes
python3 -c "
import random
random.seed(1)
w = 'the of and a to in is was for on with as by at from that this which'.split()
print(' '.join(random.choice(w) for _ in range(4000)))" >"$dir/long.txt"
in_cgroup long run -m "$dir/m.gguf" -f "$dir/long.txt" -n 4 -t 2 -c 16384 \
  --stats-json "$dir/long.json"
[ "$(oom_kills)" -eq 0 ] || fail "the kernel killed the long prompt's run (oom_kill $(oom_kills))"
[ $rc -eq 0 ] || fail "-c 16384, a 4,000-token prompt: exit $rc: $(tail -2 "$dir/long.err")"
python3 - "$dir/auto.json" "$dir/long.json" <<'EOF' || exit 1
import json, sys
a, l = (json.load(open(f)) for f in sys.argv[1:3])
ok = l["min_budget"] <= l["budget"] < a["budget"] and l["peak_resident"] <= l["budget"]
print("%s: -c 16384 lowered the auto budget from %.1f to %.1f MiB (peak resident %.1f)"
      % ("ok" if ok else "FAIL", a["budget"] / 2**20, l["budget"] / 2**20, l["peak_resident"] / 2**20))
sys.exit(0 if ok else 1)
EOF
# 4. the default context fitted to the cgroup (llama.cpp's -c 0 and -fit)
"$cli" gen --arch gpt-oss --type Q8_0 --size 128M -o "$dir/long-ctx.gguf" >/dev/null 2>&1 ||
  fail "faultline gen --arch gpt-oss"
"$cli" inspect "$dir/long-ctx.gguf" >"$dir/long-ctx.txt" 2>&1 || fail "faultline inspect"
set_limit $((1536 << 20)) || fail "cannot raise the cgroup's limit"
for c in "" "-c 0"; do
  in_cgroup ctx run -m "$dir/long-ctx.gguf" -p "Hi" -n 4 -t 2 --cpu-moe -v $c
  [ $rc -eq 0 ] || fail "default context ($c) in a 1.5 GiB cgroup: exit $rc: $(tail -2 "$dir/ctx.err")"
  python3 - "$dir/ctx.err" "$dir/long-ctx.txt" "$(stat -c %s "$dir/long-ctx.gguf")" "$c" <<'EOF' || exit 1
import re, sys
err, info, size, how = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3]), sys.argv[4]
key = lambda k: int(re.search(r"^\s*%s\s+(\d+)" % re.escape(k), info, re.M).group(1))
# a cell: K and V rows of every layer, F16
cell = key("block_count") * key("attention.head_count_kv") * (
    key("attention.key_length") + key("attention.value_length")) * 2
m = re.search(r"context (\d+) cells \(the model was trained on (\d+)", err)
if not m:
    print("FAIL: no context line:", err); sys.exit(1)
n, train = int(m.group(1)), int(m.group(2))
# the most the room beside the weights allows with the 1 GiB margin; the
# process's own memory and the scratch take some of it
most = ((1536 << 20) - size - (1 << 30)) // cell
ok = train == 131072 and n % 256 == 0 and 4096 < n < train and most * 0.6 <= n <= most
print("%s: %s: context %d of %d cells (a cell %d bytes; the limit allows at most %d)"
      % ("ok" if ok else "FAIL", how or "no -c", n, train, cell, most))
sys.exit(0 if ok else 1)
EOF
done
[ "$(oom_kills)" -eq 0 ] || fail "oom_kill in the cgroup"

# 5. a draft model (-md) in the 112 MiB cgroup: the auto budget makes room
# for a small one, and the answer is the one without it; one that cannot
# fit beside the model is refused in one line
set_limit $limit || fail "cannot lower the cgroup's limit"
in_cgroup plain run -m "$dir/m.gguf" -p "The capital of France is" -n 24 -t 2 --temp 0 -c 1024
[ $rc -eq 0 ] || fail "-c 1024 in a 112 MiB cgroup: exit $rc: $(tail -2 "$dir/plain.err")"
in_cgroup draft run -m "$dir/m.gguf" -p "The capital of France is" -n 24 -t 2 --temp 0 -c 1024 \
  -md tests/data/qwen3moe-tiny-Q8_0.gguf -v --stats-json "$dir/draft.json"
[ $rc -eq 0 ] || fail "a small draft model in a 112 MiB cgroup: exit $rc: $(tail -2 "$dir/draft.err")"
cmp -s "$dir/plain.out" "$dir/draft.out" || fail "the answer changed with a draft model"
grep -q "auto RAM budget lowered" "$dir/draft.err" ||
  fail "the auto budget did not make room for the draft model: $(cat "$dir/draft.err")"
in_cgroup big run -m "$dir/m.gguf" -p "Hi" -n 4 -t 2 -c 1024 -md "$dir/m.gguf"
[ $rc -eq 1 ] && [ "$(wc -l <"$dir/big.err")" -eq 1 ] &&
  grep -q "the draft model (.*memory cgroup's limit of 112.00 MiB" "$dir/big.err" ||
  fail "a draft model as large as the model: exit $rc: $(cat "$dir/big.err")"
[ "$(oom_kills)" -eq 0 ] || fail "oom_kill in the cgroup"
echo "a draft model: the budget made room for a small one; $(cat "$dir/big.err")"
echo "test-cgroup-fit: all checks passed"
