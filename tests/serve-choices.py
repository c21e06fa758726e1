#!/usr/bin/env python3
"""serve-choices.py: several choices per request ("n", llama-server's
"n_cmpl") and several prompts (a completions "prompt" list) through
`faultline serve` (tests/test-serve.sh).

Choice c of a seeded request is the answer the same request with n = 1
gets with seed + c (each choice is its own sequence, batch invariant);
the plain answer has them at choices[c] with usage summed (the prompt
once); a stream's deltas of index c joined equal choice c, each index ends
with its finish_reason, one usage chunk, [DONE]; n above -np is a 400.
usage: serve-choices.py BASE_URL KEY NP"""
import json
import sys

import serve_client
from serve_client import Server, check

base, key, np_ = sys.argv[1], sys.argv[2], int(sys.argv[3])
post = Server(base, key).post


def text_of(kind, choice):
    return choice["message"]["content"] if kind == "chat" else choice["text"]


for kind, path, base_body in (
        ("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me more"}]}),
        ("completion", "/v1/completions", {"prompt": "Once upon a time"})):
    body = dict(base_body, max_tokens=12, temperature=1.0, seed=11,
                **({"logprobs": True} if kind == "chat" else {"logprobs": 2}))
    alone = [post(path, dict(body, seed=11 + c)) for c in range(3)]
    many = post(path, dict(body, n=3))
    got = [text_of(kind, c) for c in many["choices"]]
    want = [text_of(kind, a["choices"][0]) for a in alone]
    check([c["index"] for c in many["choices"]] == [0, 1, 2] and got == want,
          "%s n=3: choice c = n=1 with seed 11+c: %s" % (kind, json.dumps(got)))
    n_lp = [len(c["logprobs"]["content"] if kind == "chat" else c["logprobs"]["tokens"])
            for c in many["choices"]]
    check(n_lp == [a["usage"]["completion_tokens"] for a in alone],
          "%s n=3: each choice has its tokens' logprobs %s" % (kind, n_lp))
    u = many["usage"]
    check(u["prompt_tokens"] == alone[0]["usage"]["prompt_tokens"] and
          u["completion_tokens"] == sum(a["usage"]["completion_tokens"] for a in alone) and
          u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"],
          "%s n=3: usage %s" % (kind, json.dumps(u)))
    sse = post(path, dict(body, n=3, stream=True, stream_options={"include_usage": True}), raw=True)
    events = [l[6:] for l in sse.split("\n") if l.startswith("data: ")]
    objs = [json.loads(e) for e in events if e != "[DONE]"]
    parts, finish = {}, {}
    for o in objs:
        for c in o["choices"]:
            d = c["delta"].get("content") if kind == "chat" else c["text"]
            parts[c["index"]] = parts.get(c["index"], "") + (d or "")
            if c["finish_reason"]:
                finish[c["index"]] = c["finish_reason"]
    usage = [o["usage"] for o in objs if not o["choices"]]
    check(events[-1] == "[DONE]" and [parts.get(c) for c in range(3)] == got and
          sorted(finish) == [0, 1, 2] and len(usage) == 1 and
          usage[0]["completion_tokens"] == u["completion_tokens"],
          "%s n=3 streamed: each index's deltas = its choice, %d usage chunk" % (kind, len(usage)))

# several prompts (OpenAI's list; lm-evaluation-harness sends its batches so): choice
# p * n + c is prompt p's answer with seed + c; usage counts each prompt once
prompts = ["The sea", "A tree grows", "Numbers: 1 2"]
many = post("/v1/completions", {"prompt": prompts, "n": 2, "max_tokens": 6, "temperature": 1.0,
                             "seed": 3})
alone = [[post("/v1/completions", {"prompt": p, "max_tokens": 6, "temperature": 1.0, "seed": 3 + c})
          for c in range(2)] for p in prompts]
want = [a["choices"][0]["text"] for row in alone for a in row]
got = [c["text"] for c in many["choices"]]
u = many["usage"]
check(got == want and [c["index"] for c in many["choices"]] == list(range(6)) and
      u["prompt_tokens"] == sum(row[0]["usage"]["prompt_tokens"] for row in alone) and
      u["completion_tokens"] == sum(a["usage"]["completion_tokens"] for row in alone for a in row),
      "3 prompts x n=2: choice p*2+c = prompt p with seed 3+c; usage %s" % json.dumps(u))
sse = post("/v1/completions", {"prompt": prompts, "n": 2, "max_tokens": 6, "temperature": 1.0,
                            "seed": 3, "stream": True}, raw=True)
parts = {}
for e in [l[6:] for l in sse.split("\n") if l.startswith("data: {")]:
    for c in json.loads(e)["choices"]:
        parts[c["index"]] = parts.get(c["index"], "") + c["text"]
check([parts.get(i) for i in range(6)] == got, "3 prompts x n=2 streamed: each index = its choice")
# scoring a batch of prompts: echo, logprobs, max_tokens 0
scored = post("/v1/completions", {"prompt": prompts, "echo": True, "logprobs": 1, "max_tokens": 0})
check([c["text"] for c in scored["choices"]] == prompts and
      all(c["logprobs"]["token_logprobs"][0] is None and
          len(c["logprobs"]["tokens"]) == a[0]["usage"]["prompt_tokens"]
          for c, a in zip(scored["choices"], alone)),
      "3 prompts scored (echo, logprobs, max_tokens 0): each its prompt's tokens")
r = post("/v1/completions", {"prompt": [[10, 20, 30], [40]], "max_tokens": 2, "seed": 1})
check(len(r["choices"]) == 2, "a list of token-id prompts: %d choices" % len(r["choices"]))
# as llama-server reads prompts: strings and ids in one array are one prompt,
# a list may hold strings, id lists and such mixed arrays
r = post("/v1/completions", {"prompt": ["a", 3], "max_tokens": 2, "seed": 1})
check(len(r["choices"]) == 1 and r["usage"]["prompt_tokens"] == 2,
      "[\"a\", 3]: one prompt of %d tokens" % r["usage"]["prompt_tokens"])
r = post("/v1/completions", {"prompt": [[1], "a", ["a", 3]], "max_tokens": 2, "seed": 1})
check(len(r["choices"]) == 3, "[[1], \"a\", [\"a\", 3]]: %d choices" % len(r["choices"]))
for bad, what in ((["a", ""], "prompt[1]"), (["a", 3.5], "prompt[1]"), ([[1], {}], "prompt[1]"),
                  (["a"] * 1025, "prompt")):
    code, e = post("/v1/completions", {"prompt": bad, "max_tokens": 2}, status=True)
    m = e.get("error", {}).get("message", "")
    check(code == 400 and m.startswith(what), "%s: %d %s" % (json.dumps(bad)[:40], code, m))
r = post("/v1/completions", {"prompt": "x", "max_tokens": 2, "n_cmpl": 2, "seed": 1})
check(len(r["choices"]) == 2, "n_cmpl (llama-server's name): %d choices" % len(r["choices"]))
for bad in (np_ + 1, 0, 129):
    code, e = post("/v1/completions", {"prompt": "x", "max_tokens": 2, "n": bad}, status=True)
    m = e.get("error", {}).get("message", "")
    check(code == 400 and "n" in m, "n=%d: %d %s" % (bad, code, m))
sys.exit(1 if serve_client.failed else 0)
