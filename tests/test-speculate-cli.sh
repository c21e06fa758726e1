#!/bin/bash
# test-speculate-cli.sh: --spec-type ngram-simple (speculative decoding
# without a draft model) and -md (a draft model, draft-simple) as a user
# meets them; test-speculate checks the engine's rows.
#   - faultline run: greedy, seeded sampling, a -r stop, a context that
#     fills, and a conversation of three turns (the chat rewinds its
#     sequence): stdout byte for byte the same with and without drafts, and
#     the speed line says drafts were fed and kept;
#   - faultline batch: completions and chat lines (seeded sampling, a stop
#     string) give the same choices and usage, and the summary counts drafts;
#   - faultline serve: /completion's text the same as batch's, its timings
#     with llama-server's draft_n and draft_n_accepted, and /metrics'
#     spec_decode counters; a recurrent model (Qwen3-Next) with a draft
#     model (itself) answers as without;
#   - the same with a draft model: run (its F16 sibling or the model itself
#     drafting), batch and serve (the ready line says draft-simple, /slots
#     says "speculative": true);
#   - refusals in one line: exit status 2 for another type, a size out of
#     range, a draft model's GPU flags; 1 for a draft model that is missing
#     or has another vocabulary, or draft-simple without one.
# usage: test-speculate-cli.sh FAULTLINE   (exit 77: no python3 or curl)
set -u
cli=$1
dir=$(mktemp -d /tmp/test-spec.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/server.err" ] && tail -5 "$dir/server.err"; exit 1; }
command -v python3 >/dev/null && command -v curl >/dev/null || { echo "skipped"; exit 77; }
. tests/lib-serve.sh
spec=(--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 6)
prompt="the cat sat on the mat, the cat sat on the mat, the cat"

# run: every way an answer ends (the last two with a draft model: the F16
# sibling, then the model itself with longer drafts)
for m in qwen3moe-tiny-Q8_0 gpt-oss-tiny-MXFP4 deepseek2-tiny-F16 qwen35moe-tiny-Q8_0 \
         draft:qwen3moe-tiny-Q8_0 draft-self:gpt-oss-tiny-MXFP4 draft-self:qwen3next-tiny-F16; do
  case $m in
    draft:*) m=${m#draft:}; spec=(-md tests/data/${m%-Q8_0}-F16.gguf) ;;
    draft-self:*) m=${m#draft-self:}; spec=(-md tests/data/$m.gguf --spec-draft-n-max 6) ;;
  esac
  model=tests/data/$m.gguf
  for args in "--temp 0 -n 120" "--temp 0.8 -s 5 -n 100" "--temp 0 -c 80 -n -2" "--temp 0 -n 90 -r mat"; do
    read -r -a a <<<"$args"
    "$cli" run -m "$model" -p "$prompt" -no-cnv -t 2 "${a[@]}" >"$dir/plain" 2>/dev/null ||
      fail "run $m $args"
    "$cli" run -m "$model" -p "$prompt" -no-cnv -t 2 "${a[@]}" "${spec[@]}" >"$dir/spec" \
      2>"$dir/spec.err" || fail "run $m $args with drafts: $(tail -1 "$dir/spec.err")"
    cmp -s "$dir/plain" "$dir/spec" || fail "run $m $args: the output changed with drafts"
  done
  grep -q "speculative decoding: [1-9][0-9]* draft tokens, [1-9]" "$dir/spec.err" ||
    fail "run $m: no draft was kept: $(cat "$dir/spec.err")"
done
spec=(--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 6)
printf 'the cat sat on the mat\nrepeat it again please\nand once more\n' >"$dir/turns"
for m in qwen3moe-tiny-Q8_0 glm4moe-tiny-Q8_0 draft:glm4moe-tiny-Q8_0 draft:qwen35moe-tiny-Q8_0; do
  with=("${spec[@]}")
  [ "${m#draft:}" != "$m" ] && m=${m#draft:} && with=(-md tests/data/$m.gguf)
  "$cli" run -m tests/data/$m.gguf -cnv --temp 0 -n 60 -t 2 <"$dir/turns" >"$dir/plain" 2>/dev/null
  "$cli" run -m tests/data/$m.gguf -cnv --temp 0 -n 60 -t 2 "${with[@]}" <"$dir/turns" \
    >"$dir/spec" 2>"$dir/spec.err"
  cmp -s "$dir/plain" "$dir/spec" || fail "run -cnv $m: the conversation changed with drafts"
  grep -q "kept" "$dir/spec.err" || fail "run -cnv $m: no drafts"
done
echo "ok: run"

# batch
python3 - "$dir/in.jsonl" "$prompt" <<'EOF'
import json, sys
with open(sys.argv[1], 'w') as f:
    for i in range(4):
        body = {"prompt": sys.argv[2] + " %d" % i, "max_tokens": 100, "temperature": 0 if i % 2 else 0.8,
                "seed": i}
        f.write(json.dumps({"custom_id": "c%d" % i, "url": "/v1/completions", "body": body}) + "\n")
    for i in range(2):
        body = {"messages": [{"role": "user", "content": "say the cat sat on the mat %d" % i}],
                "max_tokens": 80, "temperature": 0.7, "seed": 9 + i, "stop": ["mat mat"]}
        f.write(json.dumps({"custom_id": "m%d" % i, "url": "/v1/chat/completions", "body": body}) + "\n")
EOF
cat >"$dir/same.py" <<'EOF'
import json, sys
def load(f):
    out = {}
    for line in open(f):
        o = json.loads(line)
        b = o["response"]["body"]
        out[o["custom_id"]] = (json.dumps(b["choices"], sort_keys=True), json.dumps(b["usage"]))
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
sys.exit(0 if a == b and len(a) == 6 else 1)
EOF
model=tests/data/mixtral-tiny-Q4_K_M.gguf
"$cli" batch -m "$model" -i "$dir/in.jsonl" -o "$dir/plain.jsonl" -q -t 2 2>/dev/null || fail "batch"
"$cli" batch -m "$model" -i "$dir/in.jsonl" -o "$dir/spec.jsonl" -q -t 2 "${spec[@]}" \
  2>"$dir/batch.err" || fail "batch with drafts: $(tail -1 "$dir/batch.err")"
python3 "$dir/same.py" "$dir/plain.jsonl" "$dir/spec.jsonl" || fail "batch: the answers changed with drafts"
grep -q "draft tokens, [1-9][0-9]* kept" "$dir/batch.err" || fail "batch: no drafts: $(cat "$dir/batch.err")"
"$cli" batch -m "$model" -i "$dir/in.jsonl" -o "$dir/draft.jsonl" -q -t 2 -np 3 -md "$model" \
  2>"$dir/batch.err" || fail "batch with a draft model: $(tail -1 "$dir/batch.err")"
"$cli" batch -m "$model" -i "$dir/in.jsonl" -o "$dir/plain3.jsonl" -q -t 2 -np 3 2>/dev/null ||
  fail "batch -np 3"
python3 "$dir/same.py" "$dir/plain3.jsonl" "$dir/draft.jsonl" ||
  fail "batch: the answers changed with a draft model"
grep -q "draft tokens, [1-9][0-9]* kept" "$dir/batch.err" ||
  fail "batch: no drafts from the draft model: $(cat "$dir/batch.err")"
echo "ok: batch"

# serve
model=tests/data/qwen3moe-tiny-Q8_0.gguf
body='{"prompt": "'"$prompt"'", "n_predict": 80, "temperature": 0}'
serve_start -m "$model" "${spec[@]}"
grep -q "speculative decoding ngram-simple" "$dir/server.err" || fail "serve: the ready line"
curl -sf "127.0.0.1:$port/completion" -d "$body" >"$dir/spec.json" || fail "serve /completion"
curl -sf "127.0.0.1:$port/metrics" >"$dir/metrics" || fail "serve /metrics"
kill $pid; wait $pid; pid=
serve_start -m "$model"
curl -sf "127.0.0.1:$port/completion" -d "$body" >"$dir/plain.json" || fail "serve /completion"
curl -sf "127.0.0.1:$port/slots" | python3 -c "
import json, sys
assert all(x['speculative'] is False for x in json.load(sys.stdin))" ||
  fail "serve: /slots says a server without drafts speculates"
kill $pid; wait $pid; pid=
python3 - "$dir/plain.json" "$dir/spec.json" <<'EOF' || fail "serve: $(cat "$dir/spec.json")"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["content"] == b["content"] and a["tokens_predicted"] == b["tokens_predicted"]
t = b["timings"]
assert t["draft_n"] > 0 and 0 < t["draft_n_accepted"] <= t["draft_n"], t
assert "draft_n" not in a["timings"]
EOF
grep -q "^faultline_spec_decode_num_accepted_tokens_total [1-9]" "$dir/metrics" ||
  fail "serve: /metrics has no spec_decode counters"
serve_start -m "$model" -md tests/data/qwen3moe-tiny-F16.gguf -np 2
grep -q "speculative decoding draft-simple" "$dir/server.err" || fail "serve -md: the ready line"
curl -sf "127.0.0.1:$port/completion" -d "$body" >"$dir/draft.json" &
curl -sf "127.0.0.1:$port/completion" -d "$body" >"$dir/draft2.json" || fail "serve -md /completion"
wait $! || fail "serve -md: the other /completion"
curl -sf "127.0.0.1:$port/slots" | python3 -c "
import json, sys
s = json.load(sys.stdin)
assert len(s) == 2 and all(x['speculative'] is True for x in s), s" ||
  fail "serve -md: /slots does not say the slots speculate"
kill $pid; wait $pid; pid=
for f in draft draft2; do
  python3 - "$dir/plain.json" "$dir/$f.json" <<'EOF' || fail "serve -md: $(cat "$dir/$f.json")"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["content"] == b["content"] and a["tokens_predicted"] == b["tokens_predicted"]
t = b["timings"]
assert t["draft_n"] > 0 and 0 < t["draft_n_accepted"] <= t["draft_n"], t
EOF
done
model=tests/data/qwen3next-tiny-F16.gguf
serve_start -m "$model"
curl -sf "127.0.0.1:$port/completion" -d "$body" >"$dir/plain.json" || fail "serve: a recurrent model"
kill $pid; wait $pid; pid=
serve_start -m "$model" -md "$model" -np 2
grep -q "speculative decoding draft-simple" "$dir/server.err" ||
  fail "serve: a recurrent model's ready line: $(cat "$dir/server.err")"
curl -sf "127.0.0.1:$port/completion" -d "$body" >"$dir/draft.json" &
curl -sf "127.0.0.1:$port/completion" -d "$body" >"$dir/draft2.json" ||
  fail "serve: a recurrent model with a draft model"
wait $! || fail "serve: a recurrent model with a draft model, the other request"
for f in draft draft2; do
  python3 - "$dir/plain.json" "$dir/$f.json" <<'EOF' || fail "serve, recurrent -md: $(cat "$dir/$f.json")"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["content"] == b["content"] and a["tokens_predicted"] == b["tokens_predicted"]
assert b["timings"]["draft_n_accepted"] > 0, b["timings"]
EOF
done
kill $pid; wait $pid; pid=
echo "ok: serve"

# refusals
for bad in "2 --spec-type ngram-mod" "2 --spec-type fast" "2 --spec-ngram-simple-size-n 0" \
           "2 --spec-default" "2 --spec-type draft-eagle3" "2 --spec-draft-n-max 31" \
           "2 -md $model -ngld 99" "2 --draft-max 8" "1 -md x.gguf" "1 --spec-type draft-simple" \
           "1 -md tests/data/mixtral-tiny-Q4_K_M.gguf"; do
  read -r -a a <<<"$bad"
  "$cli" run -m "$model" -p hi "${a[@]:1}" >/dev/null 2>"$dir/err"
  rc=$?
  [ "$rc" = "${a[0]}" ] && [ "$(wc -l <"$dir/err")" = 1 ] || fail "run $bad: exit $rc, $(cat "$dir/err")"
done
timeout 60 "$cli" serve --port 0 -t 2 -m "$model" -md tests/data/mixtral-tiny-Q4_K_M.gguf \
  2>"$dir/err"
rc=$?
[ "$rc" = 1 ] && grep -q "draft model .*vocabulary" "$dir/err" ||
  fail "serve with a draft model of another vocabulary: exit $rc, $(cat "$dir/err")"
echo "ok: refusals"
