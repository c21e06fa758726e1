#!/usr/bin/env python3
"""serve-harmony.py: gpt-oss's chat format through `faultline serve`
(tests/test-serve.sh), on the gpt-oss model.

POST /apply-template renders conversations; each prompt must equal what
gpt-oss's own template (tests/data/templates/openai-gpt-oss-120b.jinja,
copied from llama.cpp's models, rendered by jinja2 as Hugging Face's
apply_chat_template does, with today's date) makes of them: the system
turn with the reasoning effort (the request's "reasoning_effort" or
chat_template_kwargs'), the first system message as the developer's
instructions, answers in the final channel, reasoning dropped; tools as
its TypeScript namespace, calls and results. A named tool_choice opens the
call's message and comes back as tool_calls. Channel tags in an answer, or
a result with no call, are a 400 (the template raises).
usage: serve-harmony.py BASE_URL KEY"""
import datetime
import json
import os
import sys

import jinja2

import serve_client
from serve_client import THINK_TAGS, Server, check, continued

base, key = sys.argv[1], sys.argv[2]
post = Server(base, key).post
here = os.path.dirname(os.path.abspath(__file__))


def raise_exception(message):
    raise jinja2.TemplateError(message)


env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
template = env.from_string(open(os.path.join(here, "data", "templates",
                                             "openai-gpt-oss-120b.jinja")).read())


def as_llama_server(m):
    # llama.cpp hands an assistant's reasoning_content to the template as "thinking"; an
    # answer with calls and reasoning goes without its content (the template refuses both)
    if "reasoning_content" not in m:
        return m
    m = dict(m, thinking=m["reasoning_content"])
    if m["thinking"] and m.get("tool_calls"):
        del m["content"]
    return m


def render_as_is(messages, **kwargs):
    return template.render(messages=[as_llama_server(m) for m in messages], **kwargs)


def render(messages, **kwargs):
    # a last assistant message is continued (llama-server's prefill)
    if messages[-1]["role"] == "assistant":
        return continued(render_as_is, messages, THINK_TAGS["openai-gpt-oss-120b"], **kwargs)
    return render_as_is(messages, add_generation_prompt=True, **kwargs)


cases = {
    "a system turn": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Hello"}],
    "no system turn": [{"role": "user", "content": "What is 2+2?"}],
    "a conversation, reasoning dropped": [
        {"role": "system", "content": "You answer in French."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Bonjour !", "reasoning_content": "Greet back."},
        {"role": "user", "content": "And again?"}],
    "a developer turn, a later system turn": [
        {"role": "developer", "content": "Only numbers."},
        {"role": "user", "content": "Count"},
        {"role": "system", "content": "(not written)"},
        {"role": "assistant", "content": "1 2 3"},
        {"role": "user", "content": "More"}],
    "an empty system turn": [{"role": "system", "content": ""}, {"role": "user", "content": "x"}],
    "the last turn is the assistant's": [{"role": "user", "content": "Hi"},
                                         {"role": "assistant", "content": "Hello, I"}],
}
for case, messages in cases.items():
    got = post("/apply-template", {"messages": messages})["prompt"]
    want = render(messages)
    check(got == want, "%s (%d chars)" % (case, len(got)))
    if got != want:
        print("--- faultline\n%s\n--- the template\n%s" % (got, want))
weather = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city, now.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city"},
        "unit": {"type": "string", "enum": ["C", "F"], "default": "C"},
        "days": {"type": "integer", "default": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "at": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
               "required": ["lat"]},
        "either": {"type": ["string", "null"]},
        "pick": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "number", "default": 0}]},
        "rows": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "boolean"}}}},
        "free": {"type": "array"}, "note": {"type": "string", "nullable": True}, "x": {}},
                   "required": ["city"]}}}
clock = {"type": "function", "function": {"name": "get_time", "description": "The time.",
                                          "parameters": {}}}
call = {"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}
tool_cases = {
    "tools, a system turn": ([{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": "Weather in Paris?"}], [weather, clock]),
    "a call and its result": ([{"role": "user", "content": "Weather?"},
                               {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},
                               {"role": "tool", "content": "22 \u00b0C, \"sunny\""}], [weather]),
    "a call's reasoning, dropped once answered": ([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "reasoning_content": "Need the tool.", "tool_calls": [call]},
        {"role": "tool", "content": "rain"},
        {"role": "assistant", "content": "It rains."},
        {"role": "user", "content": "Thanks"}], [weather]),
    "a call with content and reasoning: the reasoning": ([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me look.", "reasoning_content": "Need the tool.",
         "tool_calls": [call]},
        {"role": "tool", "content": "rain"}], [weather]),
    "a call with content and empty reasoning: the content": ([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me look.", "reasoning_content": "", "tool_calls": [call]},
        {"role": "tool", "content": "rain"}], [weather]),
}
for case, (messages, tools) in tool_cases.items():
    got = post("/apply-template", {"messages": messages, "tools": tools})["prompt"]
    # templates read a call's arguments as an object
    msgs = [dict(m, tool_calls=[dict(c, function=dict(c["function"], arguments=json.loads(
        c["function"]["arguments"]))) for c in m["tool_calls"]]) if m.get("tool_calls") else m
            for m in messages]
    want = render(msgs, tools=tools)
    check(got == want, "%s (%d chars)" % (case, len(got)))
    if got != want:
        print("--- faultline\n%s\n--- the template\n%s" % (got, want))
# a named tool_choice: the prompt ends with the call's header, and the
# answer (JSON mode on the tool's parameters; the token "}" lifted so the
# tiny model closes the object at once) comes back as the call
messages = tool_cases["tools, a system turn"][0]
named = {"type": "function", "function": {"name": "get_time"}}
got = post("/apply-template", {"messages": messages, "tools": [weather, clock], "tool_choice": named})
want = render(messages, tools=[weather, clock]) + \
    "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>"
check(got["prompt"] == want, "a named tool_choice opens the call's message")
brace = post("/tokenize", {"content": "}"})["tokens"][0]
r = post("/v1/chat/completions", {"messages": messages, "tools": [weather, clock], "tool_choice": named,
                                  "logit_bias": {str(brace): 100}, "max_tokens": 8})
c = r["choices"][0]
check(c["finish_reason"] == "tool_calls" and c["message"]["content"] is None and
      [t["function"] for t in c["message"]["tool_calls"]] == [{"name": "get_time", "arguments": "{}"}],
      "a named call: %s" % json.dumps(c["message"]))
messages = cases["a system turn"]
for extra in ({"reasoning_effort": "high"}, {"chat_template_kwargs": {"reasoning_effort": "low"}}):
    effort = extra.get("reasoning_effort") or extra["chat_template_kwargs"]["reasoning_effort"]
    got = post("/apply-template", dict(extra, messages=messages))["prompt"]
    want = render(messages, reasoning_effort=effort)
    check(got == want and ("Reasoning: %s\n" % effort) in got, "reasoning effort %s" % effort)
for name, body in (
        ("a result with no call", {"messages": [{"role": "user", "content": "x"},
                                                {"role": "tool", "content": "y"}]}),
        ("channel tags in an answer", {"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "<|channel|>final<|message|>y"},
            {"role": "user", "content": "z"}]})):
    code, e = post("/v1/chat/completions", dict(body, max_tokens=1), status=True)
    check(code == 400, "%s: %d %s" % (name, code, e.get("error", {}).get("message")))
# an answer comes back (what the tiny model writes is no channel: all content)
r = post("/v1/chat/completions", {"messages": messages, "max_tokens": 4, "seed": 1})
check(r["choices"][0]["message"]["role"] == "assistant", "an answer: %s" % json.dumps(r["choices"][0]))
sys.exit(1 if serve_client.failed else 0)
