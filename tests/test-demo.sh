#!/bin/sh
# test-demo.sh: scripts/demo.sh as a user runs it on their own file: MODEL
# relative to the caller's folder (not the checkout), and a model under
# 4 MiB (its quarter-of-the-file budget is given in KiB, not as 0M). The
# script builds with the checkout's build/ folder (a no-op after test.sh's
# release build).
# usage: test-demo.sh
set -u
root=$PWD
dir=$(mktemp -d /tmp/test-demo.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$dir/out"; exit 1; }
mkdir "$dir/models"
cp tests/data/qwen3moe-tiny-Q8_0.gguf "$dir/models/tiny.gguf"
size=$(stat -c %s "$dir/models/tiny.gguf")
(cd "$dir" && MODEL=models/tiny.gguf N_GEN=4 THREADS=2 "$root/scripts/demo.sh") >"$dir/out" 2>&1 ||
  fail "demo.sh with MODEL=models/tiny.gguf (relative) failed"
budget="$((size / 4 / 1024))K"
grep -q -- "--ram-budget $budget" "$dir/out" || fail "the budget is not $budget"
grep -q "prompt: [0-9]* tokens" "$dir/out" || fail "no speed line"
grep -q "faults" "$dir/out" || fail "no paging statistics"
(cd "$dir" && MODEL=models/missing.gguf "$root/scripts/demo.sh") >"$dir/out" 2>&1 &&
  fail "a missing MODEL did not fail"
grep -q "$dir/models/missing.gguf: no such file" "$dir/out" || fail "no line naming the missing file"
echo "demo.sh: relative MODEL, $size-byte model at --ram-budget $budget, missing file one line"
echo PASS
