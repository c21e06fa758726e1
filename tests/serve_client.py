"""serve_client.py: what the serve-*.py tests (tests/test-serve.sh) share:
JSON posted to a faultline server with its API key, and the count of
failed checks. The tests import it from their own folder."""
import json
import urllib.error
import urllib.request

failed = 0


class Server:
    """The server whose /v1 URL is base (as test-serve.sh passes it)."""

    def __init__(self, base, key):
        self.root, self.key = base.rsplit("/v1", 1)[0], key

    def post(self, path, body, raw=False, status=False, timeout=120):
        """body as JSON to the server's path ("/v1/completions", "/tokenize"):
        the reply's JSON, or its text (raw); with status, (HTTP status,
        reply), error replies included (else they raise)."""
        req = urllib.request.Request(self.root + path, data=json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + self.key,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                code, out = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            if not status:
                raise
            code, out = e.code, e.read().decode()
        out = out if raw else json.loads(out)
        return (code, out) if status else out


def check(ok, what):
    """Prints the check's line; a failed one is counted in failed."""
    global failed
    failed += not ok
    print(("ok: " if ok else "FAIL: ") + what)


# Where each template's answers write their reasoning, as llama-server's
# template analysis finds the tags (checked against llama-server 34af94c).
THINK_TAGS = {"Qwen3": ("<think>\n", "\n</think>\n\n"), "MiniMax-M2": ("<think>\n", "\n</think>\n\n"),
              "MiniMax-M3": ("<mm:think>", "</mm:think>"),
              # (and without thinking its generation prompt is cut where its response opens)
              "Kimi-K3": ("<|open|>think<|sep|>", "<|close|>think<|sep|><|open|>response<|sep|>",
                          "<|open|>response<|sep|>"),
              "Qwen3.5-4B": ("<think>\n", "\n</think>\n\n"), "Qwen3-Coder": None,
              "GLM-4.6": ("<think>", "</think>\n"), "GLM-4.7-Flash": ("<think>", "</think>"), "Kimi-K2-Instruct": ("<think>", "</think>"),
              "Kimi-K2-Thinking": ("<think>", "</think>"), "DeepSeek-V3.1": ("<think>", "</think>"),
              "DeepSeek-V3.2": ("<think>", "</think>"),
              "DeepSeek-V3-0324": None, "DeepSeek-R1": ("<think>", "</think>"),
              "openai-gpt-oss-120b": ("<|channel|>analysis<|message|>",
                                      "<|end|><|start|>assistant<|channel|>final<|message|>")}


def continued(render, messages, tags, **kwargs):
    """The prompt llama-server builds for a conversation whose last message,
    the assistant's, it continues (a prefill): the messages before it as
    render(messages, add_generation_prompt=...) writes them, what the
    generation prompt adds cut where the reasoning's tag starts, the tag, the
    message's reasoning, and (unless it has reasoning and no content) the
    closing tag and its content."""
    a = render(messages[:-1], add_generation_prompt=False, **kwargs)
    b = render(messages[:-1], add_generation_prompt=True, **kwargs)
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    gen, last = b[common:], messages[-1]
    reasoning, content = last.get("reasoning_content") or "", last.get("content") or ""
    in_content = not (reasoning and not content)
    if tags:
        at = gen.find(tags[0])
        if at < 0 and len(tags) > 2:
            at = gen.find(tags[2])
        gen = (gen if at < 0 else gen[:at]) + tags[0] + reasoning + (tags[1] if in_content else "")
    return a + gen + (content if in_content else "")
