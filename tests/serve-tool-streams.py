#!/usr/bin/env python3
"""serve-tool-streams.py BASE KEY N: N streamed requests with tools, 8 at a
time, through the three APIs that stream calls as they grow (chat
completions, Anthropic's messages, the Responses API): forced, required and
automatic calls, max_tokens from 3 (a call cut as it begins) to 200, and
every fifth client gone after a few lines (tests/test-serve.sh). Every
stream a client reads to its end must end as its API ends one ([DONE],
message_stop, response.completed / incomplete), every event must be JSON,
and the server must answer /health after. Under the sanitizers this is where
a stream's reads of a growing call meet a job with no text yet. Exit 1 with
a line on the first failure."""
import json
import random
import sys
import threading
import urllib.request

base, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
root = base.rsplit("/v1", 1)[0]
plan = {"name": "plan", "parameters": {"type": "object", "additionalProperties": False,
        "properties": {"city": {"type": "string", "maxLength": 6}, "days": {"type": "integer"},
                       "note": {"type": "string", "minLength": 100, "maxLength": 100}},
        "required": ["city", "days", "note"]}}
pick = {"name": "pick", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}
ends = {"/v1/chat/completions": b"data: [DONE]", "/v1/messages": b"event: message_stop",
        "/v1/responses": b"event: response.completed"}
failures = []


def body(i, rnd):
    api = rnd.choice(sorted(ends))
    choice = rnd.choice(["force", "required", "auto"])
    common = {"model": "m", "stream": True, "temperature": 1, "seed": i}
    limit = rnd.choice([3, 10, 30, 80, 200])
    if api == "/v1/responses":
        tc = {"type": "function", "name": "plan"} if choice == "force" else choice
        return api, dict(common, input="Plan %d" % i, max_output_tokens=limit, tool_choice=tc,
                         tools=[dict(t, type="function") for t in (plan, pick)])
    if api == "/v1/messages":
        tc = {"type": "tool", "name": "plan"} if choice == "force" else \
            {"type": "any" if choice == "required" else "auto"}
        return api, dict(common, messages=[{"role": "user", "content": "Plan %d" % i}],
                         max_tokens=limit, tool_choice=tc,
                         tools=[{"name": t["name"], "input_schema": t["parameters"]} for t in (plan, pick)])
    tc = {"type": "function", "function": {"name": "plan"}} if choice == "force" else choice
    return api, dict(common, messages=[{"role": "user", "content": "Plan %d" % i}], max_tokens=limit,
                     tool_choice=tc, tools=[{"type": "function", "function": t} for t in (plan, pick)])


def client(i):
    rnd = random.Random(i)
    api, b = body(i, rnd)
    leave = rnd.randint(2, 30) if i % 5 == 0 else 0
    req = urllib.request.Request(root + api, json.dumps(b).encode(),
                                 {"Content-Type": "application/json", "Authorization": "Bearer " + key})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            lines = []
            for line in r:
                lines.append(line.rstrip(b"\n"))
                if leave and len(lines) >= leave:
                    return
                if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
                    json.loads(line[6:])
        done = ends[api]
        if not any(x == done or (api == "/v1/responses" and x == b"event: response.incomplete")
                   for x in lines):
            failures.append("%d %s: no end in %r" % (i, api, lines[-3:]))
    except Exception as e:  # noqa: BLE001 - any failure is the test's
        failures.append("%d %s: %s" % (i, api, e))


threads = []
for i in range(n):
    threads.append(threading.Thread(target=client, args=(i,)))
    threads[-1].start()
    if len(threads) >= 8:
        threads.pop(0).join()
for t in threads:
    t.join()
if failures:
    print("FAIL: tool streams: %d of %d: %s" % (len(failures), n, "; ".join(failures[:3])))
    sys.exit(1)
with urllib.request.urlopen(root + "/health", timeout=30) as r:
    ok = r.status == 200
print(("ok: " if ok else "FAIL: ") + "%d streamed requests with tools (chat, messages, responses), "
      "every fifth client gone early: each stream ended as its API ends one; /health after" % n)
sys.exit(0 if ok else 1)
