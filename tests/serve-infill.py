"""serve-infill.py BASE KEY N_BATCH: llama-server's /infill through `faultline
serve` (started with -b N_BATCH) on a model with StarCoder's vocabulary
(<fim_prefix>, <fim_suffix>, <fim_middle>, <fim_pad>; no repository or file
tokens, so extra chunks follow a snippet line): the prompt it builds (its
text and its token count, from /tokenize's counts of the parts), the prefix
and suffix cut to the batch, streamed answers, <fim_pad> ending a
generation, and the refusals. Every check prints a line; exit 1 when one
failed."""
import json
import sys

import serve_client
from serve_client import Server, check

base, key, n_batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
srv = Server(base, key)
PRE, SUF, MID = "<fim_prefix>", "<fim_suffix>", "<fim_middle>"
SNIPPET = "\n\n--- snippet ---\n\n"


def count(text, special=False):
    return len(srv.post("/tokenize", {"content": text, "add_special": False,
                                      "parse_special": special})["tokens"])


def infill(body, **kw):
    return srv.post("/infill", dict(body, **kw), status=True)


prefix, suffix, middle = "def add(a, b):\n    ", "\n    return c\n", "c ="
extra = [{"filename": "util.py", "text": "import os\n"}, {"text": "X = 1\n"}]
base_req = {"input_prefix": prefix, "input_suffix": suffix, "prompt": middle,
            "input_extra": extra, "n_predict": 4, "temperature": 0}

# --- the prompt: extra chunks, prefix and middle's start, suffix, middle -----------------
st, r = infill(base_req)
want_text = (SNIPPET + "import os\n" + SNIPPET + "X = 1\n" + PRE + prefix + middle + SUF + suffix
             + MID)
want_n = (2 * count(SNIPPET) + count("import os\n") + count("X = 1\n") + 1 + count(prefix)
          + count(middle, True) + 1 + count(suffix) + 1)
check(st == 200 and r["prompt"] == want_text,
      f"the prompt: snippets, <fim_prefix> prefix prompt <fim_suffix> suffix <fim_middle> "
      f"({r.get('prompt')!r})")
check(r["tokens_evaluated"] == want_n, f"its tokens: the parts' tokens and 3 FIM tokens "
      f"({r['tokens_evaluated']}, want {want_n})")
check(r["tokens_predicted"] == 4 and r["stop_type"] == "limit" and r["stop"] is True,
      "a /completion answer: 4 tokens, stop_type limit")
# the same request twice, greedy: the same middle (and its text the tokens' pieces)
st2, r2 = infill(base_req, return_tokens=True)
check(st2 == 200 and r2["content"] == r["content"] and len(r2["tokens"]) == 4,
      "greedy twice: the same middle")

# --- cuts: the prefix's last 3 * (b / 4) tokens, the suffix's first b / 4 - 2 - prompt --------
long_prefix = "".join(f"x{i} = {i}\n" for i in range(200))
long_suffix = "".join(f"y{i} = {i}\n" for i in range(200))
st, r = infill({"input_prefix": long_prefix, "input_suffix": long_suffix, "n_predict": 1})
n_pre, n_suf = 3 * (n_batch // 4), n_batch // 4 - 2
check(st == 200 and r["tokens_evaluated"] == n_pre + n_suf + 3,
      f"a long prefix and suffix: {n_pre} + {n_suf} tokens kept ({r.get('tokens_evaluated')})")
check(r["prompt"].startswith(PRE) and r["prompt"].split(SUF)[0].endswith("x199 = 199\n")
      and r["prompt"].split(SUF)[1].startswith("y0 = 0\n") and r["prompt"].endswith(MID),
      "the prefix's end and the suffix's start are kept")

# --- ids in the pieces, streamed ---------------------------------------------------------
ids = srv.post("/tokenize", {"content": "a = 1", "add_special": False})["tokens"]
st, r = infill({"input_prefix": ids, "input_suffix": ["\n", ids[0]], "n_predict": 1})
check(st == 200 and r["prompt"] == PRE + "a = 1" + SUF + "\na" + MID,
      f"ids and strings mixed in the pieces ({r.get('prompt')!r})")
text = srv.post("/infill", dict(base_req, stream=True, n_predict=3), raw=True)
evs = [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]
check(len(evs) >= 2 and evs[-1]["stop"] is True and evs[-1]["prompt"] == want_text
      and "".join(e["content"] for e in evs) == infill(base_req, n_predict=3)[1]["content"]
      and "data: [DONE]" not in text,
      "streamed: /completion's events, joined the plain answer, no [DONE]")

# --- <fim_pad> ends a generation (as llama.cpp, it is an end-of-generation token) -----------
pad = srv.post("/tokenize", {"content": "<fim_pad>", "add_special": False,
                             "parse_special": True})["tokens"]
check(len(pad) == 1, "<fim_pad> is one token")
st, r = infill(base_req, logit_bias=[[pad[0], 100]], n_predict=8)
check(st == 200 and r["stop_type"] == "eos" and r["content"] == "" and r["tokens_predicted"] <= 1,
      f"<fim_pad> ends the middle (stop_type {r.get('stop_type')}, {r.get('content')!r})")

# --- OpenAI's completions "suffix": the same FIM prompt, the prompt before the gap -----------------
fim = {"input_prefix": prefix, "input_suffix": suffix, "n_predict": 6, "temperature": 0}
st, a = infill(fim)
st2, b = srv.post("/v1/completions", {"prompt": prefix, "suffix": suffix, "max_tokens": 6,
                                      "temperature": 0}, status=True)
check(st == 200 and st2 == 200 and b["choices"][0]["text"] == a["content"]
      and b["usage"]["prompt_tokens"] == a["tokens_evaluated"],
      f"/v1/completions with suffix = /infill's middle ({b['choices'][0]['text']!r}, "
      f"{b['usage']['prompt_tokens']} prompt tokens)")
for body, what in [({"prompt": "x", "suffix": "y", "echo": True}, "echo"),
                   ({"prompt": [1, 2], "suffix": "y"}, "suffix"),
                   ({"prompt": "x", "suffix": 3}, "suffix")]:
    st, r = srv.post("/v1/completions", body, status=True)
    check(st == 400 and what in r["error"]["message"], f"/v1/completions {body}: 400 naming {what}")
st, r = srv.post("/completion", {"prompt": "x", "suffix": "y"}, status=True)
check(st == 400 and "/infill" in r["error"]["message"], "/completion with suffix: 400 pointing to /infill")

# --- refusals ----------------------------------------------------------------------------
for body, what in [({"input_suffix": "x"}, "input_prefix"),
                   ({"input_prefix": "x"}, "input_suffix"),
                   ({"input_prefix": "x", "input_suffix": "y", "prompt": [1, 2]}, "prompt"),
                   ({"input_prefix": "x", "input_suffix": "y", "input_extra": [{"filename": "f"}]},
                    "input_extra[0].text"),
                   ({"input_prefix": "x", "input_suffix": "y", "echo": True}, "echo")]:
    st, r = infill(body)
    check(st == 400 and what in r["error"]["message"] and r["error"]["type"] == "invalid_request_error",
          f"400 naming {what} ({r['error']['message'] if st != 200 else 200})")
sys.exit(1 if serve_client.failed else 0)
