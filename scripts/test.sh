#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, builds
# (warnings are errors), runs ctest, then the same tests under ASan+UBSan (with
# the GPU tests on the emulated CUDA device), then the libFuzzer targets for a
# bounded time. Exit status 0 only when all pass.
#   FL_FUZZ_SECONDS   seconds per fuzz target (default 20: the thirteen targets
#                     take about 5 minutes; the whole suite took 27-28 minutes on
#                     2 cores of an AVX-512 host, 2026-12-08, of CI's 30)
#   FL_JOBS           parallel build/test jobs (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${FL_JOBS:-$(nproc)}
fuzz_seconds=${FL_FUZZ_SECONDS:-20}

# chromium: the trace report test opens the HTML report headless
scripts/install-deps.sh chromium

# each step with the time it starts: where CI's 30 minutes go
step() { printf '\n=== %s (%s) ===\n' "$*" "$(date +%T)"; }

step "release build (-Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFAULTLINE_WERROR=ON >/dev/null
cmake --build build -j "$jobs"

step "tests (release)"
ctest --test-dir build -j "$jobs" --output-on-failure --timeout 900

step "sanitizer build (address,undefined; emulated CUDA device)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFAULTLINE_WERROR=ON \
      -DFAULTLINE_SANITIZE=address,undefined -DFAULTLINE_CUDA=OFF -DFAULTLINE_CUDA_EMU=ON \
      -DFAULTLINE_BPF=OFF >/dev/null
cmake --build build-asan -j "$jobs"

step "tests (address,undefined)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j "$jobs" --output-on-failure --timeout 1800 -LE nosanitize

step "fuzz targets (${fuzz_seconds}s each)"
CC=clang cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFAULTLINE_FUZZ=ON \
      -DFAULTLINE_CUDA=OFF -DFAULTLINE_BPF=OFF >/dev/null
cmake --build build-fuzz -j "$jobs" --target fuzz-targets
fuzz_failed=0
for target in build-fuzz/fuzz-*; do
  [ -x "$target" ] || continue
  name=$(basename "$target")
  corpus="$root/tests/fuzz/corpus/${name#fuzz-}"
  out=$(mktemp -d)
  mkdir "$out/new"
  echo "$name: corpus $corpus"
  # new inputs go to a scratch folder, never into the committed corpus
  if "$target" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$out/" "$out/new" "$corpus" > "$out/log" 2>&1; then
    tail -n 3 "$out/log"
  else
    echo "$name: FAILED; the end of its log and the input that failed:"
    tail -n 40 "$out/log"
    for a in "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-*; do
      if [ -f "$a" ]; then
        echo "$a:"
        od -An -c "$a" | head -n 20 || true  # head closing the pipe early is not a failure
      fi
    done
    fuzz_failed=1
  fi
  rm -rf "$out"
done
[ "$fuzz_failed" -eq 0 ] || { echo "fuzzing found a failure"; exit 1; }

step "all tests passed"
