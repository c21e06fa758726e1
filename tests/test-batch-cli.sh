#!/bin/sh
# test-batch-cli.sh: `faultline batch` from outside, as a user runs it.
#   - a file of 120 requests (8 to 36 tokens each) (chat and completion, seeded sampling and
#     greedy, stop strings) plus malformed lines, a repeated custom_id and a
#     blank line runs to the end: one output line per input line, each valid
#     JSON, every custom_id exactly once, errors naming their line;
#   - the same file run again into a fresh output, killed with SIGKILL at
#     random moments and rerun until done: every custom_id still exactly
#     once, every line valid JSON, and the same texts as the run in one go
#     (batch invariance: a request's tokens do not depend on its neighbours);
#   - SIGINT: exit 130 and a line saying what was lost; the rerun finishes;
#   - requests sharing long instructions read them from the prompt cache
#     (-b 64) and answer as with --no-cache-prompt, logprobs too;
#   - a line with tools and a forced call answers with tool_calls;
#   - lines with a JSON schema answer with JSON python3-jsonschema accepts;
#     an echo line with max_tokens 0 scores its prompt;
#   - a thinking model's reasoning in reasoning_content, held to --reasoning-budget;
#   - a line with n = 3 answers with the seed, seed + 1 and seed + 2 answers; a line with a
#     list of prompts answers each;
#   - a rerun of a finished output does nothing; the output may not be the
#     model or the input; a missing input is a one-line error.
# usage: test-batch-cli.sh FAULTLINE
set -u
cli=$1
model=tests/data/qwen3moe-tiny-F16.gguf
dir=$(mktemp -d /tmp/test-batch-cli.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "no python3"; exit 77; }

python3 - "$dir/in.jsonl" <<'EOF'
import json, sys
lines = []
for i in range(120):
    if i % 3 == 0:
        body = {"messages": [{"role": "user", "content": f"Tell me about number {i}"}],
                "max_tokens": 16 + i % 17, "temperature": 0}
        url = "/v1/chat/completions"
    else:
        body = {"prompt": f"Story {i}: once upon a time", "max_tokens": 8 + i % 29,
                "seed": i, "temperature": 0.9, "top_k": 20}
        if i % 7 == 0:
            body["stop"] = ["e"]
        url = "/v1/completions"
    lines.append(json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": url, "body": body}))
lines.insert(10, "{not json")
lines.insert(20, "")
lines.insert(30, json.dumps({"custom_id": "req-5", "url": "/v1/completions", "body": {"prompt": "x"}}))
lines.insert(40, json.dumps({"custom_id": "bad-temp", "url": "/v1/completions",
                             "body": {"prompt": "x", "temperature": "hot"}}))
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
EOF

check() { # OUT: the output's properties; prints the texts by custom_id to OUT.texts
    python3 - "$dir/in.jsonl" "$1" <<'EOF' || exit 1
import json, sys
inp = [l for l in open(sys.argv[1]).read().split("\n")]
n_lines = sum(1 for l in inp if l.strip())
ids, texts, lines_answered = {}, {}, set()
raw = open(sys.argv[2], "rb").read()
assert raw.endswith(b"\n"), "the output does not end with a newline"
for k, l in enumerate(raw.decode().split("\n")[:-1]):
    o = json.loads(l)   # every line is JSON
    cid = o.get("custom_id")
    if cid is None:
        lines_answered.add(o["line"])
        assert o["error"]["message"].startswith("line %d:" % o["line"]), o
        continue
    assert cid not in ids, "custom_id %s twice (lines %d and %d)" % (cid, ids[cid], k + 1)
    ids[cid] = k + 1
    if o["error"] is None:
        b = o["response"]["body"]
        c = b["choices"][0]
        texts[cid] = c["message"]["content"] if "message" in c else c["text"]
        assert c["finish_reason"] in ("stop", "length"), c
        assert b["usage"]["completion_tokens"] <= 36, b["usage"]
    else:
        texts[cid] = "ERROR " + o["error"]["message"]
want = {"req-%d" % i for i in range(120)} | {"bad-temp"}
assert set(ids) == want, "missing %s, extra %s" % (want - set(ids), set(ids) - want)
assert len(ids) + len(lines_answered) == n_lines - 0, (len(ids), len(lines_answered), n_lines)
assert "temperature" in texts["bad-temp"], texts["bad-temp"]
json.dump(texts, open(sys.argv[2] + ".texts", "w"), sort_keys=True, indent=0)
EOF
}

# 1. in one go
"$cli" batch -m $model -i "$dir/in.jsonl" -o "$dir/once.jsonl" -np 4 -c 512 -t 2 -q \
    2>"$dir/once.log" || { cat "$dir/once.log"; fail "batch exited $?"; }
check "$dir/once.jsonl"
grep -q "requests done" "$dir/once.log" || fail "no summary line"
echo "one go: $(wc -l <"$dir/once.jsonl") output lines for $(grep -c . "$dir/in.jsonl") requests"

# 2. killed with SIGKILL as soon as it wrote something new, rerun until done
kills=0
touch "$dir/killed.jsonl"
for round in $(seq 1 200); do
    have=$(wc -l <"$dir/killed.jsonl")
    "$cli" batch -m $model -i "$dir/in.jsonl" -o "$dir/killed.jsonl" -np 4 -c 512 -t 1 -q \
        2>"$dir/killed.log" &
    pid=$!
    while kill -0 $pid 2>/dev/null && [ "$(wc -l <"$dir/killed.jsonl")" -le "$have" ]; do
        sleep 0.002
    done
    if kill -9 $pid 2>/dev/null; then
        kills=$((kills + 1))
        wait $pid 2>/dev/null
    else
        wait $pid || { cat "$dir/killed.log"; fail "a rerun exited $?"; }
        break
    fi
done
"$cli" batch -m $model -i "$dir/in.jsonl" -o "$dir/killed.jsonl" -np 4 -c 512 -t 2 -q \
    2>"$dir/killed.log" || { cat "$dir/killed.log"; fail "the last rerun exited $?"; }
check "$dir/killed.jsonl"
cmp -s "$dir/once.jsonl.texts" "$dir/killed.jsonl.texts" ||
    { diff "$dir/once.jsonl.texts" "$dir/killed.jsonl.texts" | head; fail "texts differ after kills"; }
[ $kills -ge 3 ] || fail "only $kills kills landed before the run ended"
echo "SIGKILL $kills times and rerun: every custom_id once, the same texts"

# 3. SIGINT: 130, a line about the requests lost; the rerun finishes
"$cli" batch -m $model -i "$dir/in.jsonl" -o "$dir/int.jsonl" -np 4 -c 512 -t 2 -q \
    2>"$dir/int.log" &
pid=$!
sleep 0.1
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
if [ $rc -ne 0 ]; then
    [ $rc -eq 130 ] || { cat "$dir/int.log"; fail "SIGINT: exit $rc, not 130"; }
    grep -q "interrupted" "$dir/int.log" || fail "SIGINT: no line saying so"
fi
"$cli" batch -m $model -i "$dir/in.jsonl" -o "$dir/int.jsonl" -np 2 -c 512 -t 2 -q \
    2>"$dir/int.log" || fail "rerun after SIGINT exited $?"
check "$dir/int.jsonl"
cmp -s "$dir/once.jsonl.texts" "$dir/int.jsonl.texts" || fail "texts differ after SIGINT (-np 2)"
echo "SIGINT: exit $rc; rerun with -np 2 gives the same texts"

# 4. a finished output: nothing to do; outputs that would clobber an input
before=$(md5sum <"$dir/once.jsonl")
"$cli" batch -m $model -i "$dir/in.jsonl" -o "$dir/once.jsonl" -q 2>"$dir/again.log" ||
    fail "rerun of a finished output exited $?"
[ "$(md5sum <"$dir/once.jsonl")" = "$before" ] || fail "a finished output changed"
grep -q "0 requests done.*done before" "$dir/again.log" || { cat "$dir/again.log"; fail "summary"; }
cp $model "$dir/m.gguf"
msum=$(md5sum <"$dir/m.gguf")
"$cli" batch -m "$dir/m.gguf" -i "$dir/in.jsonl" -o "$dir/m.gguf" 2>"$dir/e1.log" &&
    fail "the model accepted as the output"
[ "$(md5sum <"$dir/m.gguf")" = "$msum" ] || fail "the model was modified"
isum=$(md5sum <"$dir/in.jsonl")
"$cli" batch -m $model -i "$dir/in.jsonl" -o "$dir/in.jsonl" 2>"$dir/e2.log" &&
    fail "the input accepted as the output"
[ "$(md5sum <"$dir/in.jsonl")" = "$isum" ] || fail "the input was modified"
"$cli" batch -m $model -i "$dir/nope.jsonl" -o "$dir/x.jsonl" 2>"$dir/e3.log" &&
    fail "a missing input accepted"
for e in e1 e2 e3; do
    [ "$(wc -l <"$dir/$e.log")" -eq 1 ] || { cat "$dir/$e.log"; fail "$e: not one line"; }
done
echo "refused: model or input as output, missing input (one line each)"
# 5. shared instructions: the prompt cache reads their whole -b chunks, and
# the answers are the same bits as with --no-cache-prompt
python3 - "$dir/shared.jsonl" <<'EOF2'
import json, sys
rule = "Summarise the text below in one short sentence, plainly and without preamble. " * 6
with open(sys.argv[1], "w") as f:
    for i in range(24):
        body = {"prompt": rule + f"Text {i}: the river rose {i} feet overnight.",
                "max_tokens": 6, "logprobs": 2, "temperature": 0}
        f.write(json.dumps({"custom_id": f"s{i}", "url": "/v1/completions", "body": body}) + "\n")
EOF2
for c in --cache-prompt --no-cache-prompt; do
    "$cli" batch -m $model -i "$dir/shared.jsonl" -o "$dir/shared$c.jsonl" -np 4 -b 64 -t 2 -q $c \
        2>"$dir/shared.log" || { cat "$dir/shared.log"; fail "shared prompts ($c): exit $?"; }
    grep -o "([0-9]* of them from the prompt cache)" "$dir/shared.log" >"$dir/shared$c.n" ||
        { cat "$dir/shared.log"; fail "no prompt cache count in the summary"; }
done
python3 - "$dir/shared--cache-prompt.jsonl" "$dir/shared--no-cache-prompt.jsonl" <<'EOF2' ||
import json, sys
def answers(path):
    out = {}
    for l in open(path):
        o = json.loads(l)
        body = o["response"]["body"]
        out[o["custom_id"]] = (body["choices"], body["usage"]["prompt_tokens_details"]["cached_tokens"])
    return out
hit, miss = answers(sys.argv[1]), answers(sys.argv[2])
assert hit.keys() == miss.keys() and len(hit) == 24, (len(hit), len(miss))
for k in hit:
    assert hit[k][0] == miss[k][0], (k, hit[k][0], miss[k][0])
    assert miss[k][1] == 0 and hit[k][1] % 64 == 0, (k, hit[k][1], miss[k][1])
n = sum(v[1] for v in hit.values())
assert n >= 64 * 16, n
print(f"shared instructions: {n} prompt tokens read from the cache; answers = computed")
EOF2
    fail "prompt cache in batch"
grep -q "(0 of them" "$dir/shared--no-cache-prompt.n" && ! grep -q "(0 of them" "$dir/shared--cache-prompt.n" ||
    fail "summary counts: $(cat "$dir/shared--cache-prompt.n") / $(cat "$dir/shared--no-cache-prompt.n")"

# 6. tools: a named call's line answers with tool_calls (the token "}" lifted
# so that the tiny model's arguments close at once), a Responses API line with
# the function_call alone; an auto one, as text
brace=$("$cli" tokenize -m "$model" -p "}" --ids 2>/dev/null | tr -d '[] ')
[ -n "$brace" ] || fail "tokenize '}'"
cat >"$dir/tools.jsonl" <<EOF2
{"custom_id": "named", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Weather?"}], "tools": [{"type": "function", "function": {"name": "get_weather"}}], "tool_choice": "required", "logit_bias": {"$brace": 100}, "max_tokens": 8}}
{"custom_id": "auto", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Weather?"}], "tools": [{"type": "function", "function": {"name": "get_weather"}}], "max_tokens": 4}}
{"custom_id": "responses", "url": "/v1/responses", "body": {"input": "Weather?", "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}], "tool_choice": "required", "max_output_tokens": 8}}
EOF2
"$cli" batch -m "$model" -i "$dir/tools.jsonl" -o "$dir/tools.out" -q 2>"$dir/err" ||
    fail "tools: exit $? ($(tail -1 "$dir/err"))"
python3 - "$dir/tools.out" <<'EOF2' || fail "tools in batch"
import json, sys
lines = {o["custom_id"]: o["response"]["body"] for o in map(json.loads, open(sys.argv[1]))}
got = {k: v["choices"][0] for k, v in lines.items() if "choices" in v}
named, auto = got["named"], got["auto"]
# the Responses API's line (its schema allows only {}): the call alone, its text
# no message beside it
out = lines["responses"]["output"]
assert [o["type"] for o in out] == ["function_call"] and out[0]["name"] == "get_weather" and \
    out[0]["arguments"] == "{}", out
assert named["finish_reason"] == "tool_calls" and named["message"]["content"] is None, named
call = named["message"]["tool_calls"][0]
assert call["type"] == "function" and call["function"] == {"name": "get_weather", "arguments": "{}"}, call
assert auto["finish_reason"] == "length" and isinstance(auto["message"]["content"], str), auto
print("tools: the named call's line has tool_calls", json.dumps(named["message"]["tool_calls"]))
EOF2

# 7. structured outputs: lines with a JSON schema answer with JSON that python3-jsonschema
# (a validator not written here) accepts, at temperature 0 and seeded at 1; a schema with a
# keyword faultline cannot hold an answer to is an error line naming it, the rest go on
python3 - "$dir/schema.jsonl" <<'EOF2'
import json, sys
schema = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8}, "n": {"type": "integer"},
    "kind": {"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]},
    "xs": {"type": "array", "items": {"type": "number"}, "maxItems": 3}},
    "required": ["name", "n", "xs"], "additionalProperties": False}
with open(sys.argv[1], "w") as f:
    for i in range(6):
        body = {"messages": [{"role": "user", "content": f"Record {i} as JSON"}], "max_tokens": 300,
                "temperature": 0 if i < 2 else 1, "seed": i,
                "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}}
        f.write(json.dumps({"custom_id": f"s{i}", "url": "/v1/chat/completions", "body": body}) + "\n")
    bad = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}
    f.write(json.dumps({"custom_id": "bad", "url": "/v1/chat/completions", "body": {
        "messages": [{"role": "user", "content": "x"}], "response_format": {
            "type": "json_schema", "json_schema": {"name": "b", "schema": bad}}}}) + "\n")
    f.write(json.dumps({"custom_id": "echo", "url": "/v1/completions", "body": {
        "prompt": "Score this sentence.", "echo": True, "max_tokens": 0, "logprobs": 1}}) + "\n")
json.dump(schema, open(sys.argv[1] + ".schema", "w"))
EOF2
"$cli" batch -m "$model" -i "$dir/schema.jsonl" -o "$dir/schema.out" -q 2>"$dir/err" ||
    fail "schema: exit $? ($(tail -1 "$dir/err"))"
python3 - "$dir/schema.out" "$dir/schema.jsonl.schema" <<'EOF2' || fail "json_schema in batch"
import json, sys, jsonschema
schema = json.load(open(sys.argv[2]))
got = {o["custom_id"]: o for o in map(json.loads, open(sys.argv[1]))}
assert len(got) == 8, got.keys()
e = got["echo"]["response"]["body"]
assert e["choices"][0]["text"] == "Score this sentence.", e
assert len(e["choices"][0]["logprobs"]["token_logprobs"]) == e["usage"]["prompt_tokens"], e
assert got["bad"]["response"] is None and "multipleOf" in got["bad"]["error"]["message"], got["bad"]
for i in range(6):
    c = got[f"s{i}"]["response"]["body"]["choices"][0]
    assert c["finish_reason"] == "stop", c
    jsonschema.validate(json.loads(c["message"]["content"]), schema)
print("json_schema: 6 answers validate;", got["s0"]["response"]["body"]["choices"][0]["message"]["content"])
EOF2

# 8. reasoning (a MiniMax-M2 model: its prompt opens <think>): --reasoning-budget 3 is the
# default of lines that do not say; reasoning_content and content are the text cut at the
# </think> the budget forced, as "reasoning_format": "none" shows it; --reasoning-format none
# leaves it in content; bad reasoning flags are command-line mistakes (exit 2)
mm=tests/data/minimax-m2-tiny-Q8_0.gguf
python3 - "$dir/think.jsonl" <<'EOF2'
import json, sys
with open(sys.argv[1], "w") as f:
    for cid, extra in (("split", {}), ("raw", {"reasoning_format": "none"}),
                       ("zero", {"reasoning_budget_tokens": 0})):
        body = dict({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10, "seed": 3,
                     "temperature": 1}, **extra)
        f.write(json.dumps({"custom_id": cid, "url": "/v1/chat/completions", "body": body}) + "\n")
EOF2
"$cli" batch -m $mm -i "$dir/think.jsonl" -o "$dir/think.out" -q --reasoning-budget 3 2>"$dir/err" ||
    fail "reasoning: exit $? ($(tail -1 "$dir/err"))"
"$cli" batch -m $mm -i "$dir/think.jsonl" -o "$dir/think-none.out" -q --reasoning-budget 3 \
    --reasoning-format none 2>"$dir/err" || fail "--reasoning-format none: exit $? ($(tail -1 "$dir/err"))"
python3 - "$dir/think.out" "$dir/think-none.out" <<'EOF2' || fail "reasoning in batch"
import json, sys
def read(p):
    return {o["custom_id"]: o["response"]["body"]["choices"][0]["message"] for o in map(json.loads, open(p))}
got, none = read(sys.argv[1]), read(sys.argv[2])
raw = got["raw"]["content"]
r, c = raw.split("</think>", 1)
assert got["split"].get("reasoning_content") == r.strip() and got["split"]["content"] == c.lstrip(), (got, raw)
assert got["zero"]["content"] and "reasoning_content" not in got["zero"], got["zero"]
assert none["split"]["content"] == raw and "reasoning_content" not in none["split"], none
print("reasoning: %r | %r (the text %r)" % (got["split"]["reasoning_content"], got["split"]["content"], raw))
EOF2
for bad in "-rea maybe" "--reasoning-format think" "--chat-template-kwargs []" \
           "--chat-template-kwargs {\"enable_thinking\":1}" "--reasoning-budget -2"; do
  # shellcheck disable=SC2086
  "$cli" batch -m $mm -i "$dir/think.jsonl" -o "$dir/bad.out" -q $bad 2>"$dir/err"
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$dir/err")" -le 3 ] || fail "$bad: exit $rc ($(cat "$dir/err"))"
done
echo "bad reasoning flags: exit 2"

# 9. several choices per line ("n"): choice c is the line's answer with seed + c; n above -np is
# an error line
python3 - "$dir/n.jsonl" <<'EOF2'
import json, sys
with open(sys.argv[1], "w") as f:
    for cid, extra in (("three", {"n": 3, "seed": 20}), ("s20", {"seed": 20}), ("s21", {"seed": 21}),
                       ("s22", {"seed": 22}), ("many", {"n": 5}),
                       ("two", {"prompt": ["Once upon", "A list"], "seed": 20})):
        body = dict({"prompt": "Once upon", "max_tokens": 8, "temperature": 1}, **extra)
        f.write(json.dumps({"custom_id": cid, "url": "/v1/completions", "body": body}) + "\n")
EOF2
"$cli" batch -m "$model" -i "$dir/n.jsonl" -o "$dir/n.out" -q -np 4 2>"$dir/err" ||
    fail "n: exit $? ($(tail -1 "$dir/err"))"
python3 - "$dir/n.out" <<'EOF2' || fail "n in batch"
import json, sys
got = {o["custom_id"]: o for o in map(json.loads, open(sys.argv[1]))}
three = got["three"]["response"]["body"]
texts = [c["text"] for c in three["choices"]]
want = [got["s%d" % s]["response"]["body"]["choices"][0]["text"] for s in (20, 21, 22)]
assert [c["index"] for c in three["choices"]] == [0, 1, 2] and texts == want, (texts, want)
assert three["usage"]["completion_tokens"] == sum(
    got["s%d" % s]["response"]["body"]["usage"]["completion_tokens"] for s in (20, 21, 22)), three
assert got["many"]["response"] is None and "-np" in got["many"]["error"]["message"], got["many"]
two = [c["text"] for c in got["two"]["response"]["body"]["choices"]]
assert two[0] == want[0] and len(two) == 2, (two, want)
print("n: 3 choices = the seed 20, 21, 22 answers;", json.dumps(texts))
EOF2

# 10. grammars (GBNF): each answer a sentence (Python's re, not faultline, reads it); a grammar
# that does not compile is an error line naming where, and the other lines go on
python3 - "$dir/g.jsonl" <<'EOF2'
import json, sys
with open(sys.argv[1], "w") as f:
    for cid, g in (("yesno", 'root ::= ("yes" | "no") "!"'), ("bad", "root ::= [a-"),
                   ("digits", 'root ::= [1-9] [0-9]{0,4} " items"')):
        body = {"prompt": "Q:", "max_tokens": 16, "temperature": 1, "seed": 5, "grammar": g}
        f.write(json.dumps({"custom_id": cid, "url": "/v1/completions", "body": body}) + "\n")
EOF2
"$cli" batch -m "$model" -i "$dir/g.jsonl" -o "$dir/g.out" -q 2>"$dir/err" ||
    fail "grammar: exit $? ($(tail -1 "$dir/err"))"
python3 - "$dir/g.out" <<'EOF2' || fail "grammars in batch"
import json, re, sys
got = {o["custom_id"]: o for o in map(json.loads, open(sys.argv[1]))}
for cid, rx in (("yesno", r"(yes|no)!"), ("digits", r"[1-9][0-9]{0,4} items")):
    c = got[cid]["response"]["body"]["choices"][0]
    assert c["finish_reason"] == "stop" and re.fullmatch(rx, c["text"]), (cid, c)
assert got["bad"]["response"] is None and "line 1, column" in got["bad"]["error"]["message"], got["bad"]
print("grammars:", [got[c]["response"]["body"]["choices"][0]["text"] for c in ("yesno", "digits")])
EOF2
# --grammar: the lines that bring no grammar, schema or tools of their own (here "bad" keeps
# its error, "yesno" and "digits" their own grammars, "plain" takes the default)
printf '%s\n' '{"custom_id": "plain", "url": "/v1/completions", "body": {"prompt": "Q:", "max_tokens": 16}}' >>"$dir/g.jsonl"
"$cli" batch -m "$model" -i "$dir/g.jsonl" -o "$dir/g2.out" -q --grammar 'root ::= "ok" [!?]' 2>"$dir/err" ||
    fail "--grammar: exit $? ($(tail -1 "$dir/err"))"
python3 - "$dir/g.out" "$dir/g2.out" <<'EOF2' || fail "--grammar in batch"
import json, sys
one, two = ({o["custom_id"]: o for o in map(json.loads, open(f))} for f in sys.argv[1:])
text = lambda o: o["response"]["body"]["choices"][0]["text"]
assert text(two["plain"]) in ("ok!", "ok?"), two["plain"]
assert text(two["yesno"]) == text(one["yesno"]) and text(two["digits"]) == text(one["digits"]), two
print("--grammar: the plain line answers %r, the others as before" % text(two["plain"]))
EOF2
# -j: the same for a JSON schema (the plain line's answer validates; python3-jsonschema)
"$cli" batch -m "$model" -i "$dir/g.jsonl" -o "$dir/g4.out" -q \
    -j '{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}' 2>"$dir/err" ||
    fail "-j: exit $? ($(tail -1 "$dir/err"))"
python3 - "$dir/g.out" "$dir/g4.out" <<'EOF2' || fail "-j in batch"
import json, sys, jsonschema
one, four = ({o["custom_id"]: o for o in map(json.loads, open(f))} for f in sys.argv[1:])
c = four["plain"]["response"]["body"]["choices"][0]
if c["finish_reason"] == "stop":
    jsonschema.validate(json.loads(c["text"]), {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                              "required": ["ok"]})
else:
    assert c["text"].startswith('{'), c
assert four["yesno"]["response"]["body"]["choices"][0]["text"] == \
    one["yesno"]["response"]["body"]["choices"][0]["text"], four["yesno"]
print("-j: the plain line answers %r, the others as before" % c["text"][:40])
EOF2
"$cli" batch -m "$model" -i "$dir/g.jsonl" -o "$dir/g3.out" -q --grammar 'root ::= <[99999999]>' 2>"$dir/err"
[ $? = 1 ] && grep -q "outside the vocabulary" "$dir/err" || fail "--grammar out of the vocabulary: $(cat "$dir/err")"
"$cli" batch -m "$model" -i "$dir/g.jsonl" -o "$dir/g3.out" -q --grammar-file "$dir/none.gbnf" 2>"$dir/err"
[ $? = 2 ] || fail "--grammar-file with no file: $(cat "$dir/err")"

# the README's example file: every request answered
"$cli" batch -m "$model" -i examples/batch-requests.jsonl -o "$dir/example.jsonl" -q 2>"$dir/err" ||
    fail "examples/batch-requests.jsonl: exit $? ($(tail -1 "$dir/err"))"
python3 - examples/batch-requests.jsonl "$dir/example.jsonl" <<'EOF2' || fail "examples/batch-requests.jsonl"
import json, sys
want = {json.loads(l)["custom_id"] for l in open(sys.argv[1])}
got = [json.loads(l) for l in open(sys.argv[2])]
assert {o["custom_id"] for o in got} == want and len(got) == len(want), got
assert all(o["error"] is None and o["response"]["status_code"] == 200 for o in got), got
EOF2
echo "examples/batch-requests.jsonl: $(wc -l <"$dir/example.jsonl") answers"

# OpenAI's "suffix" fills in the middle: a model gen --vocab made with StarCoder's vocabulary
# answers it (the same text as its /infill: tests/serve-infill.py), the tiny model has no FIM
# tokens (an error line naming suffix)
"$cli" gen --arch qwen3moe --vocab tests/data/vocab/ggml-vocab-starcoder.gguf -q --n-embd 64 \
  --layers 2 --experts 4 --top-k 2 --expert-ff 64 --ff 64 --heads 2 --heads-kv 1 --head-dim 32 \
  -o "$dir/fim.gguf" || fail "gen --vocab"
printf '%s\n' '{"custom_id": "f", "url": "/v1/completions", "body": {"prompt": "def f(a):\n    ",
  "suffix": "\n    return b\n", "max_tokens": 4, "temperature": 0}}' | tr -d '\n' >"$dir/fim.jsonl"
echo >>"$dir/fim.jsonl"
"$cli" batch -m "$dir/fim.gguf" -i "$dir/fim.jsonl" -o "$dir/fim.out" -q 2>"$dir/err" || fail "suffix: $(cat "$dir/err")"
"$cli" batch -m "$model" -i "$dir/fim.jsonl" -o "$dir/fim2.out" -q 2>"$dir/err"
python3 - "$dir/fim.out" "$dir/fim2.out" <<'EOF2' || fail "suffix lines"
import json, sys
a, b = (json.loads(open(p).read()) for p in sys.argv[1:3])
assert a["error"] is None and a["response"]["body"]["usage"]["completion_tokens"] == 4, a
assert b["response"] is None and "suffix: this model has no fill-in-the-middle" in b["error"]["message"], b
EOF2
echo "suffix: a FIM model fills in the middle; a model without FIM tokens: an error line"

# OpenAI's Responses API lines ("/v1/responses"): a response object whose text is the chat
# answer to the same conversation; a function call; a stored-response id refused by name
python3 - "$dir/resp.jsonl" <<'EOF2'
import json, sys
tool = {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}}}
chat_tool = {"type": "function", "function": {"name": "now", "parameters": tool["parameters"]}}
lines = [
    {"custom_id": "r", "url": "/v1/responses", "body": {"input": "Hello", "instructions": "Be brief.",
                                                        "max_output_tokens": 6, "temperature": 0}},
    {"custom_id": "c", "url": "/v1/chat/completions", "body": {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}],
        "max_tokens": 6, "temperature": 0}},
    {"custom_id": "rt", "url": "/v1/responses", "body": {"input": "Time?", "tools": [tool],
                                                         "tool_choice": "required", "temperature": 0}},
    {"custom_id": "bad", "url": "/v1/responses", "body": {"input": "x", "previous_response_id": "resp_1"}},
]
open(sys.argv[1], "w").write("".join(json.dumps(l) + "\n" for l in lines))
EOF2
"$cli" batch -m "$model" -i "$dir/resp.jsonl" -o "$dir/resp.out" -q 2>"$dir/err" || fail "responses: $(cat "$dir/err")"
python3 - "$dir/resp.out" <<'EOF2' || fail "responses lines"
import json, sys
out = {l["custom_id"]: l for l in map(json.loads, open(sys.argv[1]))}
r, c = out["r"]["response"]["body"], out["c"]["response"]["body"]
assert r["object"] == "response" and r["id"].startswith("resp_") and r["status"] == "incomplete", r
texts = [p["text"] for o in r["output"] if o["type"] == "message" for p in o["content"]]
assert texts == [c["choices"][0]["message"]["content"]], (texts, c)
assert r["usage"]["input_tokens"] == c["usage"]["prompt_tokens"] and r["usage"]["output_tokens"] == 6, r
calls = [o for o in out["rt"]["response"]["body"]["output"] if o["type"] == "function_call"]
assert len(calls) == 1 and calls[0]["name"] == "now" and json.loads(calls[0]["arguments"]) == {}, out["rt"]
assert out["bad"]["response"] is None and "previous_response_id" in out["bad"]["error"]["message"], out["bad"]
EOF2
echo "/v1/responses lines: response objects (the chat answer's text, a function call), a refusal"
echo "test-batch-cli: all checks passed"
