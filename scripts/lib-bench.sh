# lib-bench.sh: helpers shared by the benchmarks that run faultline inside
# memory cgroups on the oversize model (bench-oversize.sh, bench-prefetch.sh).
# Sourced, not run: the sourcing script sets BENCH_NAME (the prefix of its
# messages), FL (the binary) and work (its scratch folder), and runs from the
# repository root.

say() { echo "$BENCH_NAME: $*" >&2; }
die() { say "$*"; exit 1; }

# Both need cgroups and drop_caches (root) and python3 (wait4's rusage).
bench_check_env() {
  [ "$(id -u)" -eq 0 ] || die "needs root (memory cgroups, drop_caches)"
  command -v python3 >/dev/null || die "needs python3"
}

# Builds build/faultline when $FL is not an executable, and points FL at it.
bench_ensure_fl() {
  if [ ! -x "$FL" ]; then
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build --target faultline >/dev/null
    FL=build/faultline
  fi
}

# Sets model to $MODEL, or to the oversize benchmark's model (qwen3moe Q4_K,
# n_embd 2048, 24 layers, 64 experts top-8, expert n_ff 768), generated once
# under ~/.cache/faultline so every benchmark measures the same file; and
# size (bytes) and ram_tier (its non-expert bytes, which stay in RAM).
bench_oversize_model() {
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/faultline
  model=${MODEL:-$cache/oversize-qwen3moe-Q4_K.gguf}
  if [ ! -f "$model" ]; then
    [ -n "${MODEL:-}" ] && die "$model: no such file"
    mkdir -p "$cache"
    say "generating $model (once)"
    "$FL" gen --arch qwen3moe --type Q4_K --n-embd 2048 --layers 24 --experts 64 --top-k 8 \
      --expert-ff 768 --seed 1 -o "$model.tmp" >&2
    mv "$model.tmp" "$model"
  fi
  # faultline's own counts: all the files of a model split into several
  local info
  info=$("$FL" inspect "$model") || die "$model: faultline inspect cannot read it"
  size=$(awk '/^file size:/ {print $3}' <<<"$info")
  ram_tier=$(awk '/non-expert bytes:/ {print $3}' <<<"$info")
  [ -n "$ram_tier" ] || die "$model: faultline inspect shows no MoE layout"
}

# The start of every such benchmark: environment, binary, $work (removed at
# exit unless KEEP), the model; with CAP_PCT set also cap (bytes) and budget
# (the expert budget under it: cap - RAM tier - RESERVE_MIB); CAP_PCT=0 sets neither.
bench_start() {
  bench_check_env
  bench_ensure_fl
  work=$(mktemp -d "/tmp/$BENCH_NAME.XXXXXX")
  trap bench_cleanup EXIT
  bench_oversize_model
  if [ "${CAP_PCT:-0}" -gt 0 ]; then # CAP_PCT=0: no cap, nothing to fit under
    cap=$((size * CAP_PCT / 100))
    budget=$((cap - ram_tier - RESERVE_MIB * 1048576))
    [ "$budget" -gt 0 ] || die "cap $cap B leaves no expert budget (RAM tier $ram_tier B)"
  fi
  return 0
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches || say "cannot drop caches"; }

# cg_create PREFIX NAME LIMIT: a fresh memory cgroup PREFIX-$$-NAME capped at
# LIMIT bytes (0: no cap), v1's memory controller where mounted, else v2.
# Sets cg_mem (v1) or cg_v2 (v2); cg_remove takes it away again.
cg_mem="" cg_v2=""
cg_create() {
  local prefix=$1 name=$2 limit=$3
  local v1=/sys/fs/cgroup/memory
  cg_mem="" cg_v2=""
  if [ -d $v1 ] && [ -f $v1/memory.limit_in_bytes ]; then
    cg_mem=$v1/$prefix-$$-$name; mkdir "$cg_mem"
    [ "$limit" -gt 0 ] && echo "$limit" >"$cg_mem/memory.limit_in_bytes"
  else
    local v2=/sys/fs/cgroup
    [ -f /sys/fs/cgroup/unified/cgroup.controllers ] && v2=/sys/fs/cgroup/unified
    grep -qw memory $v2/cgroup.controllers 2>/dev/null || die "no memory cgroup controller"
    echo "+memory" >"$v2/cgroup.subtree_control" 2>/dev/null || true
    cg_v2=$v2/$prefix-$$-$name; mkdir "$cg_v2"
    [ "$limit" -gt 0 ] && echo "$limit" >"$cg_v2/memory.max"
  fi
  return 0
}
cg_remove() {
  for d in "$cg_mem" "$cg_v2"; do [ -n "$d" ] && rmdir "$d" 2>/dev/null || true; done
  cg_mem="" cg_v2=""
}

# run_capped CAP_BYTES NAME CMD...: runs CMD in a fresh cgroup capped at CAP_BYTES
# (0: no cap) after dropping caches; writes $work/NAME.{out,err,io} (.io: bytes
# read from the block device, cgroup peak incl. page cache, seconds, exit, max RSS).
run_capped() {
  local limit=$1 name=$2; shift 2
  cg_create "fl-$BENCH_NAME" "$name" "$limit"
  drop_caches
  # The child joins the cgroups, then execs; wait4's rusage gives the bytes it
  # (all its threads, io_uring workers included) read from the block device.
  python3 - "$work/$name" "$cg_mem" "$cg_v2" "$@" <<'PY' || true
import os, sys, time
out, cgs, cmd = sys.argv[1], sys.argv[2:4], sys.argv[4:]
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    for d in cgs:
        if d:
            with open(d + "/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))
    fo, fe = os.open(out + ".out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), os.open(out + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fo, 1); os.dup2(fe, 2)
    os.execvp(cmd[0], cmd)
_, st, ru = os.wait4(pid, 0)
rc = os.waitstatus_to_exitcode(st)
with open(out + ".io", "w") as f:
    f.write(f"{ru.ru_inblock * 512} 0 {time.monotonic() - t0:.3f} {rc if rc >= 0 else 128 - rc} {ru.ru_maxrss * 1024}\n")
PY
  local rbytes peak secs rc maxrss
  read -r rbytes peak secs rc maxrss <"$work/$name.io"
  [ -n "$cg_mem" ] && peak=$(cat "$cg_mem/memory.max_usage_in_bytes")
  [ -n "$cg_v2" ] && [ -f "$cg_v2/memory.peak" ] && peak=$(cat "$cg_v2/memory.peak")
  echo "$rbytes $peak $secs $rc $maxrss" >"$work/$name.io"
  cg_remove
  [ $rc -eq 0 ] || { say "$name failed (exit $rc):"; tail -3 "$work/$name.err" >&2; }
  return 0
}

# cap_placement CAP_PCT SIZE: for a server under CAP_PCT % of a SIZE-byte model (0:
# no cap) sets limit (the cgroup's bytes, 0: none), fl_place (faultline's: paged
# with the budget it sets itself under the cap, else every expert in RAM) and
# ll_place (llama-server's: under a cap no repacking, which copies the weights
# into anonymous memory the cap cannot hold, and no warm-up read).
cap_placement() {
  if [ "$1" -gt 0 ]; then
    limit=$(($2 * $1 / 100)) fl_place=(--disk-moe) ll_place=(--no-repack --no-warmup)
  else
    limit=0 fl_place=(--cpu-moe --ram-budget "$2") ll_place=()
  fi
}

# server_start NAME LIMIT CMD...: a server CMD (listening on $PORT) in a fresh
# cgroup (0: no cap), caches dropped; sets srv_pid; waits for /health.
# server_stop: SIGTERM, wait, the cgroup removed.
srv_pid=
server_start() {
  local name=$1 limit=$2; shift 2
  cg_create "fl-$BENCH_NAME" "$name" "$limit"
  drop_caches
  local procs=${cg_mem:-$cg_v2}/cgroup.procs
  bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$procs" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  srv_pid=$!
  for _ in $(seq 1200); do
    curl -sf "127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    kill -0 $srv_pid 2>/dev/null || { say "$name exited: $(tail -2 "$work/$name.err")"; return 1; }
    sleep 0.5
  done
  say "$name: not healthy after 10 min"; return 1
}
server_stop() { kill -TERM $srv_pid 2>/dev/null || true; wait $srv_pid 2>/dev/null || true; cg_remove; }

# The EXIT trap: no cgroup left behind; $work removed unless KEEP is set.
bench_cleanup() {
  cg_remove
  if [ -n "${KEEP:-}" ]; then say "raw outputs kept in $work"; else rm -rf "$work"; fi
}

# bench_traces DIR N_GEN THREADS: routing traces (FLRT) of $model for the
# offline cache replays (bench-xlru), one per prompt line of
# scripts/prompts/cache-tune.txt (DIR/tune-N.flrt: what any tuning may look
# at: pinned-hot's profile, lfu-step's constants) and of
# scripts/prompts/cache-held.txt (DIR/held-N.flrt: held apart, only for the
# figures), fully resident. N_GEN 0 (the default of the scripts): trace N
# is the file's text read as one prompt, starting at line N and wrapping
# around (every token's routing; no generation). N_GEN > 0: line N and
# N_GEN greedy tokens (*-gN_GEN.flrt) -- the kind used until 2026-12-04:
# a random-weight model's greedy text soon repeats one token ("who who
# who"), which flatters every cache (docs/prefetch.md).
# Traces already in DIR are kept (TRACES=DIR reuses a previous run's).
# The file names go to the arrays TRACE_TUNE and TRACE_HELD.
bench_traces() {
  local dir=$1 n_gen=$2 threads=$3 set i n line out tag
  mkdir -p "$dir"
  TRACE_TUNE=() TRACE_HELD=()
  tag=$([ "$n_gen" -gt 0 ] && echo "-g$n_gen" || true)
  for set in tune held; do
    n=$(grep -c . "scripts/prompts/cache-$set.txt")
    for i in $(seq 1 "$n"); do
      out=$dir/$set-$i$tag.flrt
      if [ "$set" = tune ]; then TRACE_TUNE+=("$out"); else TRACE_HELD+=("$out"); fi
      [ -s "$out" ] && continue
      if [ "$n_gen" -gt 0 ]; then
        line=$(grep . "scripts/prompts/cache-$set.txt" | sed -n "${i}p")
        say "routing trace $set-$i: ${line:0:40}... + $n_gen tokens"
      else
        line=$(grep . "scripts/prompts/cache-$set.txt" | awk -v i="$i" -v n="$n" \
          '{ l[NR] = $0 } END { for (k = 0; k < n; k++) printf "%s ", l[(i - 1 + k) % n + 1] }')
        say "routing trace $set-$i: the prompts from line $i on (${#line} characters)"
      fi
      "$FL" eval -m "$model" -t "$threads" -n "$([ "$n_gen" -gt 0 ] && echo "$n_gen" || echo 1)" \
        -p "$line" -c 4096 --logits-out "$out.flrf" --routing-out "$out.tmp" >/dev/null 2>&1 ||
        die "eval failed for $set-$i"
      mv "$out.tmp" "$out"
      rm -f "$out.flrf"
    done
  done
}
