#!/usr/bin/env python3
"""serve-tools.py: tool calls through `faultline serve` (tests/test-serve.sh).

POST /apply-template renders chat requests with tools, assistant tool calls
and tool results; each prompt must equal what Qwen3's own chat template
(tests/data/templates/Qwen3.jinja, the model's Jinja, rendered by jinja2 as
Hugging Face's apply_chat_template does) makes of the same conversation.
A named tool_choice ends the prompt with the call's opening.
usage: serve-tools.py BASE_URL KEY"""
import json
import os
import sys
import urllib.request

import jinja2

base, key = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))


def post(path, body):
    req = urllib.request.Request(base.rsplit("/v1", 1)[0] + path, data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + key,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def tojson(x, indent=None, separators=None, sort_keys=False):
    # Hugging Face's tojson filter
    return json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
                      sort_keys=sort_keys)


env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
env.filters["tojson"] = tojson
template = env.from_string(open(os.path.join(here, "data", "templates", "Qwen3.jinja")).read())

weather = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city, now (°C).",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}
clock = {"type": "function", "function": {"name": "get_time", "parameters": {}}}
call = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
call2 = {"id": "call_2", "type": "function",
         "function": {"name": "get_time", "arguments": "{}"}}
cases = {
    "tools, a system turn": ([{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": "Weather in Paris?"}], [weather, clock]),
    "tools, no system turn": ([{"role": "user", "content": "What time is it?"}], [clock]),
    "a call, two results": ([{"role": "user", "content": "Paris: weather and time?"},
                             {"role": "assistant", "content": "", "tool_calls": [call, call2]},
                             {"role": "tool", "tool_call_id": "call_1", "content": "22 C, sun"},
                             {"role": "tool", "tool_call_id": "call_2", "content": "14:05"}],
                            [weather, clock]),
    "content before a call": ([{"role": "system", "content": "You help."},
                               {"role": "user", "content": "Weather?"},
                               {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},
                               {"role": "tool", "content": "rain"},
                               {"role": "assistant", "content": "It rains."},
                               {"role": "user", "content": "Thanks. And Rome?"}], [weather]),
    "calls in history, no tools": ([{"role": "user", "content": "Weather?"},
                                    {"role": "assistant", "content": "", "tool_calls": [call]},
                                    {"role": "tool", "content": "rain"}], None),
}
failed = 0
for name, (messages, tools) in cases.items():
    body = {"messages": messages}
    if tools:
        body["tools"] = tools
    got = post("/apply-template", body)["prompt"]
    want = template.render(messages=messages, tools=tools, add_generation_prompt=True)
    if got != want:
        failed += 1
        print("FAIL %s:\n--- faultline\n%s\n--- Qwen3's template\n%s" % (name, got, want))
    else:
        print("ok: %s (%d chars, as Qwen3's template)" % (name, len(got)))

# "tool_choice": "none" leaves the tools out; a named one opens the call
messages = cases["tools, a system turn"][0]
got = post("/apply-template", {"messages": messages, "tools": [weather], "tool_choice": "none"})
want = template.render(messages=messages, tools=None, add_generation_prompt=True)
failed += got["prompt"] != want
print(("ok" if got["prompt"] == want else "FAIL") + ": tool_choice none renders no tools")
got = post("/apply-template", {"messages": messages, "tools": [weather, clock],
                               "tool_choice": {"type": "function", "function": {"name": "get_time"}}})
want = template.render(messages=messages, tools=[weather, clock], add_generation_prompt=True)
want += "<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
failed += got["prompt"] != want
print(("ok" if got["prompt"] == want else "FAIL") + ": a named tool_choice opens its call")
sys.exit(1 if failed else 0)
