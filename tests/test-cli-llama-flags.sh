#!/bin/sh
# test-cli-llama-flags.sh: what a user coming from llama.cpp types, and the
# files a command writes, from outside:
#   - signals: `gen` killed (SIGINT/SIGTERM) at a random point leaves no file
#     under the final name and no temporary one; `run` interrupted at a random
#     point exits 130, prints its speed line and writes valid --stats-json;
#   - no output replaces an input: `eval --logits-out` onto the model (also
#     through a hard link) refuses and the model's bytes are unchanged; an
#     existing GGUF is replaced only with --force; an output folder that does
#     not exist fails before the model is loaded;
#   - every llama.cpp flag of the list is accepted or refused as stated, with
#     exit status 2 for every command-line mistake and 1 for runtime errors;
#   - -f - reads standard input, escapes, -r, --no-display-prompt,
#     --ignore-eos, and the warnings for -t and -c;
#   - -j / -jf (a JSON schema): every answer validates (python3-jsonschema).
#   - --grammar / --grammar-file (GBNF): every answer a sentence (Python's re).
#   - -rea off / --chat-template-kwargs: the prompt as enable_thinking=false writes it.
# usage: test-cli-llama-flags.sh FAULTLINE
set -u
cli=$1
model=tests/data/qwen3moe-tiny-Q8_0.gguf
dir=$(mktemp -d /tmp/test-cli-flags.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "no python3"; exit 77; }
rand_ms() { python3 -c "import random; print(random.randint($1, $2) / 1000)"; }
run() { "$cli" run -m "$model" -t 2 "$@" </dev/null; }

# --- gen under a signal -----------------------------------------------------
for sig in INT TERM INT; do
  "$cli" gen --arch qwen3moe --size 2G -q -o "$dir/big.gguf" &
  pid=$!
  sleep "$(rand_ms 100 900)"
  kill -s $sig $pid
  wait $pid
  rc=$?
  [ $rc -gt 128 ] || fail "gen after SIG$sig: status $rc (expected death by the signal)"
  [ ! -e "$dir/big.gguf" ] || fail "gen after SIG$sig left big.gguf"
  left=$(ls -A "$dir")
  [ -z "$left" ] || fail "gen after SIG$sig left files: $left"
done
echo "gen: SIGINT/SIGTERM at random points leave nothing behind"

# --- outputs never replace inputs or models --------------------------------
"$cli" gen --arch qwen3moe --size 8M -q -o "$dir/m.gguf" || fail "gen"
cp "$dir/m.gguf" "$dir/m.orig"
ln "$dir/m.gguf" "$dir/link.gguf"
for out in "$dir/m.gguf" "$dir/link.gguf"; do
  "$cli" eval -m "$dir/m.gguf" -p hello -n 2 --logits-out "$out" --force 2>"$dir/err"
  rc=$?
  [ $rc -eq 1 ] || fail "eval onto its model ($out): status $rc"
  grep -q "input" "$dir/err" || fail "eval onto its model: no reason given: $(cat "$dir/err")"
  cmp -s "$dir/m.gguf" "$dir/m.orig" || fail "eval changed its model through $out"
done
"$cli" gen --arch qwen3moe --size 8M --seed 2 -q -o "$dir/other.gguf" || fail "gen other"
cp "$dir/other.gguf" "$dir/other.orig"
"$cli" eval -m "$dir/m.gguf" -p hello -n 2 --logits-out "$dir/other.gguf" 2>"$dir/err" &&
  fail "eval replaced another GGUF model without --force"
cmp -s "$dir/other.gguf" "$dir/other.orig" || fail "the other model changed"
"$cli" gen --arch qwen3moe --size 8M -q -o "$dir/other.gguf" 2>/dev/null &&
  fail "gen replaced an existing model without --force"
"$cli" gen --arch qwen3moe --size 8M -q -o "$dir/other.gguf" --force || fail "gen --force"
cmp -s "$dir/other.gguf" "$dir/m.gguf" || fail "gen --force did not write the model asked for"
"$cli" eval -m "$dir/m.gguf" -p hello -n 2 --logits-out "$dir/l.flrf" >/dev/null 2>&1 ||
  fail "eval to a new file"
"$cli" eval -m "$dir/m.gguf" -p hello -n 2 --logits-out "$dir/l.flrf" >/dev/null 2>&1 ||
  fail "eval over its own earlier output (not a model) must work"
start=$(date +%s)
run -p hi -n 2 --stats-json "$dir/no/such/dir/s.json" 2>"$dir/err"
rc=$?
[ $rc -eq 1 ] || fail "--stats-json into a missing folder: status $rc"
grep -q "no/such/dir/s.json" "$dir/err" || fail "--stats-json: no line naming the path"
grep -q "prompt:" "$dir/err" && fail "--stats-json into a missing folder: the run went ahead"
"$cli" eval -m "$dir/m.gguf" -p hello -n 2 --logits-out /dev/null >/dev/null 2>&1 ||
  fail "eval --logits-out /dev/null"
[ -c /dev/null ] || fail "/dev/null is no longer a device"
out=$(run -p hi -n 1 --stats-json /dev/stdout 2>/dev/null)
case $out in *'"pager"'*|*'{'*) ;; *) fail "--stats-json /dev/stdout wrote nothing: $out" ;; esac
echo '{}' >"$dir/real.json"
ln -s real.json "$dir/link.json"
run -p hi -n 1 --stats-json "$dir/link.json" >/dev/null 2>&1 || fail "--stats-json through a link"
[ -L "$dir/link.json" ] || fail "the symbolic link was replaced by a file"
[ "$(wc -c <"$dir/real.json")" -gt 3 ] || fail "the file the link names was not written"
cp tests/data/trace-sample.json "$dir/t.json"
"$cli" trace report "$dir/t.json" --report "$dir/m.gguf" >/dev/null 2>&1 &&
  fail "trace report wrote over a model"
cmp -s "$dir/m.gguf" "$dir/m.orig" || fail "trace report changed the model"
"$cli" trace report "$dir/t.json" --report "$dir/t.json" >/dev/null 2>&1 &&
  fail "trace report wrote over its input"
cmp -s "$dir/t.json" tests/data/trace-sample.json || fail "trace report changed its input"
"$cli" trace report "$dir/t.json" --report "$dir/r.html" >/dev/null || fail "trace report"
[ -s "$dir/r.html" ] || fail "trace report: no report"
ls -A "$dir" | grep -q '\.tmp$' && fail "temporary files left: $(ls -A "$dir")"
echo "outputs: eval/trace onto an input or a model refused (bytes unchanged), models kept without --force, bad folder caught first"

# --- run interrupted ---------------------------------------------------------
for i in 1 2 3; do
  "$cli" run -m "$model" -t 2 -p "Once upon a time" -n -1 --ignore-eos -c 32768 --temp 0.8 -s $i \
    --stats-json "$dir/s$i.json" --stats </dev/null >"$dir/out" 2>"$dir/err" &
  pid=$!
  sleep "$(rand_ms 300 2500)"
  kill -INT $pid
  wait $pid
  rc=$?
  [ $rc -eq 130 ] || fail "run after SIGINT: status $rc (expected 130): $(tail -3 "$dir/err")"
  grep -q "generation: [0-9]* tokens" "$dir/err" || fail "run after SIGINT: no speed line"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert isinstance(d, dict) and d" \
    "$dir/s$i.json" || fail "run after SIGINT: --stats-json is not valid JSON"
done
# during a long prompt (read in 8-token forward calls): stops between them
python3 -c "print('word ' * 1900)" >"$dir/long.txt"
"$cli" run -m "$model" -t 2 -f "$dir/long.txt" -n 4 -ub 8 --stats-json "$dir/sp.json" \
  </dev/null >/dev/null 2>"$dir/err" &
pid=$!
sleep 0.3
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || fail "SIGINT during the prompt: status $rc: $(tail -2 "$dir/err")"
grep -q "prompt: interrupted after" "$dir/err" || fail "SIGINT during the prompt: $(cat "$dir/err")"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$dir/sp.json" ||
  fail "SIGINT during the prompt: --stats-json"
ls -A "$dir" | grep -q '\.tmp$' && fail "run left temporary files"
echo "run: SIGINT at random points -> 130, speed line, valid --stats-json"

# --- flags llama.cpp users type: accepted ------------------------------------
ok() {
  "$cli" run "$@" </dev/null >"$dir/out" 2>"$dir/err"
  rc=$?
  [ $rc -eq 0 ] || fail "accepted flags failed (status $rc): $* :: $(tail -2 "$dir/err")"
}
echo "a prompt from a file" >"$dir/p.txt"
ok --model "$model" --prompt hi --threads 2 --threads-batch 2 --ctx-size 256 --n-predict 2 \
   --batch-size 64 --ubatch-size 32 --temp 0.5 --temperature 0.5 --top-k 10 --top-p 0.9 \
   --min-p 0.1 --seed 3
ok -m "$model" --file "$dir/p.txt" -n 2
ok -m "$model" -p hi -n 2 -fa on
ok -m "$model" -p hi -n 2 -fa off
ok -m "$model" -p hi -n 2 --flash-attn auto
ok -m "$model" -p hi -n 2 -ub 16 -b 32 -tb 1
ok -m "$model" -p hi -n 2 --ignore-eos -r zzz --no-display-prompt -e -s 5 -v --log-disable
ok -m "$model" -p hi -n 2 -no-cnv --mlock --no-mmap -ctk f16 -ctv f16
ok -m "$model" -p hi -n 2 -no-cnv -ctk q8_0 -ctv q8_0
ok -m "$model" -p hi -n 2 -no-cnv --no-warmup --mmap -dio --swa-full -fit on -dt 0.1 --keep 8 \
  --offline --no-jinja --perf --no-perf --log-colors off --simple-io -lv 3 --poll 50 -C 0x3 \
  --cpu-strict 1 --prio 2 -nkvo -kvo
for f in --no-warmup --mmap -dio --swa-full -fit -dt --keep --no-perf -lv --poll -C --cpu-strict --prio; do
  grep -q "faultline run: $f: " "$dir/err" || fail "no note for $f: $(cat "$dir/err")"
done
# -sp prints control tokens' text (here the end of text the bias forces); --verbose-prompt lists
# the prompt's tokens on stderr
"$cli" run -m "$model" -p hi -n 4 -no-cnv --no-display-prompt -sp -l 1024+100 </dev/null \
  >"$dir/out" 2>/dev/null || fail "-sp: exit $?"
[ "$(cat "$dir/out")" = "<|endoftext|>" ] || fail "-sp: printed '$(cat "$dir/out")'"
"$cli" run -m "$model" -p hi -n 4 -no-cnv --no-display-prompt -l 1024+100 </dev/null \
  >"$dir/out" 2>/dev/null || fail "no -sp: exit $?"
[ -z "$(cat "$dir/out")" ] || fail "without -sp: printed '$(cat "$dir/out")'"
"$cli" run -m "$model" -p "hi there" -n 1 -no-cnv --verbose-prompt </dev/null >/dev/null 2>"$dir/err" ||
  fail "--verbose-prompt: exit $?"
grep -q "number of tokens in prompt = 3$" "$dir/err" && grep -q "^ *612 -> ' there'$" "$dir/err" ||
  fail "--verbose-prompt: $(cat "$dir/err")"
ok -m "$model" -p hi -n 2 --cache-type-k f16 --cache-type-v f16 --no-conversation
ok -m "$model" -p hi -n 2 --presence-penalty 0.5 --frequency-penalty 0.5 --repeat-last-n 32 \
   --repeat-penalty 1.1 --repeat-last-n -1
ok -m "$model" -p hi -n 2 --mirostat 0 --dry-multiplier 0 --xtc-probability 0 --top-nsigma -1
ok -m "$model" -p hi -n 8 --dry-multiplier 0.8 --dry-base 1.75 --dry-allowed-length 2 \
   --dry-penalty-last-n 64 --dry-sequence-breaker '\n' --dry-sequence-breaker ':' \
   --xtc-probability 0.5 --xtc-threshold 0.1 --top-n-sigma 1.5 --dynatemp-range 0.5 --dynatemp-exp 1
ok -m "$model" -p hi -n 8 --mirostat 2 --mirostat-lr 0.1 --mirostat-ent 5
ok -m "$model" -p hi -n 8 --mirostat 1 -s 3
ok -m "$model" -p hi -n 4 --samplers "penalties;dry;top_n_sigma;top_k;xtc;temperature"
ok -m "$model" -p hi -n 4 --sampling-seq edskypmxt
ok -m "$model" -p hi -n 2 --seed -1
ok -m "$model" -p hi -n 2 --typical 0.9 --samplers "penalties;top_k;typ_p;top_p;min_p;temperature"
ok -m "$model" -p hi -n 2 --sampling-seq kypmt --min-keep 1
ok -m "$model" -p hi -n 2 --chat -sys "Be brief." --chat-template chatml
ok -m "$model" -p hi -n 2 -st
ok -m "$model" --jinja --single-turn -sys "You are a helpful assistant" -p Hello -n 2
ok -m tests/data/mixtral-tiny-Q4_K_M.gguf --ignore-eos -n 3 -no-cnv
echo "accepted: long forms, -fa, -ub/-b/-tb, --ignore-eos, -r, --no-display-prompt, -e, -s, -v, --log-disable, -no-cnv, --mlock, --no-mmap, -ctk/-ctv f16 and q8_0, noted llama.cpp switches, -sp, --verbose-prompt, penalties, typical, DRY, XTC, top-n-sigma, dynamic temperature, mirostat, --samplers"

# DRY, greedy: the text llama-completion wrote with the same flags (tests/data/sampler)
n=0
while read -r i m flags; do
  case $i in '#'*) continue ;; esac
  # shellcheck disable=SC2086
  "$cli" run -m "tests/data/$m.gguf" -p "The capital of France is" -n 32 --temp 0 -t 2 -no-cnv \
    $flags </dev/null >"$dir/out" 2>"$dir/err" || fail "DRY $i: exit $?: $(cat "$dir/err")"
  cmp -s "$dir/out" "tests/data/sampler/completion-$i.txt" ||
    fail "DRY $i ($m $flags): '$(cat "$dir/out")' where llama.cpp wrote '$(cat "tests/data/sampler/completion-$i.txt")'"
  n=$((n + 1))
done <tests/data/sampler/completions
[ $n -ge 8 ] || fail "only $n DRY completions"
"$cli" run -m tests/data/qwen3moe-tiny-F16.gguf -p "The capital of France is" -n 32 --temp 0 -t 2 \
  -no-cnv </dev/null >"$dir/out" 2>/dev/null
! cmp -s "$dir/out" tests/data/sampler/completion-1.txt || fail "DRY changed nothing in completion 1"
echo "DRY: $n greedy completions as llama-completion's, byte for byte"

# --- refused, status 2 (command-line mistakes) or 1 (runtime) ---------------
refused() {
  want=$1
  shift
  "$cli" "$@" </dev/null >"$dir/out" 2>"$dir/err"
  rc=$?
  [ $rc -eq "$want" ] || fail "expected status $want, got $rc: $* :: $(cat "$dir/err")"
  [ "$(wc -l <"$dir/err")" -ge 1 ] || fail "no line for: $*"
}
refused 2 run -m "$model" -p hi -ctk bf16
for f in "--log-file $dir/log" "--lora-init-without-apply"; do
  # shellcheck disable=SC2086
  refused 2 run -m "$model" -p hi $f
done
refused 2 run -m "$model" -p hi -ctv q4_K
refused 2 run -m "$model" -p hi --mirostat 3
refused 2 run -m "$model" -p hi --dry-penalty-last-n -1
refused 2 run -m "$model" -p hi --dry-allowed-length x
refused 2 run -m "$model" -p hi --dry-sequence-breaker ""
refused 2 run -m "$model" -p hi --xtc-probability 1.5
refused 2 run -m "$model" -p hi -fa sometimes
refused 2 run -m "$model" -p hi --samplers "top_k;infill;temperature"
refused 2 run -m "$model" -p hi --samplers "top_k;mirostat"
refused 2 run -m "$model" -p hi --samplers "top_k;bogus"
refused 2 run -m "$model" -p hi --sampling-seq kia
refused 2 run -m "$model" -p hi -ot 'exps[=ram'
refused 2 run -m "$model" -p hi -ot 'exps=moon'
refused 2 eval -m "$model" -p hi --logits-out "$dir/x" -ot 'exps[=ram'
refused 2 bench -m "$model" -ot 'exps[=ram'
refused 2 run -m "$model" -p hi --frobnicate
refused 2 run -m "$model" -p hi -n abc
refused 2 run -m "$model" -p hi --chat-template nosuch
refused 2 run -m "$model" -p hi -f "$dir/p.txt"
for c in inspect compare tokenize version trace batch serve eval gen bench; do
  refused 2 $c --bogus-flag
done
refused 2 inspect
for f in "-ts 3,1" "-sm tensor" "-dev CUDA1" "--list-devices" "-hf a/b" "--in-prefix x" "--lora x"; do
  refused 2 run -m "$model" -p hi $f
  grep -q -e "${f%% *}: " "$dir/err" || fail "$f: no reason given: $(cat "$dir/err")"
done
refused 2 run -m "$model" -m "$dir/m.gguf" -p hi
refused 2 bench -m "$model" -m "$dir/m.gguf"
refused 2 nosuchcommand
refused 1 inspect "$dir/missing.gguf"
refused 1 run -m "$dir/missing.gguf" -p hi
refused 1 run -m "$model" -f "$dir/missing.txt"
for v in 300 abc 300+ 300+-1 -5+1 '300*2'; do
  refused 2 run -m "$model" -p hi -n 1 -l "$v"
done
refused 1 run -m "$model" -p hi -n 1 --logit-bias 99999+1
grep -q "Exit status" <<EOF || fail "--help does not document the exit status"
$("$cli" run --help)
EOF
echo "refused with a line: other cache types, bad sampler values and orders, bad -fa/-ot/options (2); missing files (1)"

# --- behaviour ----------------------------------------------------------------
# -l: token 300 lifted by 100 is every greedy pick; a later -l banning it wins
lifted=$(run -p hi -n 3 --temp 0 --no-display-prompt -l 300+100 2>/dev/null)
plain=$(run -p hi -n 3 --temp 0 --no-display-prompt 2>/dev/null)
banned=$(run -p hi -n 3 --temp 0 --no-display-prompt -l 300+100 --logit-bias 300-inf 2>/dev/null)
[ "$lifted" != "$plain" ] && [ "$banned" = "$plain" ] ||
  fail "-l: lifted '$lifted', plain '$plain', lifted then banned '$banned'"
one=$(run -p hi -n 1 --temp 0 --no-display-prompt -l 300+100 2>/dev/null)
[ -n "$one" ] && [ "$lifted" = "$one$one$one" ] || fail "-l 300+100: not one token thrice: '$lifted'"
echo "-l/--logit-bias: lifted, banned, malformed (2), outside the vocabulary (1)"
out=$(echo "from standard input" | "$cli" run -m "$model" -f - -n 2 --temp 0 2>/dev/null)
case $out in "from standard input"*) ;; *) fail "-f - did not read stdin: '$out'" ;; esac
out=$(run -p 'a\tb' -n 1 --temp 0 2>/dev/null)
case $out in "$(printf 'a\tb')"*) ;; *) fail "escapes: '$out'" ;; esac
out=$(run -p 'a\tb' -n 1 --temp 0 --no-escape 2>/dev/null)
case $out in 'a\tb'*) ;; *) fail "--no-escape: '$out'" ;; esac
out=$(run -p 'Once upon' -n 4 --temp 0 --no-display-prompt 2>/dev/null)
case $out in *"Once upon"*) fail "--no-display-prompt still shows the prompt" ;; esac
run -p 'Once upon' -n 40 --temp 0 --ignore-eos 2>"$dir/err" >/dev/null
grep -q "generation: 40 tokens" "$dir/err" || fail "--ignore-eos -n 40: $(cat "$dir/err")"
full=$(run -p 'Once upon' -n 40 --temp 0 --ignore-eos --no-display-prompt 2>/dev/null)
stop=$(printf '%s' "$full" | python3 -c "import sys; t=sys.stdin.read(); print(t[len(t)//2:len(t)//2+3])")
cut=$(run -p 'Once upon' -n 40 --temp 0 --ignore-eos --no-display-prompt -r "$stop" 2>/dev/null)
[ ${#cut} -lt ${#full} ] || fail "-r '$stop' did not stop early"
case $cut in *"$stop"*) ;; *) fail "-r: the output should end with the reverse prompt" ;; esac
run -p 'Once upon' -n 0 --temp 0 2>"$dir/err" >/dev/null
grep -q "generation: 0 tokens" "$dir/err" || fail "-n 0 generated: $(cat "$dir/err")"
run -p hi -n 1 -t 999 2>&1 >/dev/null | grep -q "more threads than" || fail "no warning for -t 999"
run -p hi -n 1 -c 100000 2>&1 >/dev/null | grep -q "trained on only" || fail "no warning for -c"
echo "behaviour: -f -, escapes, --no-display-prompt, --ignore-eos, -r, warnings"

# --- start-up feedback: one line per long step off a terminal ----------------
FL_PROGRESS_AFTER_S=0 "$cli" run -m "$model" -p hi -n 1 </dev/null 2>"$dir/err" >/dev/null ||
  fail "run with progress lines"
grep -q "^faultline: reading the RAM tier: .* in [0-9.]* s" "$dir/err" ||
  fail "no line for reading the RAM tier: $(cat "$dir/err")"
run -p hi -n 1 2>&1 >/dev/null | grep -q "reading the RAM tier" &&
  fail "a step under a second printed a line"
FL_PROGRESS_AFTER_S=0 "$cli" gen --arch qwen3moe --size 8M -o "$dir/p.gguf" 2>"$dir/err" >/dev/null ||
  fail "gen with progress lines"
grep -q "^faultline: writing the model: " "$dir/err" || fail "gen: no progress line: $(cat "$dir/err")"
python3 - "$cli" "$dir/q.gguf" <<'EOF' || fail "no progress bar on a terminal"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.environ["FL_PROGRESS_AFTER_S"] = "0"
    os.execv(sys.argv[1], [sys.argv[1], "gen", "--arch", "qwen3moe", "--size", "64M", "-o", sys.argv[2]])
out = b""
while True:
    try:
        d = os.read(fd, 65536)
    except OSError:
        break
    if not d:
        break
    out += d
_, st = os.waitpid(pid, 0)
sys.exit(0 if os.waitstatus_to_exitcode(st) == 0 and b"\rwriting the model [" in out and b"100%" in out else 1)
EOF
echo "progress: a line per step off a terminal, a bar on one, nothing for short steps"

# --- -j / -jf: llama.cpp's JSON schema flags ----------------------------------
schema='{"type": "object", "properties": {"n": {"type": "integer"}, "tag": {"enum": ["a", "b"]},
  "xs": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}}, "required": ["n", "tag", "xs"]}'
printf '%s' "$schema" >"$dir/schema.json"
for how in "-j" "-jf"; do
  for seed in 1 2 3; do
    if [ "$how" = -j ]; then arg=$schema; else arg=$dir/schema.json; fi
    run -p "JSON:" --no-display-prompt --temp 1 -s $seed -n 400 --log-disable "$how" "$arg" \
      >"$dir/value" 2>"$dir/err" || fail "run $how: exit $? ($(cat "$dir/err"))"
    python3 - "$dir/value" "$schema" <<'EOF' || fail "run $how, seed $seed: $(cat "$dir/value")"
import json, sys, jsonschema
jsonschema.validate(json.loads(open(sys.argv[1]).read()), json.loads(sys.argv[2]))
EOF
  done
done
run -p x -j '{"type": "string", "pattern": "a"}' 2>"$dir/err"
[ $? = 2 ] && grep -q '"pattern" is not supported' "$dir/err" || fail "-j with a pattern: $(cat "$dir/err")"
run -p x -j '{bad' 2>"$dir/err"
[ $? = 2 ] && [ "$(wc -l <"$dir/err")" = 1 ] || fail "-j not JSON: $(cat "$dir/err")"
run -p x -jf "$dir/none.json" 2>"$dir/err"
[ $? = 2 ] || fail "-jf with no file: $(cat "$dir/err")"
echo "-j / -jf: answers of the schema (python3-jsonschema), 2 for a schema it cannot hold or read"

# --- --grammar / --grammar-file: llama.cpp's GBNF flags -------------------------
grammar='root ::= "n=" [1-9] [0-9]{0,3} (", " [a-c]{1,6}){1,3} "."'
printf '%s\n' "$grammar" >"$dir/g.gbnf"
for how in "--grammar" "--grammar-file"; do
  for seed in 1 2; do
    if [ "$how" = --grammar ]; then arg=$grammar; else arg=$dir/g.gbnf; fi
    run -p "List:" --no-display-prompt --temp 1 -s $seed -n 200 --log-disable "$how" "$arg" \
      >"$dir/sentence" 2>"$dir/err" || fail "run $how: exit $? ($(cat "$dir/err"))"
    python3 -c 'import re, sys; t = open(sys.argv[1]).read().rstrip("\n"); sys.exit(0 if re.fullmatch(r"n=[1-9][0-9]{0,3}(, [a-c]{1,6}){1,3}\.", t) else 1)' \
      "$dir/sentence" || fail "run $how, seed $seed: not a sentence: $(cat "$dir/sentence")"
  done
done
run -p x --grammar 'root ::= "a" b' 2>"$dir/err"
[ $? = 1 ] && grep -q "rule 'b' is used but not defined" "$dir/err" && [ "$(wc -l <"$dir/err")" = 1 ] ||
  fail "--grammar undefined rule: $(cat "$dir/err")"
run -p x --grammar-file "$dir/none.gbnf" 2>"$dir/err"
[ $? = 2 ] && [ "$(wc -l <"$dir/err")" = 1 ] || fail "--grammar-file with no file: $(cat "$dir/err")"
run -p x --grammar 'root ::= "a"' -j '{}' 2>"$dir/err"
[ $? = 2 ] || fail "--grammar with -j: $(cat "$dir/err")"
echo "--grammar / --grammar-file: sentences (Python's re), 1 for a grammar that does not compile, 2 for flags"

# --- --reasoning-budget: MiniMax-M2's prompt opens <think>; greedy answers ---------
mm=tests/data/minimax-m2-tiny-Q8_0.gguf
"$cli" run -m $mm -t 1 -st -p hi -n 12 --temp 0 --no-display-prompt --log-disable >"$dir/free" 2>"$dir/err" ||
  fail "run on MiniMax-M2: $(cat "$dir/err")"
"$cli" run -m $mm -t 1 -st -p hi -n 12 --temp 0 --no-display-prompt --log-disable --reasoning-budget 0 \
  --reasoning-budget-message "Enough." >"$dir/zero" 2>"$dir/err" || fail "--reasoning-budget 0: $(cat "$dir/err")"
"$cli" run -m $mm -t 1 -st -p hi -n 12 --temp 0 --no-display-prompt --log-disable --reasoning-budget 2 \
  >"$dir/two" 2>"$dir/err" || fail "--reasoning-budget 2: $(cat "$dir/err")"
python3 - "$dir/free" "$dir/zero" "$dir/two" <<'EOF' || fail "--reasoning-budget: $(cat "$dir/free" "$dir/zero" "$dir/two")"
import sys
free, zero, two = (open(f, encoding="utf-8", errors="replace").read() for f in sys.argv[1:])
assert "</think>" not in free[:40], free      # unbudgeted, it reasons on
assert zero.startswith("Enough.</think>"), zero  # 0: the message and the close at once
head = two.split("</think>")[0]
assert "</think>" in two and head and free.startswith(head), (two, free)  # 2 tokens of the free answer
print("--reasoning-budget: 0 ->", repr(zero[:20]), "; 2 ->", repr(two[:20]))
EOF
"$cli" run -m $mm -st -p hi --reasoning-budget -2 >/dev/null 2>"$dir/err"
[ $? = 2 ] || fail "--reasoning-budget -2: $(cat "$dir/err")"

# --- -rea off / --chat-template-kwargs: Qwen3's enable_thinking=false -------------
for how in "-rea off" "--reasoning off" "--chat-template-kwargs {\"enable_thinking\":false}"; do
  # shellcheck disable=SC2086
  run -st -p Hi -n 1 --temp 0 $how >"$dir/out" 2>"$dir/err" || fail "run $how: exit $? ($(cat "$dir/err"))"
  grep -q '^<|im_start|>assistant$' "$dir/out" && [ "$(sed -n '4,6p' "$dir/out" | tr '\n' '|')" = "<think>||</think>|" ] ||
    fail "run $how: the prompt does not end with an empty <think>: $(head -c 300 "$dir/out")"
done
run -st -p Hi -n 1 --temp 0 -rea on >"$dir/out" 2>"$dir/err" && ! grep -q "<think>" "$dir/out" ||
  fail "-rea on: $(head -c 300 "$dir/out")"
for bad in "-rea maybe" "--chat-template-kwargs {\"enable_thinking\":\"no\"}" "--chat-template-kwargs [1]"; do
  # shellcheck disable=SC2086
  run -st -p Hi -n 1 $bad >/dev/null 2>"$dir/err"
  [ $? = 2 ] && [ "$(wc -l <"$dir/err")" = 1 ] || fail "run $bad: $(cat "$dir/err")"
done
echo "-rea off / --chat-template-kwargs: Qwen3's prompt ends with an empty <think>; 2 for bad values"
echo PASS
