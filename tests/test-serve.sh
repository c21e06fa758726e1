#!/bin/bash
# test-serve.sh: `faultline serve` from outside, with clients no one here
# wrote — the official `openai` npm package (pinned, installed into the
# build folder once) and curl — against a server on 127.0.0.1 on a
# tests/data model:
#   - /health, /v1/models, /metrics, /tokenize, /detokenize;
#   - chat and completions, plain and streamed (SSE ending in [DONE]);
#     streamed text = plain text; 16 concurrent clients each get the text
#     they get alone (batch invariance through the server);
#   - every error with its status: malformed JSON and wrong types (400),
#     fields asking for what is not generated (JSON schemas, legacy
#     functions, tools on /v1/completions: 400);
#   - tool calls (the openai client; tests/serve-tools.py): prompts with
#     tools, calls, results and reasoning equal to the model family's own
#     chat template's (jinja2: Qwen3's on a qwen3moe model, GLM-4.6's on a
#     glm4moe one); a named or "required" tool_choice answers with a
#     well-formed call, plain and streamed;
#   - logprobs (chat and completions, plain and streamed, a stop string
#     cutting tokens off): an entry per token, the streamed ones = the plain
#     ones (tests/serve-logprobs.py); logit_bias lifting and banning tokens;
#     several choices ("n"): choice c = the answer with seed + c, plain and
#     streamed (tests/serve-choices.py); a thinking model's reasoning_content
#     (tests/serve-reasoning.py); GBNF grammars (tests/serve-grammar.py);
#     JSON mode (response_format json_object) ending on the object's close;
#     JSON schemas (llama-server's json_schema; the client's json_schema
#     response_format) whose answers validate, and 400s naming the keyword;
#     the prompt cache: a chat's second turn reads the first's whole chunks
#     and answers as with "cache_prompt": false (tests/serve-cache.py), on
#     qwen3moe and on a recurrent model (qwen35moe: whole entries with state);
#   - llama-server's own /completion (/completions): its fields, plain and
#     streamed (no [DONE]), n_probs, return_tokens, stop types, several and
#     mixed prompts, n_predict 0 warming the cache, samplers; /props and
#     /tokenize's parse_special and with_pieces (tests/serve-native.py);
#   - /infill's fill-in-the-middle prompts on a model generated with
#     StarCoder's vocabulary (tests/serve-infill.py), 501 without FIM tokens;
#   - Anthropic's /v1/messages with the official @anthropic-ai/sdk (pinned):
#     plain and streamed messages, stop sequences, forced tool_use, tool
#     results, count_tokens, its error shapes (tests/serve-anthropic.js);
#   - OpenAI's /v1/responses with the openai client's responses API: plain
#     and streamed, a forced function call, function_call(_output) items,
#     a json_schema format, 400s (tests/serve-responses.js);
#   - the Vercel AI SDK (ai, @ai-sdk/openai, @ai-sdk/anthropic; pinned)
#     through the Responses API, chat completions and messages: the same
#     text and call plain, streamed and across the three (tests/serve-aisdk.js);
#   - streamed calls through the three APIs with clients leaving early
#     (tests/serve-tool-streams.py);
#   - a prompt longer than the context (400), a body over the limit (413,
#     also 100 MB), a missing or wrong key (401), an unknown path (404), a
#     wrong method (405), a full queue (503 + Retry-After);
#   - a stream abandoned mid-way frees its sequence and cells;
#   - hostile clients: 200 idle connections held open, headers sent a byte
#     a second, while others are answered; a soak of 2,000 requests from 16
#     clients with streams abandoned every 7th: RSS flat, no descriptor
#     leak (counted before and after);
#   - SIGTERM with a request in flight: the request completes, exit 0.
# usage: test-serve.sh FAULTLINE BUILD_DIR   (exit 77: no node/npm/curl/python3)
set -u
cli=$1
build=$2
model=tests/data/qwen3moe-tiny-Q8_0.gguf
key=test-key-123
dir=$(mktemp -d /tmp/test-serve.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/server.err" ] && tail -5 "$dir/server.err"; exit 1; }
for t in node npm curl python3; do
  command -v $t >/dev/null || { echo "no $t: skipped"; exit 77; }
done

# the openai package, pinned, once per build folder
node_dir=$build/node-openai
if [ ! -f "$node_dir/node_modules/openai/package.json" ]; then
  mkdir -p "$node_dir"
  (cd "$node_dir" && npm install --no-audit --no-fund --silent openai@4.104.0 >/dev/null 2>&1) ||
    { echo "npm install openai@4.104.0 failed (no registry?): skipped"; exit 77; }
fi
# and Anthropic's, for /v1/messages
anth_dir=$build/node-anthropic
if [ ! -f "$anth_dir/node_modules/@anthropic-ai/sdk/package.json" ]; then
  mkdir -p "$anth_dir"
  (cd "$anth_dir" && npm install --no-audit --no-fund --silent @anthropic-ai/sdk@0.71.2 >/dev/null 2>&1) ||
    { echo "npm install @anthropic-ai/sdk@0.71.2 failed (no registry?): skipped"; exit 77; }
fi
ai_dir=$build/node-aisdk
ai_pkgs="ai@6.0.333 @ai-sdk/openai@3.0.141 @ai-sdk/anthropic@3.0.140 zod@4.6.7"
if [ ! -f "$ai_dir/node_modules/ai/package.json" ]; then
  mkdir -p "$ai_dir"
  (cd "$ai_dir" && npm install --no-audit --no-fund --silent $ai_pkgs >/dev/null 2>&1) ||
    { echo "npm install $ai_pkgs failed (no registry?): skipped"; exit 77; }
fi
export NODE_PATH=$node_dir/node_modules:$anth_dir/node_modules:$ai_dir/node_modules
# a sanitizer build holds freed memory back (quarantine): keep that small for the RSS check
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16
client() { local mode=$1; shift; node tests/serve-client.js "$mode" "$base" "$key" "$@"; }

. tests/lib-serve.sh
start() { # ARGS...: a server on a free port; sets pid, base
  serve_start -m $model --api-key $key "$@"
  base=http://127.0.0.1:$port/v1
}
code() { # the key unless the arguments bring their own
  case "$*" in *Authorization*) curl -s -o "$dir/body" -w '%{http_code}' "$@" ;;
  *) curl -s -o "$dir/body" -w '%{http_code}' -H "Authorization: Bearer $key" "$@" ;; esac
}
want() { # CODE CURL-ARGS...: the status and an OpenAI error object for non-200
  local w=$1; shift
  local got; got=$(code "$@")
  [ "$got" = "$w" ] || fail "curl $*: status $got, want $w ($(head -c 300 "$dir/body"))"
  if [ "$w" != 200 ]; then
    python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["message"] and e["type"]' \
      "$dir/body" || fail "curl $*: not an OpenAI error: $(head -c 300 "$dir/body")"
  fi
}
fds() { ls /proc/$pid/fd | wc -l; }
rss() { awk '/VmRSS/ {print $2}' /proc/$pid/status; }
# the lowest of a few samples: connection threads of a soak that just ended
# are still exiting (under ASan, with a loaded machine, for a second or two)
rss_settled() {
  m=$(rss)
  for _ in 1 2 3 4 5 6; do sleep 0.5; r=$(rss); [ "$r" -lt "$m" ] && m=$r; done
  echo "$m"
}
metric() { curl -s -H "Authorization: Bearer $key" "$base/../metrics" | awk -v m="faultline_$1" '$1 == m {print $2}'; }

J='-H Content-Type:application/json'
# a full queue (its own server): 4 sequences + 6 waiting; 24 long requests at once
start -np 4 -c 512 --max-queue 6 --no-slots --no-prefill-assistant
want 501 "$base/../slots"  # --no-slots: llama-server's answer
# --no-prefill-assistant: a last assistant message closed as any other (as Qwen3's template
# writes it), a new turn opened
p=$(curl -s -H "Authorization: Bearer $key" $J -d '{"messages": [{"role": "user", "content": "Hi"},
  {"role": "assistant", "content": "Hel"}]}' "$base/../apply-template")
[ "$p" = '{"prompt":"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHel<|im_end|>\n<|im_start|>assistant\n"}' ] ||
  fail "--no-prefill-assistant: $p"
curls=
for i in $(seq 24); do
  curl -s -o /dev/null -D "$dir/h$i" -H "Authorization: Bearer $key" $J \
    -d '{"prompt": "Go", "max_tokens": 120, "ignore_eos": true}' "$base/completions" &
  curls="$curls $!"
done
wait $curls
n503=$(grep -l '^HTTP/1.1 503' "$dir"/h* | wc -l)
n200=$(grep -l '^HTTP/1.1 200' "$dir"/h* | wc -l)
[ "$n503" -ge 1 ] && [ $((n503 + n200)) -eq 24 ] || fail "queue full: $n200 x 200, $n503 x 503 of 24"
grep -l '^HTTP/1.1 503' "$dir"/h* | head -1 | xargs grep -qi '^Retry-After:' || fail "503 without Retry-After"
echo "queue full: $n503 of 24 got 503 with Retry-After, $n200 got 200"
# the limit counts requests: one request's 20 prompts (more than --max-queue) are answered
want 200 $J -d "{\"prompt\": [$(seq -s, -f '"p %g"' 20)], \"max_tokens\": 2}" "$base/completions"
python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1]))["choices"]) == 20' "$dir/body" ||
  fail "20 prompts in one request past --max-queue 6: $(head -c 300 "$dir/body")"

kill -9 $pid; wait $pid 2>/dev/null; pid=

# a stream silent longer than --timeout (waiting for the only sequence) is kept
# alive: SSE comments (Anthropic's ping events), which the clients skip; before,
# the connection timeout cut it
start -np 1 -c 16384 --timeout 1
long_n=15000 # the request ahead: longer than the wait at any speed; abandoned after 2.5 s
client queued $long_n || fail "a queued stream past --timeout"
curl -s -o /dev/null -H "Authorization: Bearer $key" $J \
  -d '{"prompt": "Go", "max_tokens": '$long_n', "ignore_eos": true}' "$base/completions" &
long=$!
sleep 0.5
curl -sN -H "Authorization: Bearer $key" $J -d '{"model": "m", "max_tokens": 4, "stream": true,
  "messages": [{"role": "user", "content": "Hi"}]}' "${base%/v1}/v1/messages" >"$dir/pings" &
quiet=$!
sleep 2.5
kill $long 2>/dev/null; wait $long 2>/dev/null; wait $quiet
grep -q '^event: ping$' "$dir/pings" && grep -q '"type":"message_stop"' "$dir/pings" ||
  fail "a queued Anthropic stream: no ping, or cut: $(head -c 300 "$dir/pings")"
curl -sN -H "Authorization: Bearer $key" $J -d '{"prompt": "Go", "max_tokens": '$long_n',
  "ignore_eos": true, "stream": true}' "$base/completions" >/dev/null &
long=$!
sleep 0.5
curl -sN -H "Authorization: Bearer $key" $J -d '{"prompt": "Hi", "max_tokens": 4,
  "stream": true}' "$base/completions" >"$dir/quiet" &
quiet=$!
sleep 2.5
kill $long 2>/dev/null; wait $long 2>/dev/null; wait $quiet
grep -q '^: keep-alive$' "$dir/quiet" && grep -q '^data: \[DONE\]$' "$dir/quiet" ||
  fail "a queued stream: no keep-alive, or cut: $(head -c 300 "$dir/quiet")"
echo "queued streams past --timeout: $(grep -c keep-alive "$dir/quiet") keep-alives, $(grep -c "^event: ping$" "$dir/pings") pings, ended whole"
kill -9 $pid; wait $pid 2>/dev/null; pid=

# the prompt cache (its own server: cached prefixes hold cells the checks
# below count as free): chunks of 64, a chat's second turn
start -np 2 -c 1024 -b 64
python3 "$(dirname "$0")/serve-cache.py" "$base" "$key" 64 || fail "prompt cache"
# llama-server's own /completion, /props, /tokenize's fields (tests/serve-native.py)
python3 "$(dirname "$0")/serve-native.py" "$base" "$key" 64 || fail "llama-server's /completion"
# Anthropic's Messages API with Anthropic's client (tests/serve-anthropic.js)
node tests/serve-anthropic.js "${base%/v1}" "$key" || fail "anthropic client"
client grow || fail "openai client: a call streamed as it grows"
# OpenAI's Responses API with the openai client (tests/serve-responses.js)
node tests/serve-responses.js "$base" "$key" || fail "openai client: responses"
# the Vercel AI SDK through the Responses API, chat completions and messages (tests/serve-aisdk.js)
node tests/serve-aisdk.js "${base%/v1}" "$key" || fail "ai sdk"
# streamed calls through the three APIs, clients leaving early (tests/serve-tool-streams.py)
python3 "$(dirname "$0")/serve-tool-streams.py" "$base" "$key" 40 || fail "tool streams"
# /infill on a model without fill-in-the-middle tokens: llama-server's 501
want 501 $J -d '{"input_prefix": "a", "input_suffix": "b"}' "$base/../infill"
grep -q 'not_supported_error' "$dir/body" || fail "/infill 501: $(cat "$dir/body")"
want 400 $J -d '{"prompt": "a", "suffix": "b"}' "$base/completions"
grep -q 'suffix: this model has no fill-in-the-middle' "$dir/body" || fail "suffix 400: $(cat "$dir/body")"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# /infill (tests/serve-infill.py) on a model generated with StarCoder's vocabulary
"$cli" gen --arch qwen3moe --vocab tests/data/vocab/ggml-vocab-starcoder.gguf -q --n-embd 64 \
  --layers 2 --experts 4 --top-k 2 --expert-ff 64 --ff 64 --heads 2 --heads-kv 1 --head-dim 32 \
  -o "$dir/fim.gguf" || fail "gen --vocab"
model=$dir/fim.gguf start -np 2 -c 4096 -b 64
python3 "$(dirname "$0")/serve-infill.py" "$base" "$key" 64 || fail "/infill"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# a recurrent model's prompt cache: entries hold the state at their end, read whole
model=tests/data/qwen35moe-tiny-Q8_0.gguf start -np 2 -c 1024 -b 64
python3 "$(dirname "$0")/serve-cache.py" "$base" "$key" 64 || fail "prompt cache (qwen35moe)"
kill -9 $pid; wait $pid 2>/dev/null; pid=

# --grammar (llama-server's flag): the grammar of requests that bring no format, schema,
# grammar or tools of their own; one the model's vocabulary cannot hold stops the start
start -np 2 -c 512 --grammar 'root ::= ("yes" | "no") "!"'
python3 - "$base" "$key" "$(dirname "$0")" <<'EOF' || fail "--grammar: the requests' default"
import re, sys
sys.path.insert(0, sys.argv[3])
from serve_client import Server
srv = Server(sys.argv[1], sys.argv[2])
for path, body, rx in (
        ("/v1/completions", {"prompt": "Q:"}, r"(yes|no)!"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Q"}]}, r"(yes|no)!"),
        ("/v1/completions", {"prompt": "Q:", "grammar": "root ::= [0-9]{3}"}, r"[0-9]{3}"),
        ("/v1/completions", {"prompt": "Q:", "response_format": {"type": "json_object"},
                             "max_tokens": 64}, r"\{.*")):
    c = srv.post(path, dict(body, temperature=1.0, seed=4, max_tokens=body.get("max_tokens", 16)))["choices"][0]
    text = c["message"]["content"] if "message" in c else c["text"]
    assert re.fullmatch(rx, text, re.S), (body, text)
    print("--grammar default: %s -> %r" % (list(body)[1:] or ["none"], text))
EOF
kill -9 $pid; wait $pid 2>/dev/null; pid=
"$cli" serve -m $model --port 0 -t 2 --grammar 'root ::= <[99999999]>' 2>"$dir/err"
[ $? = 1 ] && grep -q "a token id outside the vocabulary" "$dir/err" ||
  fail "--grammar the vocabulary cannot hold: $(tail -2 "$dir/err")"
"$cli" serve -m $model --port 0 --grammar 'root ::= "a"' -j '{}' 2>"$dir/err"
[ $? = 2 ] || fail "--grammar with -j: $(cat "$dir/err")"

# llama-server's command line: keys from --api-key-file (one a line) beside --api-key's, a
# --chat-template-file's format, switches that hold here already taken with a note, those
# that cannot be honoured refused with exit 2
printf 'file-key-1\n\n  \nfile-key-2\n' >"$dir/keys"
start -np 2 -c 512 --api-key-file "$dir/keys" --chat-template-file tests/data/templates/GLM-4.6.jinja \
  -cb --metrics --cache-reuse 256 --threads-http 4 -kvu --no-webui -cram 2048 -ctxcp 4 -sps 0.5 \
  --swa-full --no-warmup -fit on -to 120 -nkvo -ctk q8_0 -ctv q8_0 --embeddings
for k in "$key" file-key-1 file-key-2; do
  [ "$(code -H "Authorization: Bearer $k" "$base/models")" = 200 ] || fail "--api-key-file: key $k refused"
done
[ "$(code -H "Authorization: Bearer file-key" "$base/models")" = 401 ] || fail "--api-key-file: a wrong key taken"
want 200 $J -d '{"messages": [{"role": "user", "content": "hi"}]}' "$base/../apply-template"
grep -q '\[gMASK\]<sop><|user|>' "$dir/body" || fail "--chat-template-file: not GLM's format: $(cat "$dir/body")"
for f in -cb --metrics --cache-reuse --threads-http -kvu -cram -ctxcp -sps --swa-full --no-warmup -fit \
         --embedding; do
  grep -q "faultline serve: $f: " "$dir/server.err" || fail "no note for $f: $(cat "$dir/server.err")"
done
kill -9 $pid; wait $pid 2>/dev/null; pid=
for bad in "--rope-scaling longrope" "-ngld 99" "--pooling rank" "-nocb" "--chat-template-file README.md" \
           "--api-key-file $dir/none" "--slot-save-path $dir/none" "--special" "-ctk bf16"; do
  # shellcheck disable=SC2086
  "$cli" serve -m $model --port 0 $bad 2>"$dir/err"
  [ $? = 2 ] && [ "$(wc -l <"$dir/err")" = 1 ] || fail "serve $bad: $(cat "$dir/err")"
done
echo "llama-server flags: --api-key-file, --chat-template-file, noted switches, refusals (exit 2)"
echo "--grammar: the default of requests without their own; 1 for one the model cannot hold, 2 with -j"

# GLM-4.5's chat format (its own server on the glm4moe model): prompts as
# GLM-4.6's template writes them, a named call (tests/serve-tools.py)
qwen=$model model=tests/data/glm4moe-tiny-Q8_0.gguf
start -np 2 -c 1024
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" GLM-4.6 || fail "GLM tool prompts"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# GLM-4.7's (the same model told so): its pairs without newlines, its <think> opening
start -np 2 -c 1024 --chat-template glm-4.7
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" GLM-4.7-Flash || fail "GLM-4.7 tool prompts"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# MiniMax-M2's (minimax-m2 model): prompts as its template writes them
model=tests/data/minimax-m2-tiny-Q8_0.gguf
start -np 2 -c 1024
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" MiniMax-M2 || fail "MiniMax tool prompts"
# its prompt opens <think>: reasoning_content, budgets, streams (tests/serve-reasoning.py)
python3 "$(dirname "$0")/serve-reasoning.py" "$base" "$key" || fail "reasoning"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# MiniMax-M3's (minimax-m3 model): prompts as its template writes them, its nested calls
model=tests/data/minimax-m3-tiny-F16.gguf
start -np 2 -c 4096 # (its system turn alone is ~800 of these byte tokens)
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" MiniMax-M3 || fail "MiniMax-M3 tool prompts"
# its nested calls streamed as they grow, through the three APIs
python3 "$(dirname "$0")/serve-tool-streams.py" "$base" "$key" 16 || fail "MiniMax-M3 tool streams"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# ... told thinking_mode "enabled": its prompt opens <mm:think> (tests/serve-reasoning.py)
start -np 2 -c 4096 --chat-template-kwargs '{"thinking_mode": "enabled"}'
python3 "$(dirname "$0")/serve-reasoning.py" "$base" "$key" minimax-m3 || fail "MiniMax-M3 reasoning"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# Kimi K3's (kimi-k3 model): prompts as its template writes them, results matched by id, its
# XTML calls streamed; its prompt opens its think part (tests/serve-reasoning.py)
model=tests/data/kimi-k3-tiny-F16.gguf
start -np 2 -c 4096
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" Kimi-K3 || fail "Kimi K3 tool prompts"
python3 "$(dirname "$0")/serve-tool-streams.py" "$base" "$key" 16 || fail "Kimi K3 tool streams"
python3 "$(dirname "$0")/serve-reasoning.py" "$base" "$key" kimi-k3 || fail "Kimi K3 reasoning"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# gpt-oss's (gpt-oss model): prompts as its own template writes them (tests/serve-harmony.py)
model=tests/data/gpt-oss-tiny-MXFP4.gguf
start -np 2 -c 1024
python3 "$(dirname "$0")/serve-harmony.py" "$base" "$key" || fail "gpt-oss prompts"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# Kimi K2's two templates (the deepseek2 model told so): prompts as they write them
model=tests/data/deepseek2-tiny-F16.gguf
for t in Instruct Thinking; do
  start -np 2 -c 1024 --chat-template "kimi-k2-$(echo $t | tr 'IT' 'it')"
  python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" Kimi-K2-$t || fail "Kimi K2 $t prompts"
  kill -9 $pid; wait $pid 2>/dev/null; pid=
done
# Qwen3.5's template (the qwen35moe model's format) and Qwen3-Coder's (the qwen3moe model
# told so): XML tool calls
model=tests/data/qwen35moe-tiny-Q8_0.gguf start -np 2 -c 1024
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" Qwen3.5-4B || fail "Qwen3.5 prompts"
kill -9 $pid; wait $pid 2>/dev/null; pid=
model=tests/data/qwen3moe-tiny-Q8_0.gguf start -np 2 -c 1024 --chat-template qwen3-coder
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" Qwen3-Coder || fail "Qwen3-Coder prompts"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# DeepSeek V3.1's template, as a V3.1 GGUF carries it (the deepseek2 model told so)
start -np 2 -c 1024 --chat-template deepseek-v3.1
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" DeepSeek-V3.1 || fail "DeepSeek V3.1 prompts"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# DeepSeek V3.2's (DSML calls), as its GGUFs carry it (the deepseek2 model told so)
start -np 2 -c 1024 --chat-template deepseek-v3.2
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" DeepSeek-V3.2 || fail "DeepSeek V3.2 prompts"
kill -9 $pid; wait $pid 2>/dev/null; pid=
# DeepSeek V3-0324's and R1's (```json calls), as their GGUFs carry them
for t in V3-0324 R1; do
  start -np 2 -c 1024 --chat-template "deepseek-$(echo $t | tr 'VR' 'vr')"
  python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" DeepSeek-$t || fail "DeepSeek $t prompts"
  kill -9 $pid; wait $pid 2>/dev/null; pid=
done
model=$qwen

start -np 4 -c 512 --max-body 1M --timeout ${SRV_TIMEOUT:-3} --drain 5
# --- endpoints and errors (curl) ---
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/../health")" = 200 ] || fail "/health without a key"
want 200 "$base/models"
want 401 -H "Authorization: Bearer nope" "$base/models"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/models")" = 401 ] || fail "no key: not 401"
want 404 "$base/nope"
want 405 "$base/completions"
want 400 $J -d '{"prompt": "x"' "$base/completions"
want 400 $J -d '{"prompt": "x", "max_tokens": "many"}' "$base/completions"
# a NUL in a string (an agent sends back what a model wrote): said as such
want 400 $J -d '{"prompt": "a\u0000b"}' "$base/completions"
grep -q 'a string holds .*u0000 (NUL characters are not supported)' "$dir/body" ||
  fail "a NUL in a string: $(head -c 300 "$dir/body")"
want 400 $J -d '{"messages": [{"content": "a"}]}' "$base/chat/completions"
# asked for what is not generated (legacy functions, llama.cpp's n_probs): refused, never ignored
want 400 $J -d '{"messages": [{"role": "user", "content": "a"}], "functions": [{"name": "f"}]}' \
  "$base/chat/completions"
grep -q 'legacy function calls are not supported' "$dir/body" || fail "functions: $(cat "$dir/body")"
want 400 $J -d '{"prompt": "a", "tools": [{"type": "function", "function": {"name": "f"}}]}' \
  "$base/completions"
want 400 $J -d '{"prompt": "x", "n_probs": 2}' "$base/completions"
python3 -c 'import json; print(json.dumps({"prompt": [1] * 600, "max_tokens": 4}))' >"$dir/long.json"
want 400 $J --data-binary @"$dir/long.json" "$base/completions"
grep -q context_length_exceeded "$dir/body" || fail "long prompt: $(cat "$dir/body")"
head -c 1100000 /dev/zero | tr '\0' a >"$dir/big"
want 413 $J --data-binary @"$dir/big" "$base/completions"
head -c 100000000 /dev/zero >"$dir/huge"
t0=$(date +%s)
want 413 $J --data-binary @"$dir/huge" "$base/completions"
[ $(( $(date +%s) - t0 )) -le 5 ] || fail "100 MB body: took over 5 s"
rm -f "$dir/huge"
want 200 $J -d '{"content": "Hello world"}' "$base/../tokenize"
ids=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tokens"]))' "$dir/body")
want 200 $J -d "{\"tokens\": $ids}" "$base/../detokenize"
grep -q '"content":"Hello world"' "$dir/body" || fail "detokenize: $(cat "$dir/body")"
want 400 $J -d '{"tokens": [99999999]}' "$base/../detokenize"
curl -sN -H "Authorization: Bearer $key" $J -d '{"prompt": "Hi", "max_tokens": 3, "stream": true}' \
  "$base/completions" >"$dir/sse"
tail -c 20 "$dir/sse" | grep -q 'data: \[DONE\]' || fail "stream does not end with [DONE]: $(cat "$dir/sse")"
echo "curl: endpoints, 400/401/404/405/413 (also 100 MB), tokenize round trip, SSE [DONE]"
python3 "$(dirname "$0")/serve-logprobs.py" "$base" "$key" || fail "logprobs"
# several choices per request ("n"): each the seed + c answer, plain and streamed
python3 "$(dirname "$0")/serve-choices.py" "$base" "$key" 4 || fail "choices (n)"
# GBNF grammars: answers Python's re reads as sentences, 400s naming where (tests/serve-grammar.py)
python3 "$(dirname "$0")/serve-grammar.py" "$base" "$key" || fail "grammar"
# logit_bias: a token lifted by 100 is every greedy pick; banned (false), never
for id in 300 301; do
  want 200 $J -d "{\"tokens\": [$id]}" "$base/../detokenize"
  cp "$dir/body" "$dir/piece$id"
done
bias_text() { # LOGIT_BIAS: the greedy 3-token completion's text, JSON-quoted
  want 200 $J -d "{\"prompt\": \"Hi\", \"max_tokens\": 3, \"temperature\": 0, \"logit_bias\": $1}" \
    "$base/completions"
  python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["choices"][0]["text"]))' "$dir/body"
}
thrice() { python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["content"] * 3))' "$1"; }
[ "$(bias_text '{"300": 100}')" = "$(thrice "$dir/piece300")" ] || fail "logit_bias +100 on 300"
[ "$(bias_text '[[300, false], [301, 100]]')" = "$(thrice "$dir/piece301")" ] ||
  fail "logit_bias: 300 banned, 301 lifted"
# llama.cpp's text entries: the text's tokens get the bias (token 300's piece is that token)
text300=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["content"]))' "$dir/piece300")
[ "$(bias_text "[[$text300, 100]]")" = "$(thrice "$dir/piece300")" ] || fail "logit_bias: a text lifted"
[ "$(bias_text "{$text300: 100}")" = "$(thrice "$dir/piece300")" ] || fail "logit_bias: a text key lifted"
want 400 $J -d '{"prompt": "Hi", "logit_bias": {"99999999": 1}}' "$base/completions"
echo "logit_bias: lifted and banned tokens, by id and by text; an id outside the vocabulary refused"
# JSON mode: with '}' lifted by 100 the answer is "{}" and ends there (without JSON mode the
# same bias gives "}}}}"); a JSON schema is refused
want 200 $J -d '{"content": "}"}' "$base/../tokenize"
close=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["tokens"]; assert len(t) == 1; print(t[0])' \
  "$dir/body") || fail "'}' is not one token"
for mode in json_object text; do
  want 200 $J -d "{\"messages\": [{\"role\": \"user\", \"content\": \"JSON\"}], \"max_tokens\": 8,
    \"logit_bias\": {\"$close\": 100}, \"response_format\": {\"type\": \"$mode\"}}" "$base/chat/completions"
  python3 - "$dir/body" $mode <<'EOF' || fail "JSON mode ($mode): $(cat "$dir/body")"
import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]
text = c["message"]["content"]
if sys.argv[2] == "json_object":
    assert c["finish_reason"] == "stop" and json.loads(text) == {}, text
else:
    assert text.startswith("}}"), text
EOF
done
want 400 $J -d '{"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_schema", "json_schema": {}}}' \
  "$base/chat/completions"
grep -q 'response_format.json_schema.schema' "$dir/body" || fail "no schema: $(cat "$dir/body")"
want 400 $J -d '{"prompt": "a", "json_schema": {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}}' \
  "$base/completions"
grep -q 'multipleOf.. is not supported (at /properties/n)' "$dir/body" || fail "multipleOf: $(cat "$dir/body")"
# llama-server's top-level json_schema on /v1/completions, checked by python3-jsonschema
schema='{"type": "object", "properties": {"id": {"type": "integer", "minimum": -5, "maximum": 99}, "kind": {"enum": ["a", "b", null]},
  "xs": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2}},
  "required": ["id", "xs"]}'
for seed in 1 2 3; do
  want 200 $J -d "{\"prompt\": \"JSON:\", \"max_tokens\": 480, \"temperature\": 1, \"seed\": $seed,
    \"json_schema\": $schema}" "$base/completions"
  python3 - "$dir/body" "$schema" <<'EOF' || fail "json_schema, seed $seed: $(cat "$dir/body")"
import json, sys, jsonschema
c = json.load(open(sys.argv[1]))["choices"][0]
assert c["finish_reason"] == "stop", c
jsonschema.validate(json.loads(c["text"]), json.loads(sys.argv[2]))
EOF
done
echo "JSON mode: a forced close makes {} and ends; json_schema answers validate (python3-jsonschema)"
# echo: the prompt's text and its tokens' logprobs (max_tokens 0: scoring, as lm-eval asks)
for n in 0 4; do
  want 200 $J -d "{\"prompt\": \"Once upon a time, there\", \"max_tokens\": $n, \"echo\": true,
    \"logprobs\": 2, \"temperature\": 0}" "$base/completions"
  python3 - "$dir/body" $n <<'EOF' || fail "echo, max_tokens $n: $(cat "$dir/body")"
import json, sys
o = json.load(open(sys.argv[1]))
c, n, u = o["choices"][0], int(sys.argv[2]), o["usage"]
lp = c["logprobs"]
assert c["text"].startswith("Once upon a time, there"), c["text"]
assert len(lp["tokens"]) == u["prompt_tokens"] + u["completion_tokens"], (lp, u)
assert u["completion_tokens"] == n and c["finish_reason"] == "length", (u, c["finish_reason"])
assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, lp
assert all(x <= 0 for x in lp["token_logprobs"][1:]), lp["token_logprobs"]
assert all(len(t) == 2 for t in lp["top_logprobs"][1:]), lp["top_logprobs"]
assert lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0, lp["text_offset"]
assert "".join(lp["tokens"]) == c["text"], (lp["tokens"], c["text"])
EOF
done
# echo streamed: the prompt's text in each choice's first chunk, then the answer: joined, the
# plain answer's text (two choices, seeded); with logprobs a 400
e='"prompt": "Once upon a time", "max_tokens": 5, "echo": true, "n": 2, "seed": 9, "temperature": 1'
want 200 $J -d "{$e}" "$base/completions"
cp "$dir/body" "$dir/echo-plain"
curl -s -H "Authorization: Bearer $key" $J -d "{$e, \"stream\": true}" "$base/completions" >"$dir/echo-sse"
python3 - "$dir/echo-plain" "$dir/echo-sse" <<'EOF' || fail "echo streamed: $(head -c 600 "$dir/echo-sse")"
import json, sys
plain = [c["text"] for c in json.load(open(sys.argv[1]))["choices"]]
parts, first = {}, {}
for l in open(sys.argv[2]):
    if l.startswith("data: {"):
        for c in json.loads(l[6:])["choices"]:
            first.setdefault(c["index"], c["text"])
            parts[c["index"]] = parts.get(c["index"], "") + c["text"]
assert [parts[i] for i in range(2)] == plain and all(first[i] == "Once upon a time" for i in range(2)), \
    (parts, plain, first)
EOF
want 400 $J -d '{"prompt": "x", "echo": true, "stream": true, "logprobs": 1}' "$base/completions"
echo "echo: the prompt and its logprobs before the answer; streamed, the prompt first; streamed with logprobs refused"
client schema || fail "openai client: schema"

# --- the official client ---
client basic || fail "openai client: basic"
want 200 $J -d '{"content": "}"}' "$base/../tokenize"
brace=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens"][0])' "$dir/body")
client tools "$brace" || fail "openai client: tools"
python3 "$(dirname "$0")/serve-tools.py" "$base" "$key" Qwen3 || fail "tool prompts"
client concurrent || fail "openai client: concurrent"
cancelled0=$(metric requests_cancelled_total)
client abandon || fail "openai client: abandon"
for _ in $(seq 50); do
  [ "$(metric kv_cells_used)" = 0 ] && [ "$(metric requests_cancelled_total)" -gt "$cancelled0" ] && break
  sleep 0.1
done
[ "$(metric kv_cells_used)" = 0 ] || fail "abandoned stream: $(metric kv_cells_used) cells still used"
[ "$(metric requests_cancelled_total)" -gt "$cancelled0" ] || fail "abandoned stream: not cancelled"
echo "abandoned stream: cancelled, its cells free at once"

# --- hostile clients and a soak ---
fd0=$(fds)
python3 - "$port" <<'EOF' &
import socket, sys, time
port = int(sys.argv[1])
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
slow = socket.create_connection(("127.0.0.1", port))
try:  # a byte a second (the server may close it: that is its right)
    for ch in b"GET /health HTTP/1.1\r\nHost: x\r\n":
        slow.send(bytes([ch]))
        time.sleep(1)
        if ch == ord("/"):
            break
except OSError:
    pass
time.sleep(2)
EOF
hostile=$!
sleep 1
client soak 200 16 || fail "soak (first 200)"
rss1=$(rss_settled)
client soak 1800 16 || fail "soak"
rss2=$(rss_settled)
wait $hostile
sleep 4 # --timeout 3: idle connections are closed
fd1=$(fds)
[ "$fd1" -le "$fd0" ] || fail "descriptors: $fd0 before, $fd1 after"
# 16 MiB; under ASan 32: its per-thread allocator caches stay at the most
# connection threads alive at once, which a loaded machine raises (measured:
# alone the RSS shrinks over the soak, beside a 2-thread test it grows 18 MiB,
# and the release build shrinks either way)
limit=16384
[ -n "${FL_SANITIZE:-}" ] && limit=32768
[ $((rss2 - rss1)) -le $limit ] || fail "RSS grew from $rss1 to $rss2 KiB over 1,800 requests"
metric requests_total >/dev/null
echo "200 idle connections + a byte-a-second client held while 2,000 requests ran: RSS $rss1 -> $rss2 KiB, descriptors $fd0 -> $fd1"

# --- SIGTERM with a request in flight ---
curl -s -o "$dir/last" -w '%{http_code}' -H "Authorization: Bearer $key" $J \
  -d '{"prompt": "Go", "max_tokens": 60, "ignore_eos": true}' "$base/completions" >"$dir/last.code" &
c=$!
sleep 0.3
kill -TERM $pid
wait $pid
rc=$?
pid=
wait $c
[ $rc -eq 0 ] || fail "SIGTERM: exit $rc"
[ "$(cat "$dir/last.code")" = 200 ] || fail "SIGTERM: the in-flight request got $(cat "$dir/last.code")"
grep -q '"completion_tokens":60' "$dir/last" || fail "SIGTERM: in-flight request cut: $(cat "$dir/last")"
echo "SIGTERM: the in-flight request finished (60 tokens), exit 0"
echo "test-serve: all checks passed"
