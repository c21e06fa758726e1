"""serve-native.py BASE KEY N_BATCH: llama-server's own API through `faultline
serve` (started with -b N_BATCH): /completion and /completions, plain and
streamed, n_probs, return_tokens, stop types, several and mixed prompts,
n_predict 0 leaving the prompt in the cache, per-request samplers, /props and
/tokenize's fields, and the refusals. Every check prints a line; exit 1 when
one failed."""
import json
import sys

import serve_client
from serve_client import Server, check

base, key, n_batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
srv = Server(base, key)


def native(body, path="/completion"):
    return srv.post(path, body)


def events(body):
    """A stream's events: the data objects, and whether [DONE] came."""
    text = srv.post("/completion", dict(body, stream=True), raw=True)
    evs = [json.loads(line[6:]) for line in text.split("\n")
           if line.startswith("data: ") and line != "data: [DONE]"]
    return evs, "data: [DONE]" in text


def tokenize(text, **kw):
    return srv.post("/tokenize", dict(kw, content=text))["tokens"]


def detokenize(ids):
    return srv.post("/detokenize", {"tokens": ids})["content"]


prompt = "Once upon a time there was"
opts = {"prompt": prompt, "n_predict": 16, "seed": 7, "temperature": 0.9, "ignore_eos": True}

# --- plain: the fields, the tokens, the figures -------------------------------------------
r = native(dict(opts, n_probs=3, return_tokens=True))
check(r["stop"] is True and r["index"] == 0 and r["stop_type"] == "limit"
      and r["tokens_predicted"] == 16 and r["tokens_evaluated"] == len(tokenize(prompt, add_special=True)),
      f"/completion: stop, index, stop_type limit, 16 predicted, the prompt's tokens evaluated "
      f"({r['stop_type']}, {r['tokens_predicted']}, {r['tokens_evaluated']})")
check(len(r["tokens"]) == 16 and detokenize(r["tokens"]) == r["content"],
      "return_tokens: 16 ids whose text is the content")
probs = r["completion_probabilities"]
check(len(probs) == 16 and all(p["id"] == t for p, t in zip(probs, r["tokens"])),
      "n_probs: an entry per generated token, in order")
check(all(p["logprob"] <= 0 and 1 <= len(p["top_logprobs"]) <= 3 and
          all(a["logprob"] >= b["logprob"] for a, b in zip(p["top_logprobs"], p["top_logprobs"][1:]))
          and (p["logprob"] < p["top_logprobs"][-1]["logprob"] or
               any(t["id"] == p["id"] for t in p["top_logprobs"]))
          and bytes(p["bytes"]).decode("utf-8", "replace") == p["token"]
          for p in probs),
      "n_probs: logprobs <= 0, top 3 likeliest first, the drawn token listed where it ranks")
gs = r["generation_settings"]
check(gs["seed"] == 7 and gs["n_predict"] == 16 and abs(gs["temperature"] - 0.9) < 1e-6
      and gs["n_probs"] == 3 and gs["ignore_eos"] is True and gs["n_ctx"] > 0,
      "generation_settings: the request's settings")
t = r["timings"]
check(t["prompt_n"] + t["cache_n"] == r["tokens_evaluated"] and t["predicted_n"] == 16
      and t["predicted_ms"] > 0 and r["prompt"] == prompt and r["tokens_cached"] == r["tokens_evaluated"] + 16,
      "timings, prompt and tokens_cached")
same = native(opts, path="/completions")
check(same["content"] == r["content"] and same["tokens"] == [] and "completion_probabilities" not in same,
      "/completions is /completion (as llama-server's); tokens [] without return_tokens")

# --- streamed: the same text and tokens, a last event with the fields, no [DONE] ----------
evs, done = events(dict(opts, n_probs=2))
body, last = evs[:-1], evs[-1]
check(not done and last["stop"] is True and all(not e["stop"] for e in body)
      and last["content"] == "" and last["stop_type"] == "limit" and last["tokens_predicted"] == 16,
      f"stream: {len(body)} events, a last one with stop and the fields, no [DONE]")
check("".join(e["content"] for e in body) == r["content"]
      and sum((e["tokens"] for e in body), []) == r["tokens"],
      "stream: the events' content and tokens are the plain answer's (same seed)")
check([p["logprob"] for e in body for p in e["completion_probabilities"]] ==
      [p["logprob"] for p in probs],
      "stream: each token's figures with the event that carries it")

# --- stop strings, end of generation ---------------------------------------------------------
cut = r["content"][len(r["content"]) // 2:][:2]
w = native(dict(opts, stop=[cut]))
check(w["stop_type"] == "word" and w["stopping_word"] == cut
      and w["content"] == r["content"][:r["content"].index(cut)],
      f"stop {cut!r}: stop_type word, stopping_word, the content before it")
e = native({"prompt": prompt, "n_predict": 64, "seed": 1, "logit_bias": [[t, 100] for t in tokenize("<|endoftext|>")]})
check(e["stop_type"] == "eos" and e["tokens_predicted"] == 0 and e["content"] == "",
      f"an end-of-generation token: stop_type eos ({e['stop_type']})")

# --- several prompts, mixed prompts -----------------------------------------------------------------
ids = tokenize("Hello there", add_special=True)
arr = native({"prompt": ["Hello there", ids, ["Hello", 12, " there"]], "n_predict": 2, "seed": 3,
              "temperature": 0})
want = len(tokenize("Hello", add_special=True)) + 1 + len(tokenize(" there"))
check(isinstance(arr, list) and [a["index"] for a in arr] == [0, 1, 2]
      and arr[0]["content"] == arr[1]["content"] and arr[2]["tokens_evaluated"] == want,
      "three prompts: an array in order; text and its ids answer alike; ids and strings mixed")
check(len(tokenize("<|endoftext|>")) == 1 and len(tokenize("<|endoftext|>", parse_special=False)) > 1,
      "/tokenize: a control token's text is the token (parse_special's default), not with false")
wp = srv.post("/tokenize", {"content": "Hello", "with_pieces": True})["tokens"]
check("".join(p["piece"] for p in wp) == "Hello" and all("id" in p for p in wp),
      "/tokenize with_pieces: ids and pieces")

# --- n_predict 0: the prompt alone, left for the next request ---------------------------------
long_prompt = ("The quick brown fox jumps over the lazy dog. " * 20).strip()
z = native({"prompt": long_prompt, "n_predict": 0})
nxt = native({"prompt": long_prompt + " Then", "n_predict": 1, "temperature": 0})
check(z["content"] == "" and z["tokens_predicted"] == 0 and z["stop_type"] == "limit"
      and nxt["timings"]["cache_n"] >= n_batch and nxt["timings"]["cache_n"] % n_batch == 0,
      f"n_predict 0: nothing generated; the next request reads {nxt['timings']['cache_n']} "
      "prompt tokens from the cache")

# --- samplers ---------------------------------------------------------------------------
greedy = native({"prompt": prompt, "n_predict": 12, "temperature": 0, "ignore_eos": True})
k1 = native({"prompt": prompt, "n_predict": 12, "temperature": 1.5, "top_k": 1, "seed": 9,
             "ignore_eos": True, "samplers": ["dry", "top_k", "xtc", "temperature"]})
check(k1["content"] == greedy["content"] and
      k1["generation_settings"]["samplers"] == ["dry", "top_k", "xtc", "temperature"],
      "samplers [dry, top_k, xtc, temperature] with top_k 1: greedy's text (dry and xtc off)")
# DRY on a greedy answer: another text, the same one twice, its settings reported
long_greedy = native({"prompt": prompt, "n_predict": 48, "temperature": 0, "ignore_eos": True})
dry = {"prompt": prompt, "n_predict": 48, "temperature": 0, "ignore_eos": True,
       "dry_multiplier": 2.0, "dry_allowed_length": 1, "dry_sequence_breakers": ["\n", "###"]}
d1, d2 = native(dry), native(dry)
gs = d1["generation_settings"]
check(d1["content"] != long_greedy["content"] and d1["content"] == d2["content"] and
      gs["dry_multiplier"] == 2.0 and gs["dry_allowed_length"] == 1 and gs["dry_base"] == 1.75 and
      gs["dry_sequence_breakers"] == ["\n", "###"],
      f"DRY: another greedy text, twice the same, settings reported ({gs.get('dry_sequence_breakers')})")
for extra in [{"mirostat": 2, "mirostat_tau": 3}, {"mirostat": 1},
              {"xtc_probability": 0.5, "xtc_threshold": 0.05}, {"top_n_sigma": 1.0},
              {"dynatemp_range": 0.5, "dynatemp_exponent": 1.5}]:
    body = dict({"prompt": prompt, "n_predict": 16, "temperature": 1.0, "seed": 11,
                 "ignore_eos": True}, **extra)
    a, b = native(body), native(body)
    check(a["content"] == b["content"] and a["tokens_predicted"] == 16 and
          all(a["generation_settings"][k] == v for k, v in extra.items()),
          f"{extra}: seeded, the same text twice, settings reported")
k2 = native({"prompt": prompt, "n_predict": 12, "temperature": 1.5, "top_k": 1, "seed": 9,
             "ignore_eos": True, "samplers": "t"})
check(k2["generation_settings"]["samplers"] == ["temperature"], "samplers as letters")

# --- refusals ---------------------------------------------------------------------------
for bad, what in [({"dry_multiplier": -1}, "dry_multiplier"), ({"mirostat": 3}, "mirostat"),
                  ({"xtc_probability": 1.5}, "xtc_probability"), ({"n_probs": 50}, "n_probs"),
                  ({"dry_sequence_breakers": []}, "dry_sequence_breakers"),
                  ({"samplers": "ia"}, "samplers"), ({"samplers": ["nope"]}, "samplers"),
                  ({"post_sampling_probs": True}, "post_sampling_probs"), ({"echo": True}, "echo"),
                  ({"prompt": [1, {"a": 1}]}, "prompt")]:
    code, out = srv.post("/completion", dict({"prompt": "x"}, **bad), status=True)
    check(code == 400 and what in out["error"]["message"], f"400 for {bad}: {out['error']['message']}")
code, out = srv.post("/v1/completions", {"prompt": "x", "n_probs": 2}, status=True)
check(code == 400 and "n_probs" in out["error"]["message"], "/v1/completions: n_probs is /completion's")
code, out = srv.post("/completion", {"prompt": "x", "xtc_probability": 0, "dry_multiplier": 0,
                                     "mirostat": 0, "top_n_sigma": -1, "n_predict": 1}, status=True)
check(code == 200, "llama-server's off values of its other samplers pass")

# --- code editors' limits (llama.vim's body): n_indent, t_max_predict_ms, response_fields ----
g = 'root ::= "def f():\\n" "    a = 1\\n" "  b\\n" "c = 2\\n"'
whole = native({"prompt": "x", "n_predict": 64, "grammar": g, "temperature": 0})
cut = native({"prompt": "x", "n_predict": 64, "grammar": g, "temperature": 0, "n_indent": 4})
evs, _ = events({"prompt": "x", "n_predict": 64, "grammar": g, "temperature": 0, "n_indent": 4})
check(whole["content"] == "def f():\n    a = 1\n  b\nc = 2\n" and whole["stop_type"] == "eos"
      and cut["content"] == "def f():\n    a = 1\n  " and cut["stop_type"] == "limit"
      and "".join(e["content"] for e in evs) == cut["content"] and evs[-1]["stop_type"] == "limit",
      f"n_indent 4: the line indented 2 ends the answer before its text, streamed too "
      f"({cut['content']!r})")
timed = native({"prompt": "x", "n_predict": 900, "grammar": 'root ::= ("abcdefgh\\n")+',
                "temperature": 0, "t_max_predict_ms": 20})
check(timed["stop_type"] == "limit" and timed["content"].endswith("\n")
      and timed["tokens_predicted"] < 900 and timed["timings"]["predicted_ms"] >= 20,
      f"t_max_predict_ms 20: a newline after 20 ms ends it ({timed['tokens_predicted']} tokens, "
      f"{timed['timings']['predicted_ms']:.0f} ms)")
fields = ["content", "timings/prompt_n", "timings/predicted_n", "truncated", "tokens_cached",
          "nope/x"]
picked = native({"prompt": "x", "n_predict": 3, "temperature": 0, "response_fields": fields,
                 "t_max_prompt_ms": 500, "samplers": ["top_k", "top_p", "infill"]})
check(sorted(picked) == sorted(fields[:-1]) and picked["timings/predicted_n"] == 3
      and picked["tokens_cached"] > 3 and picked["truncated"] is False,
      f"response_fields: just those paths ({sorted(picked)}); t_max_prompt_ms and the infill "
      f"sampler accepted")
pevs, _ = events({"prompt": "x", "n_predict": 3, "response_fields": ["content", "stop_type"]})
check(sorted(pevs[-1]) == ["content", "stop_type"] and pevs[-1]["stop_type"] == "limit",
      "response_fields on a stream: the last event's fields")

# --- /props -------------------------------------------------------------------------
import urllib.request
req = urllib.request.Request(srv.root + "/props", headers={"Authorization": "Bearer " + key})
props = json.loads(urllib.request.urlopen(req, timeout=30).read().decode())
check(props["total_slots"] >= 1 and props["default_generation_settings"]["n_ctx"] > 0
      and props["build_info"].startswith("faultline") and "params" in props["default_generation_settings"]
      and props["model_path"].endswith(".gguf"),
      f"/props: {props['total_slots']} slots, n_ctx {props['default_generation_settings']['n_ctx']}")


# --- /slots -------------------------------------------------------------------------
def get(path):
    req = urllib.request.Request(srv.root + path, headers={"Authorization": "Bearer " + key})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())


st, slots = get("/slots")
check(st == 200 and [s["id"] for s in slots] == list(range(props["total_slots"]))
      and not any(s["is_processing"] for s in slots) and all(s["n_ctx"] > 0 for s in slots)
      and get("/slots?fail_on_no_slot=1")[0] == 200,
      f"/slots idle: {len(slots)} slots, none processing; fail_on_no_slot: 200")
# every sequence busy with a long stream: each slot shows its request
long_prompt = "Once upon a time there was a dragon"
streams = []
for i in range(props["total_slots"]):
    req = urllib.request.Request(srv.root + "/completion", data=json.dumps(
        {"prompt": long_prompt, "n_predict": 900, "ignore_eos": True, "stream": True, "seed": i,
         "temperature": 0.5 + i}).encode(), headers={"Authorization": "Bearer " + key,
                                                    "Content-Type": "application/json"})
    streams.append(urllib.request.urlopen(req, timeout=60))
for s in streams:  # two events each: the step after its first ran (and left /slots' view)
    n_data = 0
    while n_data < 2:
        n_data += s.readline().startswith(b"data: ")
st, slots = get("/slots")
n_prompt = len(tokenize(long_prompt, add_special=True))
busy = [s for s in slots if s["is_processing"]]
check(st == 200 and len(busy) == len(slots)
      and all(s["n_prompt_tokens"] == n_prompt and s["params"]["n_predict"] == 900
              and s["params"]["ignore_eos"] is True and s["next_token"][0]["n_decoded"] >= 1
              and s["next_token"][0]["n_remain"] == 900 - s["next_token"][0]["n_decoded"]
              for s in busy)
      and sorted(round(s["params"]["temperature"], 3) for s in busy)
          == [0.5 + i for i in range(len(slots))],
      f"/slots busy: every slot its request (prompt {n_prompt} tokens, n_predict 900, its temperature)")
st, out = get("/slots?fail_on_no_slot=1")
check(st == 503 and out["error"]["message"] == "no slot available",
      "fail_on_no_slot with every slot busy: 503")
for s in streams:
    s.close()

sys.exit(1 if serve_client.failed else 0)
