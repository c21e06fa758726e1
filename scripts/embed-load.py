#!/usr/bin/env python3
"""embed-load.py: documents posted to an OpenAI-compatible /v1/embeddings by
C concurrent clients, each sending its share one request at a time (the
shape of an indexing job against a shared server). bench-embed.sh runs it
against `faultline serve` and llama-server.

usage: embed-load.py BASE_URL CLIENTS DOCS_JSON OUT_JSON
DOCS_JSON: a list of strings. OUT_JSON: {"docs", "failed", "seconds",
"docs_per_s", "prompt_tokens", "tokens_per_s", "vectors": [one per document]}.
"""
import json
import sys
import threading
import time
import urllib.request

base, clients, docs_path, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
docs = json.load(open(docs_path))
vectors, tokens, failed = [None] * len(docs), [0] * len(docs), [0]
lock = threading.Lock()


def client(k):
    for i in range(k, len(docs), clients):
        body = json.dumps({"input": docs[i], "model": "m"}).encode()
        req = urllib.request.Request(base + "/embeddings", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=3600) as r:
                o = json.load(r)
            vectors[i] = o["data"][0]["embedding"]
            tokens[i] = o.get("usage", {}).get("prompt_tokens", 0)
        except Exception as e:  # counted; the figures say how many
            with lock:
                failed[0] += 1
            print(f"embed-load: document {i}: {e}", file=sys.stderr)


t0 = time.monotonic()
threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
secs = time.monotonic() - t0
json.dump({"docs": len(docs), "failed": failed[0], "seconds": secs,
           "docs_per_s": (len(docs) - failed[0]) / secs, "prompt_tokens": sum(tokens),
           "tokens_per_s": sum(tokens) / secs, "vectors": vectors}, open(out_path, "w"))
