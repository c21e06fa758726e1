#!/bin/bash
# test-prompt-cache-cli.sh: `faultline run --prompt-cache FILE` as a user
# meets it (llama-completion's flag); test-prompt-file checks the rows.
#   - a first run writes FILE, later runs read it: stdout byte for byte the
#     run's without a cache (greedy and seeded sampling), a line saying how
#     many tokens were read; a longer prompt reads the common start and
#     keeps its own; a recurrent model (Qwen3.5) too;
#   - --prompt-cache-ro reads and never writes;
#   - a conversation (-cnv) keeps its first turn (a long system prompt) and a
#     later one reads it: the turns' answers the same as without a file; a
#     file of another model is refused before the first turn is read;
#   - refusals, exit 1 in one line before the prompt is shown, FILE
#     unchanged: another -b, other --rope-* flags, another model; the model itself as FILE (never
#     overwritten); a folder that does not exist (before any work).
# usage: test-prompt-cache-cli.sh FAULTLINE   (exit 77: no python3)
set -u
cli=$1
dir=$(mktemp -d /tmp/test-prompt-cache.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
doc=$(python3 -c "
import random
random.seed(3)
w = 'river engine market winter letter garden signal paper number station window'.split()
print(' '.join(random.choice(w) for _ in range(400)))")
file=$dir/doc.state

for m in qwen3moe-tiny-Q8_0 qwen35moe-tiny-F16 deepseek2-tiny-F16; do
  model=tests/data/$m.gguf
  rm -f "$file"
  for args in "--temp 0 -n 24" "--temp 0.8 -s 11 -n 24"; do
    read -r -a a <<<"$args"
    run() { "$cli" run -m "$model" -no-cnv -t 2 -b 64 --no-display-prompt "${a[@]}" "$@"; }
    run -p "$doc Question one?" >"$dir/plain" 2>/dev/null || fail "$m $args: run"
    for pass in write read; do
      run -p "$doc Question one?" --prompt-cache "$file" >"$dir/$pass" 2>"$dir/$pass.err" ||
        fail "$m $args ($pass): $(tail -1 "$dir/$pass.err")"
      cmp -s "$dir/plain" "$dir/$pass" || fail "$m $args ($pass): the output changed"
    done
    grep -q "prompt cache .*: [1-9][0-9]* of the prompt's [0-9]* tokens read" "$dir/read.err" ||
      fail "$m $args: the second run read nothing: $(cat "$dir/read.err")"
    # another question after the same document
    run -p "$doc Question two, longer?" >"$dir/plain2" 2>/dev/null || fail "$m: run"
    run -p "$doc Question two, longer?" --prompt-cache "$file" >"$dir/read2" 2>"$dir/read2.err" ||
      fail "$m: $(tail -1 "$dir/read2.err")"
    cmp -s "$dir/plain2" "$dir/read2" || fail "$m $args: another question's output changed"
  done
  echo "$m: $(grep "tokens read" "$dir/read2.err")"
done

# -ro: read, never written
model=tests/data/qwen3moe-tiny-Q8_0.gguf
cp "$file" "$dir/before"
"$cli" run -m tests/data/deepseek2-tiny-F16.gguf -no-cnv -t 2 -b 64 -n 4 -p "$doc other" \
  --prompt-cache "$file" --prompt-cache-ro >/dev/null 2>"$dir/ro.err" || fail "-ro: $(cat "$dir/ro.err")"
cmp -s "$file" "$dir/before" || fail "--prompt-cache-ro changed the file"
rm -f "$dir/new.state"
"$cli" run -m "$model" -no-cnv -t 2 -b 64 -n 4 -p "$doc" --prompt-cache "$dir/new.state" \
  --prompt-cache-ro >/dev/null 2>&1 || fail "-ro without a file"
[ ! -e "$dir/new.state" ] || fail "--prompt-cache-ro wrote a file"

# refusals: exit 1, one line, nothing changed
refuse() { # WHAT EXPECTED-TEXT ARGS...
  local what=$1 want=$2; shift 2
  "$cli" run -no-cnv -t 2 -n 4 "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  [ -z "$(tr -d '\n' <"$dir/out")" ] || fail "$what: the prompt was shown before the refusal"
  [ $rc -eq 1 ] || fail "$what: exit $rc (want 1): $(cat "$dir/err")"
  [ "$(grep -vc '^prompt:' "$dir/err")" -eq 1 ] || fail "$what: not one line: $(cat "$dir/err")"
  grep -q -- "$want" "$dir/err" || fail "$what: the line does not say '$want': $(cat "$dir/err")"
  echo "$what: $(cat "$dir/err")"
}
# a conversation: the first turn (system prompt and question) kept, then read
printf 'what is it about\nsay more\n' >"$dir/turns"
chat() { "$cli" run -m tests/data/qwen3moe-tiny-Q8_0.gguf -cnv -sys "$doc" --temp 0 -n 16 -t 2 \
  -b 64 "$@" <"$dir/turns"; }
chat >"$dir/chat.plain" 2>/dev/null || fail "-cnv"
rm -f "$dir/chat.state"
for i in 1 2; do
  chat --prompt-cache "$dir/chat.state" >"$dir/chat.$i" 2>"$dir/chat.err" ||
    fail "-cnv --prompt-cache ($i): $(cat "$dir/chat.err")"
  cmp -s "$dir/chat.plain" "$dir/chat.$i" || fail "-cnv --prompt-cache ($i): the answers changed"
done
grep -q "prompt cache .*: [1-9][0-9]* of the prompt's [0-9]* tokens read" "$dir/chat.err" ||
  fail "-cnv: the second conversation read nothing: $(cat "$dir/chat.err")"
"$cli" run -m tests/data/gpt-oss-tiny-MXFP4.gguf -cnv -t 2 -b 64 -n 4 --prompt-cache \
  "$dir/chat.state" <"$dir/turns" >"$dir/out" 2>"$dir/err"
rc=$?
[ $rc -eq 1 ] && grep -q "another model file" "$dir/err" && [ -z "$(tr -d '\n' <"$dir/out")" ] ||
  fail "-cnv with another model's file: exit $rc: $(cat "$dir/out" "$dir/err")"
echo "a conversation keeps and reads its first turn"

cp "$file" "$dir/before"
refuse "another -b" "other settings" -m tests/data/deepseek2-tiny-F16.gguf -b 32 -p "$doc" \
  --prompt-cache "$file"
refuse "other rope settings" "other settings" -m tests/data/deepseek2-tiny-F16.gguf -b 64 \
  -p "$doc" --prompt-cache "$file" --rope-scale 2
refuse "another model" "another model file" -m "$model" -b 64 -p "$doc" --prompt-cache "$file"
cmp -s "$file" "$dir/before" || fail "a refused run changed the file"
cp "$model" "$dir/model.gguf"
refuse "the model as the file" "refusing to overwrite" -m "$dir/model.gguf" -b 64 -p "$doc" \
  --prompt-cache "$dir/model.gguf"
cmp -s "$model" "$dir/model.gguf" || fail "the model file was overwritten"
refuse "no such folder" "$dir/none" -m "$model" -p "$doc" --prompt-cache "$dir/none/x.state"
echo "test-prompt-cache-cli: all checks passed"
