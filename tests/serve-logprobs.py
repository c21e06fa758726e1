"""serve-logprobs.py BASE KEY: `logprobs` through `faultline serve`, chat and
completions, plain and streamed, with and without a stop string that cuts the
text. Checks: one entry per generated token (fewer only when a stop string cut
tokens off), each logprob <= 0 and its top list most likely first and holding
the chosen token when it ranks there; the streamed chunks' entries, joined, equal
the plain answer's (the same seed: the same tokens), and the streamed text the
plain text. Exit 1 with a line on the first failure."""
import json
import sys

from serve_client import Server

base, key = sys.argv[1], sys.argv[2]
srv = Server(base, key)


def post(path, body):
    return srv.post("/v1" + path, body, raw=True)


def entries(kind, lp):
    """The choice's logprobs as (token, logprob, [(token, logprob)...]) rows."""
    if lp is None:
        return []
    if kind == "chat":
        return [(e["token"], e["logprob"], [(t["token"], t["logprob"]) for t in e["top_logprobs"]])
                for e in lp["content"]]
    return [(t, l, sorted(top.items(), key=lambda kv: -kv[1]))
            for t, l, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"])]


def fail(msg):
    print("FAIL: logprobs:", msg)
    sys.exit(1)


for kind, path, body in [
    ("chat", "/chat/completions",
     {"messages": [{"role": "user", "content": "Tell me a story"}], "logprobs": True, "top_logprobs": 3}),
    ("completion", "/completions", {"prompt": "Once upon a time", "logprobs": 3}),
]:
    for stop in (None, ["e"]):
        b = dict(body, max_tokens=20, temperature=0.8, seed=5, ignore_eos=True)
        if stop:
            b["stop"] = stop
        whole = json.loads(post(path, b))
        c = whole["choices"][0]
        text = c["message"]["content"] if kind == "chat" else c["text"]
        rows = entries(kind, c["logprobs"])
        n_tok = whole["usage"]["completion_tokens"]
        if not (len(rows) == n_tok or (stop and 0 < len(rows) <= n_tok)):
            fail(f"{kind} stop={stop}: {len(rows)} entries for {n_tok} tokens")
        for tok, lp, top in rows:
            # completions' top list is a {piece: logprob} object: byte tokens that are
            # no whole UTF-8 character all read U+FFFD and keep one key
            want = len(top) == 3 if kind == "chat" else 1 <= len(top) <= 3
            if lp > 0 or not want or any(top[i][1] < top[i + 1][1] for i in range(len(top) - 1)):
                fail(f"{kind}: entry {tok!r} {lp} top {top}")
            if lp >= top[-1][1] and (tok, lp) not in top:
                fail(f"{kind}: chosen {tok!r} ({lp}) ranks in the top 3 but is not listed: {top}")
        sse = post(path, dict(b, stream=True))
        st, srows = "", []
        for line in sse.split("\n"):
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for ch in json.loads(line[6:])["choices"]:
                st += (ch["delta"].get("content") or "") if kind == "chat" else ch["text"]
                srows += entries(kind, ch.get("logprobs"))
        if st != text or srows != rows:
            fail(f"{kind} stop={stop}: streamed {len(srows)} entries {st!r}, plain {len(rows)} {text!r}")
        print(f"logprobs {kind}{' stop' if stop else ''}: {len(rows)} entries for {n_tok} tokens, "
              "streamed = plain")
