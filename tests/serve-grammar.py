#!/usr/bin/env python3
"""serve-grammar.py: llama-server's "grammar" (GBNF) through `faultline serve`
(tests/test-serve.sh).

Answers drawn at temperature 1 under a grammar are sentences of it: each
grammar here has a twin regular expression written by hand, and Python's
re module (not faultline's matcher) checks every answer: whole when the
grammar ended it (finish_reason "stop"), a prefix of one when max_tokens
cut it. Chat and completions, plain and streamed (the stream's deltas
joined equal the plain answer of the same seed), n = 2 (each choice a
sentence). A grammar that cannot compile, names a token outside the
vocabulary, or comes with a schema or tools is a 400 naming where.
usage: serve-grammar.py BASE_URL KEY"""
import json
import re
import sys

import serve_client
from serve_client import Server, check

base, key = sys.argv[1], sys.argv[2]
srv = Server(base, key)


def post(path, body, raw=False):
    return srv.post(path, body, raw=raw, status=True)


def prefix_of(rx, text):
    """Whether text can still become a match of rx: some extension of it
    over a small alphabet matches (the answers here are short)."""
    if rx.fullmatch(text):
        return True
    frontier = {text}
    for _ in range(6):
        frontier = {t + c for t in frontier for c in "abcdefxyz0123456789 .!-,[]\"\n"}
        if any(rx.fullmatch(t) for t in frontier):
            return True
        frontier = set(list(frontier)[:2000])
    return False


# (grammar, its twin expression)
grammars = [
    ('root ::= "The answer is " ("yes" | "no" | [0-9]{1,3}) "."', r"The answer is (yes|no|[0-9]{1,3})\."),
    ('root ::= item ("," item){0,3}\nitem ::= [a-f]+ | "[" [0-9]* "]"',
     r"(?:[a-f]+|\[[0-9]*\])(?:,(?:[a-f]+|\[[0-9]*\])){0,3}"),
    ('root ::= "\\"" [^"\\n]{0,12} "\\""', r'"[^"\n]{0,12}"'),
]

stopped = 0
for g, twin in grammars:
    rx = re.compile(twin, re.S)
    for kind, path, body0 in (
            ("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Answer"}]}),
            ("completion", "/v1/completions", {"prompt": "Q: say it\nA:"})):
        for seed in (1, 2, 3):
            body = dict(body0, grammar=g, max_tokens=24, temperature=1.0, seed=seed)
            code, r = post(path, body)
            c = r["choices"][0] if code == 200 else {}
            text = c.get("message", {}).get("content") if kind == "chat" else c.get("text")
            ok = code == 200 and (rx.fullmatch(text) if c["finish_reason"] == "stop"
                                  else c["finish_reason"] == "length" and prefix_of(rx, text))
            stopped += code == 200 and c["finish_reason"] == "stop"
            check(bool(ok), "%s seed %d under %r: %r (%s)" % (kind, seed, g, text,
                                                              c.get("finish_reason")))
            if seed == 1:
                code, sse = post(path, dict(body, stream=True), raw=True)
                events = [l[6:] for l in sse.split("\n") if l.startswith("data: ")]
                parts = [json.loads(e)["choices"] for e in events if e != "[DONE]"]
                joined = "".join((ch[0]["delta"].get("content") or "") if kind == "chat"
                                 else ch[0]["text"] for ch in parts if ch)
                check(joined == text, "%s streamed = plain: %r" % (kind, joined))
check(stopped >= 6, "%d answers ended by their grammar (not by max_tokens)" % stopped)

code, r = post("/v1/completions", {"prompt": "x", "grammar": grammars[0][0], "n": 2,
                                "max_tokens": 24, "temperature": 1.0, "seed": 9})
rx = re.compile(grammars[0][1])
check(code == 200 and len(r["choices"]) == 2 and
      all(rx.fullmatch(c["text"]) or prefix_of(rx, c["text"]) for c in r["choices"]),
      "n = 2: each choice under the grammar: %s" % [c["text"] for c in r.get("choices", [])])

for body, want in (
        ({"prompt": "x", "grammar": "root ::= item"}, "rule 'item' is used but not defined"),
        ({"prompt": "x", "grammar": "root ::= \"a\" |\n  [b-"}, "line 2, column"),
        ({"prompt": "x", "grammar": "root ::= <[99999999]>"}, "a token id outside the vocabulary"),
        ({"prompt": "x", "grammar": "root ::= root \"a\""}, "left-recursive"),
        ({"prompt": "x", "grammar": 5}, "grammar: expected a string of GBNF"),
        ({"prompt": "x", "grammar": "root ::= \"a\"", "json_schema": {"type": "integer"}},
         "both constrain the answer"),
        ({"messages": [{"role": "user", "content": "a"}], "grammar": "root ::= \"a\"",
          "tools": [{"type": "function", "function": {"name": "f"}}]}, "with tools")):
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    code, r = post(path, body)
    msg = r.get("error", {}).get("message", "")
    check(code == 400 and want in msg, "400 for %s: %s" % (json.dumps(body)[:60], msg))

sys.exit(1 if serve_client.failed else 0)
