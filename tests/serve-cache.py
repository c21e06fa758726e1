"""serve-cache.py BASE KEY N_BATCH: the prompt cache through `faultline serve`
(started with -b N_BATCH). A chat's second turn repeats the first turn's
messages: it must read whole N_BATCH chunks from the cache
(usage.prompt_tokens_details.cached_tokens, a multiple of N_BATCH, > 0) and
answer exactly as the same request with "cache_prompt": false (none cached):
the same text and the same logprobs, digit for digit. Streamed, the usage
chunk says what it read; /metrics counts the cached tokens. Exit 1 with a line on
the first failure."""
import json
import sys
import urllib.request

from serve_client import Server

base, key, n_batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
post = Server(base, key).post


def fail(msg):
    print("FAIL: prompt cache:", msg)
    sys.exit(1)


def cached(r):
    return r["usage"]["prompt_tokens_details"]["cached_tokens"]


def metric(name):
    req = urllib.request.Request(base.rsplit("/v1", 1)[0] + "/metrics", headers={"Authorization": "Bearer " + key})
    for line in urllib.request.urlopen(req, timeout=30).read().decode().splitlines():
        if line.startswith("faultline_" + name + " "):
            return float(line.split()[1])
    fail("no metric " + name)


system = ("You are a careful assistant. " * 40).strip()
turn1 = [{"role": "system", "content": system}, {"role": "user", "content": "Name a colour."}]
opts = {"max_tokens": 8, "temperature": 0, "logprobs": True, "top_logprobs": 2}
first = post("/v1/chat/completions", {"messages": turn1, **opts})
if first["usage"]["prompt_tokens"] < 2 * n_batch:
    fail("the first prompt has %d tokens, fewer than two chunks" % first["usage"]["prompt_tokens"])
if cached(first) != 0:
    fail("the first request read %d cached tokens" % cached(first))
turn2 = turn1 + [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                 {"role": "user", "content": "And another one?"}]
before = metric("prompt_tokens_cached_total")
hit = post("/v1/chat/completions", {"messages": turn2, **opts})
miss = post("/v1/chat/completions", {"messages": turn2, "cache_prompt": False, **opts})
n = cached(hit)
if n <= 0 or n % n_batch or n >= hit["usage"]["prompt_tokens"]:
    fail("the second turn read %d cached tokens of %d (chunks of %d)"
         % (n, hit["usage"]["prompt_tokens"], n_batch))
if cached(miss) != 0:
    fail('"cache_prompt": false read %d cached tokens' % cached(miss))
if hit["choices"][0] != miss["choices"][0]:
    fail("cached and computed prompts answer differently:\n%s\n%s"
         % (json.dumps(hit["choices"][0])[:400], json.dumps(miss["choices"][0])[:400]))
if metric("prompt_tokens_cached_total") - before != n:
    fail("/metrics counted %g cached tokens, the answer %d"
         % (metric("prompt_tokens_cached_total") - before, n))
sse = post("/v1/chat/completions", {"messages": turn2, "stream": True,
                                 "stream_options": {"include_usage": True}, **opts}, raw=True)
usage = [json.loads(l[6:])["usage"] for l in sse.splitlines()
         if l.startswith("data: {") and '"usage"' in l]
# the second turn's own whole chunks are cached now: at least as many
m = usage[-1]["prompt_tokens_details"]["cached_tokens"] if usage else -1
if m < n or m % n_batch or m >= usage[-1]["prompt_tokens"]:
    fail("streamed usage: %s" % usage)
print("prompt cache: turn 2 read %d of %d prompt tokens from the cache, answered as computed"
      % (n, hit["usage"]["prompt_tokens"]))
