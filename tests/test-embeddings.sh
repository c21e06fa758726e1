#!/bin/bash
# test-embeddings.sh: embeddings against llama.cpp's own (tests/data/ref/embd),
# through `faultline batch` and `faultline serve`:
#   - every reference: /v1/embeddings lines with "embd_normalize": -1 (the
#     vector before scaling) under --pooling mean, cls and last; each vector
#     within 1e-2 of llama.cpp's (relative L2) and the median case within
#     1e-4; a control: the last token's vector against the mean reference is
#     much further (so the check can fail);
#   - a prompt cut into -b 3 chunks (the mean summed over them, cls from the
#     first, last from the last) within the same bounds;
#   - the same vectors, bit for bit, with -np 1 (alone) and -np 4 beside
#     completions, and with the experts paged (--disk-moe) and resident;
#   - scaling: the default (euclidean) gives unit vectors, equal to the
#     unscaled ones divided by their norm; "embd_normalize": 0 / 1 as
#     llama-server's rules; base64 the same floats;
#   - faultline embed (llama-embedding's command): its vectors against
#     llama.cpp's, its plain output (vectors, the cosine similarity matrix),
#     json+ and raw, refusals in one line;
#   - serve: /v1/embeddings with curl and the official openai client (its
#     default asks for base64), equal to the batch's; /embedding with
#     --pooling none gives every token's row (against llama.cpp's); errors
#     (400 with OpenAI's error object): pooling none at /v1/embeddings, an
#     empty list, an id outside the vocabulary, a wrong encoding_format, an
#     input longer than the context; a line refused in a batch.
# usage: test-embeddings.sh FAULTLINE BUILD_DIR   (exit 77: no python3)
set -u
cli=$1
build=$2
refs=tests/data/ref/embd
dir=$(mktemp -d /tmp/test-embd.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/server.err" ] && tail -5 "$dir/server.err"; exit 1; }
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }

# the prompts of the references, as /v1/embeddings lines (unscaled)
python3 - "$dir/in.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], 'w') as f:
    for p in ('p1', 'p2', 'p3'):
        text = open(f'tests/data/ref/kv/{p}.txt').read()
        f.write(json.dumps({"custom_id": p, "url": "/v1/embeddings",
                            "body": {"input": text, "embd_normalize": -1}}) + "\n")
EOF
batch() { # OUT ARGS...
  local out=$1; shift
  rm -f "$out"
  "$cli" batch -q -t 2 -o "$out" "$@" 2>"$dir/batch.err" || { cat "$dir/batch.err"; fail "batch $*"; }
}

# --- every reference ----------------------------------------------------------
: > "$dir/cases"
for ref in "$refs"/*.p1.mean.f32; do
  model=$(basename "$ref" .p1.mean.f32)
  for pool in mean cls last; do
    batch "$dir/$model.$pool.jsonl" -m "tests/data/$model.gguf" -i "$dir/in.jsonl" -np 2 --pooling $pool
    echo "$model $pool $dir/$model.$pool.jsonl" >> "$dir/cases"
  done
done
# the same prompts in chunks of 3 tokens (-b 3) on two models
for model in qwen3moe-tiny-Q8_0 qwen35moe-tiny-F16; do
  for pool in mean cls last; do
    batch "$dir/$model.$pool.b3.jsonl" -m "tests/data/$model.gguf" -i "$dir/in.jsonl" -b 3 --pooling $pool
    echo "$model $pool $dir/$model.$pool.b3.jsonl" >> "$dir/cases"
  done
done
python3 - "$refs" "$dir/cases" <<'EOF' || fail "embeddings differ from llama.cpp's"
import json, math, struct, sys
refs, cases = sys.argv[1], sys.argv[2]
def vec(path):
    b = open(path, 'rb').read()
    return struct.unpack('<%df' % (len(b) // 4), b)
def rel(a, b):
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b))) / math.sqrt(sum(y * y for y in b))
errs, ctrl, bad = [], [], 0
for line in open(cases):
    model, pool, out = line.split()
    got = {}
    for l in open(out):
        o = json.loads(l)
        if not o.get('response'):
            print(f'{model} {pool} {o["custom_id"]}: {o.get("error")}'); bad += 1; continue
        got[o['custom_id']] = o['response']['body']['data'][0]['embedding']
    for p in ('p1', 'p2', 'p3'):
        want = vec(f'{refs}/{model}.{p}.{pool}.f32')
        a = got.get(p)
        if a is None or len(a) != len(want):
            print(f'{model} {pool} {p}: {0 if a is None else len(a)} values, want {len(want)}'); bad += 1; continue
        e = rel(a, want)
        errs.append(e)
        if e > 1e-2:
            print(f'{model} {pool} {p}: relative L2 {e:.3e} > 1e-2'); bad += 1
        if pool == 'last':
            ctrl.append(rel(a, vec(f'{refs}/{model}.{p}.mean.f32')))
errs.sort(); ctrl.sort()
med, cmed = errs[len(errs) // 2], ctrl[len(ctrl) // 2]
print(f'  {len(errs)} vectors: relative L2 to llama.cpp median {med:.2e}, max {errs[-1]:.2e}; '
      f'control (last vs the mean reference) median {cmed:.2e}')
if med > 1e-4:
    print('the median is over 1e-4'); bad += 1
if cmed < 1e-1:
    print('the control is not far off: the check could not fail'); bad += 1
sys.exit(1 if bad else 0)
EOF

# --- alone = beside others = paged -----------------------------------------------
python3 - "$dir/mix.jsonl" <<'EOF'
import json, sys
lines = []
texts = [open(f'tests/data/ref/kv/{p}.txt').read() for p in ('p1', 'p2', 'p3')]
for i in range(12):
    if i % 3 == 2:
        lines.append({"custom_id": f"c{i}", "url": "/v1/completions",
                      "body": {"prompt": texts[i % 3], "max_tokens": 6, "temperature": 0}})
    else:
        lines.append({"custom_id": f"e{i}", "url": "/v1/embeddings",
                      "body": {"input": [texts[i % 3], texts[(i + 1) % 3] * 3, [1, 2, 3, 4]]}})
with open(sys.argv[1], 'w') as f:
    for l in lines:
        f.write(json.dumps(l) + "\n")
EOF
for model in qwen3moe-tiny-Q8_0 gpt-oss-tiny-MXFP4 deepseek2-tiny-F16 qwen35moe-tiny-F16; do
  m=tests/data/$model.gguf
  batch "$dir/alone.jsonl" -m $m -i "$dir/mix.jsonl" -np 1 -b 8 --pooling mean
  batch "$dir/four.jsonl" -m $m -i "$dir/mix.jsonl" -np 4 -b 8 --pooling mean
  batch "$dir/paged.jsonl" -m $m -i "$dir/mix.jsonl" -np 4 -b 8 --pooling mean --disk-moe --ram-budget 1M \
    --stats-json "$dir/stats.json"
  python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["totals"]["loads"] > 0' "$dir/stats.json" ||
    fail "$model: --disk-moe did not page"
  python3 - "$dir/alone.jsonl" "$dir/four.jsonl" "$dir/paged.jsonl" <<'EOF' || fail "$model: embeddings depend on their neighbours or on paging"
import json, sys
def load(p):
    out = {}
    for l in open(p):
        o = json.loads(l)
        assert o['response'], o
        body = o['response']['body']
        out[o['custom_id']] = body['data'] if 'data' in body else body['choices'][0]['text']
    return out
a, b, c = (load(p) for p in sys.argv[1:4])
assert a.keys() == b.keys() == c.keys() and len(a) == 12, (a.keys(), b.keys())
for k in a:
    assert a[k] == b[k] == c[k], f'{k} differs'
EOF
  echo "  $model: 8 embedding and 4 completion lines the same with -np 1, -np 4 and paged"
done

# --- scaling and base64 ---------------------------------------------------------
m=tests/data/qwen3moe-tiny-Q8_0.gguf
python3 - "$dir/norm.jsonl" <<'EOF'
import json, sys
t = open('tests/data/ref/kv/p2.txt').read()
with open(sys.argv[1], 'w') as f:
    for cid, extra in (('raw', {"embd_normalize": -1}), ('l2', {}), ('max', {"embd_normalize": 0}),
                       ('taxi', {"embd_normalize": 1}), ('b64', {"encoding_format": "base64"})):
        f.write(json.dumps({"custom_id": cid, "url": "/v1/embeddings",
                            "body": dict({"input": t}, **extra)}) + "\n")
    f.write(json.dumps({"custom_id": "bad", "url": "/v1/embeddings", "body": {"input": [[]]}}) + "\n")
EOF
batch "$dir/norm.out" -m $m -i "$dir/norm.jsonl" --pooling last
python3 - "$dir/norm.out" <<'EOF' || fail "embd_normalize / base64"
import base64, json, math, struct, sys
r = {}
for l in open(sys.argv[1]):
    o = json.loads(l)
    r[o['custom_id']] = o
assert r['bad']['error'] and 'input[0]' in r['bad']['error']['message'], r['bad']
v = {k: r[k]['response']['body']['data'][0]['embedding'] for k in ('raw', 'l2', 'max', 'taxi', 'b64')}
raw = v['raw']
f32 = lambda x: struct.unpack('<f', struct.pack('<f', x))[0]
def close(a, b, what):
    assert len(a) == len(b) and all(abs(x - y) <= 1e-6 * max(1.0, abs(y)) for x, y in zip(a, b)), what
norm = math.sqrt(sum(x * x for x in raw))
close(v['l2'], [f32(x * f32(1 / norm)) for x in raw], 'euclidean')
assert abs(math.sqrt(sum(x * x for x in v['l2'])) - 1) < 1e-5, 'not a unit vector'
close(v['max'], [x * (32760 / max(abs(y) for y in raw)) for x in raw], 'max absolute')
close(v['taxi'], [x / sum(abs(y) for y in raw) for x in raw], 'taxicab')
b = base64.b64decode(v['b64'])
assert list(struct.unpack('<%df' % (len(b) // 4), b)) == [f32(x) for x in v['l2']], 'base64 is not the floats'
EOF

# --- faultline embed (llama-embedding's command) -------------------------------------
for model in qwen3moe-tiny-Q8_0 mixtral-tiny-Q4_K_M; do
  for pool in mean last; do
    "$cli" embed -m tests/data/$model.gguf -f tests/data/ref/kv/p2.txt --embd-separator '<no cut>' \
      --pooling $pool --embd-normalize -1 --embd-output-format array -t 2 >"$dir/embed.out" \
      2>"$dir/embed.err" || fail "embed $model $pool: $(cat "$dir/embed.err")"
    python3 - "$dir/embed.out" "$refs/$model.p2.$pool.f32" <<'EOF' || fail "embed $model $pool: not llama.cpp's vector"
import json, math, struct, sys
a = json.load(open(sys.argv[1]))
b = open(sys.argv[2], 'rb').read()
ref = struct.unpack('<%df' % (len(b) // 4), b)
assert len(a) == 1 and len(a[0]) == len(ref), (len(a), len(a[0]), len(ref))
e = math.sqrt(sum((x - y) ** 2 for x, y in zip(a[0], ref))) / math.sqrt(sum(y * y for y in ref))
assert e < 1e-2, e
EOF
  done
done
m=tests/data/qwen3moe-tiny-Q8_0.gguf
"$cli" embed -m $m -p 'Hello world\nThe cat sat\nGoodbye' -t 2 >"$dir/embed.out" 2>/dev/null ||
  fail "embed: three prompts"
python3 - "$dir/embed.out" <<'EOF' || fail "embed: llama-embedding's plain output"
import sys
lines = open(sys.argv[1]).read().split('\n')
emb = [l for l in lines if l.startswith('embedding ')]
assert len(emb) == 3 and all(len(l.split(':')[1].split()) == 16 for l in emb), emb
i = lines.index('cosine similarity matrix:')
rows = [l.split() for l in lines[i + 3:i + 6]]
assert all(float(r[k]) == 1.0 for k, r in enumerate(rows)), rows
assert all(-1 <= float(x) <= 1 for r in rows for x in r[:3]), rows
EOF
"$cli" embed -m $m -p 'one;two' --embd-separator ';' --embd-output-format json+ -t 2 >"$dir/embed.out" 2>/dev/null ||
  fail "embed: json+"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["data"]) == 2 and len(d["data"][1]["embedding"]) == 128 and len(d["cosineSimilarity"]) == 2' \
  "$dir/embed.out" || fail "embed: json+ is not llama-embedding's document"
"$cli" embed -m $m -p 'Hi there' --pooling none --embd-output-format raw -t 2 >"$dir/embed.out" 2>/dev/null ||
  fail "embed: raw"
[ "$(wc -l <"$dir/embed.out")" -ge 2 ] && [ "$(head -1 "$dir/embed.out" | wc -w)" = 128 ] ||
  fail "embed --pooling none raw: a line of 128 values per token: $(head -c 200 "$dir/embed.out")"
for bad in "-p x --embd-output-format yaml" "--pooling rank -p x" "-f $dir/missing"; do
  # shellcheck disable=SC2086
  "$cli" embed -m $m $bad >/dev/null 2>"$dir/embed.err"
  rc=$?
  [ $rc -ne 0 ] && [ "$(wc -l <"$dir/embed.err")" = 1 ] || fail "embed $bad: exit $rc, $(cat "$dir/embed.err")"
done
echo "  faultline embed: llama.cpp's vectors, llama-embedding's plain, json+ and raw outputs, refusals"

# --- the server -------------------------------------------------------------------
. tests/lib-serve.sh
start() { # ARGS...: a server on a free port; sets pid, base
  serve_start -m $m "$@"
  base=http://127.0.0.1:$port
}
stop() { kill $pid; wait $pid 2>/dev/null; pid=; }
want() { # CODE PATH BODY
  local got
  got=$(curl -s -o "$dir/body" -w '%{http_code}' "$base$2" -d "$3")
  [ "$got" = "$1" ] || fail "$2 $3: status $got, want $1 ($(head -c 300 "$dir/body"))"
  [ "$1" = 200 ] || python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["message"] and e["type"]' \
    "$dir/body" || fail "$2 $3: not an OpenAI error: $(head -c 300 "$dir/body")"
}
command -v curl >/dev/null || { echo "no curl: the server part skipped"; exit 0; }
start --pooling last -c 64
p2=$(python3 -c 'import json; print(json.dumps(open("tests/data/ref/kv/p2.txt").read()))')
want 200 /v1/embeddings "{\"input\": $p2}"
python3 - "$dir/body" "$dir/norm.out" <<'EOF' || fail "/v1/embeddings differs from the batch's"
import json, sys
got = json.load(open(sys.argv[1]))
assert got['object'] == 'list' and got['data'][0]['object'] == 'embedding' and got['usage']['prompt_tokens'] > 0
for l in open(sys.argv[2]):
    o = json.loads(l)
    if o['custom_id'] == 'l2':
        assert got['data'][0]['embedding'] == o['response']['body']['data'][0]['embedding']
EOF
want 200 /v1/embeddings "{\"input\": $(python3 -c 'import json; print(json.dumps(["text %d" % i for i in range(150)]))')}"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; assert [x["index"] for x in d] == list(range(150))' \
  "$dir/body" || fail "150 inputs in one request (more than --max-queue): not 150 vectors in order"
want 400 /v1/embeddings '{"input": []}'
want 400 /v1/embeddings '{"input": [[5000]]}'
want 400 /v1/embeddings '{"input": "x", "encoding_format": "hex"}'
want 400 /v1/embeddings '{"model": "m"}'
want 400 /v1/embeddings "{\"input\": $(python3 -c 'print(list(range(1, 100)))')}"
want 200 /embedding '{"content": "hello there"}'
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[0]["index"] == 0 and len(r[0]["embedding"]) == 1' \
  "$dir/body" || fail "/embedding: llama-server's shape"
# the official client (its embeddings ask for base64 unless told)
if command -v node >/dev/null && [ -f "$build/node-openai/node_modules/openai/package.json" ]; then
  NODE_PATH=$build/node-openai/node_modules node - "$base/v1" "$dir/norm.out" <<'EOF' || fail "openai client: embeddings"
const OpenAI = require('openai');
const fs = require('fs');
const [baseURL, batchOut] = process.argv.slice(2);
const text = fs.readFileSync('tests/data/ref/kv/p2.txt', 'utf8');
const want = fs.readFileSync(batchOut, 'utf8').trim().split('\n').map(JSON.parse)
  .find(o => o.custom_id === 'l2').response.body.data[0].embedding;
(async () => {
  const c = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0 });
  const r = await c.embeddings.create({ model: 'm', input: [text, 'another'] });
  if (r.data.length !== 2 || r.data[0].embedding.length !== want.length) throw new Error('shape');
  r.data[0].embedding.forEach((x, i) => { if (Math.fround(x) !== Math.fround(want[i])) throw new Error('value ' + i); });
  const f = await c.embeddings.create({ model: 'm', input: text, encoding_format: 'float' });
  f.data[0].embedding.forEach((x, i) => { if (Math.fround(x) !== r.data[0].embedding[i]) throw new Error('float != base64 at ' + i); });
  console.log('  openai client: embeddings (base64 and float) equal to the batch\'s');
})().catch(e => { console.log('FAIL: ' + e.message); process.exit(1); });
EOF
else
  echo "  (no openai package in $build/node-openai: test-serve installs it; the client check skipped)"
fi
stop
start --pooling none
want 400 /v1/embeddings '{"input": "hello"}'
p1=$(python3 -c 'import json; print(json.dumps(open("tests/data/ref/kv/p1.txt").read()))')
want 200 /embedding "{\"content\": $p1}"
python3 - "$dir/body" "$refs/qwen3moe-tiny-Q8_0.p1.none.f32" <<'EOF' || fail "/embedding with --pooling none"
import json, math, struct, sys
rows = json.load(open(sys.argv[1]))[0]['embedding']
b = open(sys.argv[2], 'rb').read()
ref = struct.unpack('<%df' % (len(b) // 4), b)
n = len(ref) // 128
assert len(rows) == n, (len(rows), n)
for i, row in enumerate(rows):
    want = ref[i * 128:(i + 1) * 128]
    e = math.sqrt(sum((x - y) ** 2 for x, y in zip(row, want))) / math.sqrt(sum(y * y for y in want))
    assert e < 1e-2, (i, e)
EOF
stop
echo "test-embeddings: all checks passed"
