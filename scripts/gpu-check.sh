#!/usr/bin/env bash
# The GPU check (issue 6), for a machine with a CUDA device; under 8 minutes.
#   1. builds with FAULTLINE_CUDA=ON in build-gpu (Release, -Werror)
#   2. runs the CUDA tests (kernels vs the CPU, the VRAM expert cache)
#   3. compares GPU and CPU logits on tests/data models, when the engine can
#      run its forward pass on the GPU (it says so when it cannot yet)
#   4. benchmarks kernels and the expert cache (bench-cuda): decode matvec
#      bandwidth per type, prefill GEMM, and expert fills through a cache
#      smaller than the experts, in copy and unified mode
# Exit status 0 only when everything that ran passed. Environment:
#   FL_JOBS  build jobs (default nproc)   FL_GPU_BUILD  build dir (default build-gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=${FL_JOBS:-$(nproc)}
build=${FL_GPU_BUILD:-build-gpu}
status=0
step() { printf '\n=== %s ===\n' "$*"; }
fail() { echo "gpu-check: FAILED: $*"; status=1; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU visible (nvidia-smi -L failed): the build runs, the GPU tests will skip"
else
  nvidia-smi -L
fi

step "build (FAULTLINE_CUDA=ON)"
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFAULTLINE_WERROR=ON \
      -DFAULTLINE_CUDA=ON -DFAULTLINE_BPF=OFF >/dev/null || { fail "cmake configure"; exit 1; }
targets="test-cuda-lru test-cuda-kernels test-cuda-xcache bench-cuda"
timeout 300 cmake --build "$build" -j "$jobs" --target $targets || { fail "build"; exit 1; }
echo "built CUDA targets in $(( $(date +%s) - start )) s"
# the whole project too, so a GPU run also checks that everything links with CUDA on
timeout 300 cmake --build "$build" -j "$jobs" >/dev/null 2>&1 || echo "note: the full build failed (see cmake --build $build); CUDA targets are fine"

step "CUDA tests"
timeout 240 ctest --test-dir "$build" -R '^test-cuda-' --output-on-failure -V 2>&1 \
  | grep -v '^[0-9]*: Test command\|^[0-9]*: Working\|^[0-9]*: Environment\|^UpdateCTest\|^Parse\|^ Add\|^Constructing\|^Checking\|^Test project\|^test [0-9]' \
  || fail "CUDA tests"
if ctest --test-dir "$build" -R '^test-cuda-' 2>/dev/null | grep -q 'Skipped'; then
  echo "note: some CUDA tests skipped (no device visible to them)"
fi

step "GPU vs CPU logits"
cli="$build/faultline"
if [ -x "$cli" ] && "$cli" run --help 2>&1 | grep -q -- '--gpu-experts'; then
  # mean KL <= 1e-3 on the F16/Q8_0 models (issue 6); the others are reported
  for m in tests/data/*.gguf; do
    [ -f "$m" ] || continue
    case "$m" in *F16*|*Q8_0*) kl="--max-kl 1e-3" ;; *) kl="" ;; esac
    echo "model $m"
    timeout 90 "$cli" eval -m "$m" -p "The quick brown fox" -n 16 \
        --logits-out /tmp/gpu-check-cpu.flrf >/dev/null 2>&1 \
      && timeout 90 "$cli" eval -m "$m" -p "The quick brown fox" -n 16 --gpu-experts copy \
        --logits-out /tmp/gpu-check-gpu.flrf >/dev/null 2>&1 \
      && "$cli" compare /tmp/gpu-check-cpu.flrf /tmp/gpu-check-gpu.flrf $kl || fail "logits on $m"
  done
else
  echo "NOT RUN: the engine's forward pass has no GPU path yet (faultline run has no"
  echo "--gpu-experts): the CUDA backend's kernels and expert cache exist and are tested"
  echo "above, but nothing calls them from eng_forward. Logit comparison (mean KL <= 1e-3"
  echo "for F16/Q8_0) and the --gpu-experts copy|unified|cpu model benchmark need that wiring."
fi

step "kernel and expert-cache benchmark (bench-cuda)"
if [ -x "$build/bench-cuda" ]; then
  timeout 120 "$build/bench-cuda"; rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || fail "bench-cuda (exit $rc)"
else
  fail "bench-cuda was not built"
fi

step "done"
[ $status -eq 0 ] && echo "gpu-check: all that ran passed" || echo "gpu-check: failures above"
exit $status
