#!/usr/bin/env python3
"""serve-reasoning.py: a thinking model's reasoning through `faultline serve`
(tests/test-serve.sh), on a MiniMax-M2 model: its prompt opens <think>, so
all the model writes is reasoning until </think>.

Each answer is also asked for with "reasoning_format": "none" (the text as
the model wrote it, same seed); the split is checked against that text cut
here at the first </think>, as llama-server's "deepseek" format reads it.
A reasoning budget of N forces </think> after N tokens (counted from the
answer's logprobs); streamed deltas joined equal the whole answer's fields;
"deepseek-legacy" keeps the text in content; bad fields get a 400.
With FORMAT minimax-m3: the same on a MiniMax-M3 model whose server was
told thinking_mode "enabled" (its prompt opens <mm:think>); with kimi-k3,
on a Kimi K3 model (its prompt opens its think part; the answer is its
response part, up to a close tag).
usage: serve-reasoning.py BASE_URL KEY [FORMAT]"""
import codecs
import json
import sys

import serve_client
from serve_client import Server, check

base, key = sys.argv[1], sys.argv[2]
m3, k3 = sys.argv[3:] == ["minimax-m3"], sys.argv[3:] == ["kimi-k3"]
OPEN, CLOSE = ("<mm:think>", "</mm:think>") if m3 else \
    ("<|open|>think<|sep|>", "<|close|>think<|sep|>") if k3 else ("<think>\n", "</think>")
JSON_OPENING = {"m3": "<mm:think></mm:think>", "k3": "<|open|>think<|sep|><|close|>think<|sep|>"
                "<|open|>response<|sep|>"}.get("m3" if m3 else "k3" if k3 else "", "<think>\n</think>\n\n")
srv = Server(base, key)


def post(body, raw=False):
    return srv.post("/v1/chat/completions", body, raw=raw)
BLANKS = " \n\r\t"


def split(raw):
    """the rule, on the text of a prompt that opened <think>"""
    if CLOSE not in raw:
        return raw.strip(BLANKS), ""
    r, c = raw.split(CLOSE, 1)
    c = c.lstrip(BLANKS)
    if k3:  # its response part: after its opening, up to a close tag
        c = c[len("<|open|>response<|sep|>"):] if c.startswith("<|open|>response<|sep|>") else c
        c = c.split("<|close|>", 1)[0]
    return r.strip(BLANKS), c


def ask(**extra):
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 14, "seed": 7,
            "temperature": 1.0}
    body.update(extra)
    return post(body)["choices"][0]


for budget in (None, 0, 4):
    extra = {} if budget is None else {"reasoning_budget_tokens": budget}
    msg = ask(**extra)["message"]
    raw_choice = ask(reasoning_format="none", logprobs=True, **extra)
    raw = raw_choice["message"]["content"]
    r, c = split(raw)
    got_r = msg.get("reasoning_content", "")
    check(got_r == r and msg["content"] == c and ("reasoning_content" in msg) == bool(r),
          "budget %s: reasoning %r, content %r (the text: %r)" % (budget, got_r, msg["content"], raw))
    if budget is not None:
        toks = [bytes(e["bytes"]) for e in raw_choice["logprobs"]["content"]]
        # after the first `budget` tokens, or the first token after them that ends a UTF-8
        # character (think-budget.h: a close tag is forced on whole characters only)
        k = budget
        while k < len(toks):
            d = codecs.getincrementaldecoder("utf-8")(errors="replace")
            d.decode(b"".join(toks[:k]))
            if not d.getstate()[0]:
                break
            k += 1
        before = b"".join(toks[:k]).decode(errors="replace")
        after = raw[len(before):]  # (a long close tag may be cut by max_tokens)
        check(raw.startswith(before) and (after.startswith(CLOSE) or (
                  CLOSE.startswith(after) and raw_choice["finish_reason"] == "length")),
              "budget %d: the close tag follows the first %d tokens (%d: a character whole) (%r)"
              % (budget, budget, k, raw))
    # the stream's deltas, joined, are the whole answer's parts
    events = [json.loads(l[6:]) for l in post(dict(
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 14, "seed": 7,
         "temperature": 1.0, "stream": True}, **extra), raw=True).split("\n")
        if l.startswith("data: {")]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    sr = "".join(d.get("reasoning_content", "") for d in deltas)
    sc = "".join(d.get("content", "") for d in deltas)
    check(sr == got_r and sc == msg["content"],
          "budget %s: streamed %r / %r" % (budget, sr, sc))

legacy = ask(reasoning_format="deepseek-legacy", reasoning_budget_tokens=3)["message"]
raw = ask(reasoning_format="none", reasoning_budget_tokens=3)["message"]["content"]
check(legacy["content"] == raw and legacy.get("reasoning_content") == split(raw)[0],
      "deepseek-legacy: content as written, reasoning too: %r" % legacy)

# an answer held to JSON: the prompt closes the reasoning it opened, the answer is the value
prompt = srv.post("/apply-template", {"messages": [{"role": "user", "content": "Hi"}],
                                      "response_format": {"type": "json_object"}})["prompt"]
check(prompt.endswith(JSON_OPENING if k3 else "]~b]ai\n" + JSON_OPENING),
      "JSON mode closes the prompt's reasoning: %r" % prompt[-30:])
msg = ask(response_format={"type": "json_object"}, max_tokens=40, temperature=0)["message"]
check(msg["content"].startswith("{") and "reasoning_content" not in msg,
      "JSON mode: the answer is the object, no reasoning: %r" % msg["content"][:40])

for bad in ({"reasoning_format": "think"}, {"chat_template_kwargs": {"enable_thinking": "no"}},
            {"chat_template_kwargs": []}, {"reasoning_budget_tokens": -2},
            {"reasoning_budget_message": 3}, {"reasoning_effort": 1},
            {"messages": [{"role": "user", "content": "x"},
                          {"role": "assistant", "content": "y", "reasoning_content": 5}]}):
    code, e = srv.post("/v1/chat/completions",
                       dict({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}, **bad),
                       status=True)
    m = e.get("error", {}).get("message", "")
    check(code == 400 and m, "%s: %d %s" % (json.dumps(bad), code, m))
sys.exit(1 if serve_client.failed else 0)
