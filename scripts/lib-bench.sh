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
  size=$(stat -c %s "$model")
  ram_tier=$("$FL" inspect "$model" | awk '/non-expert bytes:/ {print $3}')
  [ -n "$ram_tier" ] || die "$model: faultline inspect shows no MoE layout"
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

# The EXIT trap: no cgroup left behind; $work removed unless KEEP is set.
bench_cleanup() {
  cg_remove
  if [ -n "${KEEP:-}" ]; then say "raw outputs kept in $work"; else rm -rf "$work"; fi
}
