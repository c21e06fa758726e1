#!/usr/bin/env python3
"""serve-tools.py: tool calls through `faultline serve` (tests/test-serve.sh).

POST /apply-template renders chat requests with tools, assistant tool calls
and tool results; each prompt must equal what the model family's own chat
template (tests/data/templates/TEMPLATE.jinja: Qwen3's for chatml, Qwen3.5's
for qwen3.5, Qwen3-Coder's for qwen3-coder, GLM-4.6's for glm-4.5, GLM-4.7-Flash's for glm-4.7,
MiniMax-M2's for minimax-m2, MiniMax-M3's for minimax-m3, Kimi-K3's for kimi-k3, DeepSeek V3.2's for deepseek-v3.2;
rendered by jinja2 as Hugging
Face's apply_chat_template does; Kimi K2's Instruct and Thinking ones and
DeepSeek V3.1's on a model told --chat-template kimi-k2-instruct /
kimi-k2-thinking / deepseek-v3.1, DeepSeek V3-0324's and R1's told
deepseek-v3-0324 / deepseek-r1) makes of the same conversation. A named
tool_choice ends the prompt with the call's opening; on GLM and MiniMax, a
named call comes back as tool_calls, and a call the model writes in its
format is read back.
usage: serve-tools.py BASE_URL KEY TEMPLATE"""
import json
import os
import sys

import jinja2

from serve_client import THINK_TAGS, Server, continued

base, key, name = sys.argv[1], sys.argv[2], sys.argv[3]
post = Server(base, key).post
here = os.path.dirname(os.path.abspath(__file__))


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Hugging Face's tojson filter
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                         extensions=["jinja2.ext.loopcontrols"])  # as Hugging Face's
env.filters["tojson"] = tojson
env.filters["from_json"] = json.loads  # DeepSeek V3.2's, for arguments given as text


def raise_exception(message):
    raise jinja2.TemplateError(message)


env.globals["raise_exception"] = raise_exception
template = env.from_string(open(os.path.join(here, "data", "templates", name + ".jinja")).read())
NS = "]<]minimax[>["  # MiniMax-M3's namespace token
m3 = name == "MiniMax-M3"
k3 = name == "Kimi-K3"
# the call's opening a named tool_choice leaves at the prompt's end
kimi = "<|tool_calls_section_begin|><|tool_call_begin|>functions.%s:0<|tool_call_argument_begin|>"
fenced = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>%s\n```json\n"
opening = {"Qwen3": "<tool_call>\n{\"name\": \"%s\", \"arguments\": ",
           "GLM-4.6": "\n<think></think>\n<tool_call>%s\n",
           "MiniMax-M2": "</think>\n\n<minimax:tool_call>\n<invoke name=\"%s\">\n",
           "MiniMax-M3": "</mm:think>%s<tool_call>\n%s<invoke name=\"%%s\">" % (NS, NS),
           "Kimi-K3": "<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>"
                      "<|open|>tools<|sep|><|open|>call tool=\"%s\" index=\"1\"<|sep|>",
           "Kimi-K2-Instruct": kimi, "Kimi-K2-Thinking": "<think></think>" + kimi,
           "DeepSeek-V3.1": "</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>%s<｜tool▁sep｜>",
           "Qwen3.5-4B": "\n</think>\n\n<tool_call>\n<function=%s>\n",
           "Qwen3-Coder": "<tool_call>\n<function=%s>\n",
           "GLM-4.7-Flash": "</think><tool_call>%s",
           "DeepSeek-V3-0324": fenced, "DeepSeek-R1": "</think>" + fenced,
           "DeepSeek-V3.2": "</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"%s\">\n"}[name]
xml = name in ("Qwen3.5-4B", "Qwen3-Coder")  # Qwen's XML calls: <function=NAME> <parameter=K>
# llama-server passes enable_thinking (true unless turned off); DeepSeek
# V3.1's template reads it (undefined: no thinking), the others' default to it
thinking_default = {"enable_thinking": True} if name in ("DeepSeek-V3.1", "DeepSeek-V3.2") else {}


def render_as_is(messages, tools=None, **kwargs):
    # templates read a call's arguments as an object (GLM's iterates them);
    # a request carries them as JSON text, which DeepSeek V3-0324's adds to
    # strings (llama-server passes it the text)
    msgs = [dict(m, tool_calls=[dict(c, function=dict(c["function"], arguments=json.loads(
        c["function"]["arguments"]))) for c in m["tool_calls"]]) if m.get("tool_calls") and
            name != "DeepSeek-V3-0324" else m for m in messages]
    # the tools as llama-server passes them: name, description ("" when none) and
    # parameters ({} when none), other keys left out
    tools = tools and [{"type": "function", "function": {
        "name": t["function"]["name"], "description": t["function"].get("description", ""),
        "parameters": t["function"].get("parameters", {})}} for t in tools]
    return template.render(messages=msgs, tools=tools, **dict(thinking_default, **kwargs))


def render(messages, tools, **kwargs):
    # MiniMax-M3's template does not read enable_thinking: faultline takes it
    # as its thinking_mode "disabled"
    if m3 and kwargs.get("enable_thinking") is False:
        kwargs = dict(kwargs, thinking_mode="disabled")
    # nor Kimi K3's: there it is its own "thinking" kwarg
    if k3 and kwargs.get("enable_thinking") is False and "thinking" not in kwargs:
        kwargs = dict(kwargs, thinking=False)
    # a last assistant message is continued (llama-server's prefill)
    if messages[-1]["role"] == "assistant":
        return continued(lambda m, **k: render_as_is(m, tools, **k), messages, THINK_TAGS.get(name),
                         **kwargs)
    return render_as_is(messages, tools, add_generation_prompt=True, **kwargs)

weather = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city, now (°C).",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer", "maximum": 1e21},
        "units": {"enum": ["C", "F"], "default": "C"}, "tolerance": {"type": "number", "minimum": 0.1}},
                   "required": ["city"]}}}
clock = {"type": "function", "function": {"name": "get_time", "parameters": {}}}
call = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather",
                     "arguments": "{\"city\": \"Paris\", \"days\": 3, \"tolerance\": 0.1, \"hours\": [6, 12.5]}"}}
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
    "reasoning in history and in a tool loop": ([
        {"role": "user", "content": "First?"},
        {"role": "assistant", "content": "<think>\nplan A\n</think>\n\nAnswer A."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "<think>look it up</think>", "tool_calls": [call]},
        {"role": "tool", "content": "rain"}], [weather]),
    "blank reasoning after the last user turn": ([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "<think> </think>Checking.", "tool_calls": [call]},
        {"role": "tool", "content": "rain"}], [weather]),
    "an answer ending in a newline": ([{"role": "user", "content": "Hi"},
                                       {"role": "assistant", "content": "Hello.\n"},
                                       {"role": "user", "content": "Again?"}], None),
    "the last turn is the assistant's": ([{"role": "user", "content": "Hi"},
                                          {"role": "assistant", "content": "Hello, I"}], None),
    "calls in history, no tools": ([{"role": "user", "content": "Weather?"},
                                    {"role": "assistant", "content": "", "tool_calls": [call]},
                                    {"role": "tool", "content": "rain"}], None),
    # what llama-server answered with, sent back: reasoning_content in place of
    # a <think> in content (content then taken whole, even with a </think>)
    "reasoning_content in history": ([
        {"role": "user", "content": "First?"},
        {"role": "assistant", "content": "Answer A.", "reasoning_content": "plan A"},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "\nLet me look.\n", "reasoning_content": "\n look it up \n",
         "tool_calls": [call]},
        {"role": "tool", "content": "rain"},
        {"role": "assistant", "content": "x</think>\nRain.", "reasoning_content": "so: rain"},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You are welcome.", "reasoning_content": ""}], [weather]),
}
failed = 0


def same_prompt(label, body, want, shown=None):
    """Whether /apply-template renders body as want (the template's own render); says
    so in a line ending with `shown` (default: the prompt's length), both on a failure."""
    global failed
    got = post("/apply-template", body)["prompt"]
    failed += got != want
    print(("ok" if got == want else "FAIL") + ": %s (%s)" %
          (label, "%d chars" % len(got) if shown is None else shown(got)))
    if got != want:
        print("--- faultline\n%s\n--- %s's template\n%s" % (got, name, want))


for case, (messages, tools) in cases.items():
    body = {"messages": messages}
    if tools:
        body["tools"] = tools
    same_prompt("%s, as %s's template" % (case, name), body, render(messages, tools))

# "chat_template_kwargs": {"enable_thinking": false} (or "reasoning_effort":
# "none") as the template reads enable_thinking=False
for case in ("tools, a system turn", "reasoning in history and in a tool loop",
             "the last turn is the assistant's"):
    messages, tools = cases[case]
    want = render(messages, tools, enable_thinking=False)
    for extra in ({"chat_template_kwargs": {"enable_thinking": False}}, {"reasoning_effort": "none"}):
        body = dict(messages=messages, **extra)
        if tools:
            body["tools"] = tools
        same_prompt("%s, %s" % (case, list(extra)[0]), body, want)
# a last assistant message continued (llama-server's prefill): in its reasoning when it
# has no content, explicitly with continue_final_message; two at the end are a 400; a
# prompt without the generation prompt; and the answer goes on from the prefill: the
# same text as a completion of that prompt
hi = {"role": "user", "content": "Hi"}
for case, body in (
        ("a prefill's reasoning", {"messages": [hi, {"role": "assistant", "content": "",
                                                     "reasoning_content": "I think"}]}),
        ("a prefill with reasoning", {"messages": [hi, {"role": "assistant", "content": "Sure",
                                                        "reasoning_content": "I think"}]}),
        ("continue_final_message", {"messages": [hi, {"role": "assistant", "content": "Hel",
                                                      "reasoning_content": "R"}],
                                    "continue_final_message": "reasoning_content",
                                    "add_generation_prompt": False})):
    messages = body["messages"]
    if body.get("continue_final_message"):
        messages = messages[:-1] + [dict(messages[-1], content="")]  # its reasoning only
    same_prompt(case, body, render(messages, None))
code, r = post("/apply-template", {"messages": [hi, {"role": "assistant", "content": "A"},
                                                {"role": "assistant", "content": "B"}]}, status=True)
failed += code != 400
print(("ok" if code == 400 else "FAIL") + ": two assistant messages at the end: %d %s" % (code, r))
got = post("/apply-template", {"messages": [hi], "add_generation_prompt": False})["prompt"]
want = render_as_is([hi], add_generation_prompt=False)
failed += got != want
print(("ok" if got == want else "FAIL") + ": add_generation_prompt false (%r)" % got[-40:])
prefill = [hi, {"role": "assistant", "content": "Hello, I"}]
chat = post("/v1/chat/completions", {"messages": prefill, "max_tokens": 8, "temperature": 0,
                                     "reasoning_format": "none"})
text = post("/v1/completions", {"prompt": render(prefill, None), "max_tokens": 8,
                                "temperature": 0})["choices"][0]["text"]
ok = chat["choices"][0]["message"]["content"] == text and \
    chat["usage"]["completion_tokens"] == 8
failed += not ok
print(("ok" if ok else "FAIL") + ": a prefilled answer goes on from it: %r" % text)

# DeepSeek V3.1's own "thinking" kwarg, which its template reads before enable_thinking
# (V3.2's too)
if name in ("DeepSeek-V3.1", "DeepSeek-V3.2"):
    messages = cases["tools, a system turn"][0]
    for kw in ({"thinking": False}, {"thinking": True, "enable_thinking": False}):
        same_prompt("chat_template_kwargs %s" % kw, {"messages": messages, "chat_template_kwargs": kw},
                    render(messages, None, **kw), lambda got: repr(got[-30:]))

# GLM-4.7's "clear_thinking": false keeps every answer's reasoning (its preserved thinking)
if name == "GLM-4.7-Flash":
    for case in ("reasoning in history and in a tool loop", "reasoning_content in history"):
        messages, tools = cases[case]
        body = {"messages": messages, "chat_template_kwargs": {"clear_thinking": False}}
        if tools:
            body["tools"] = tools
        same_prompt("%s, clear_thinking false" % case, body,
                    render(messages, tools, clear_thinking=False))

# "tool_choice": "none" still describes the tools (as llama-server does; no call is read
# back); a named one opens the call
messages = cases["tools, a system turn"][0]
got = post("/apply-template", {"messages": messages, "tools": [weather], "tool_choice": "none"})
want = render(messages, [weather])
failed += got["prompt"] != want
print(("ok" if got["prompt"] == want else "FAIL") + ": tool_choice none renders the tools")
got = post("/apply-template", {"messages": messages, "tools": [weather, clock],
                               "tool_choice": {"type": "function", "function": {"name": "get_time"}}})
want = render(messages, [weather, clock]) + opening % "get_time"
failed += got["prompt"] != want
print(("ok" if got["prompt"] == want else "FAIL") + ": a named tool_choice opens its call")
# ... after the empty reasoning that enable_thinking=False already wrote
got = post("/apply-template", {"messages": messages, "tools": [weather, clock],
                               "chat_template_kwargs": {"enable_thinking": False},
                               "tool_choice": {"type": "function", "function": {"name": "get_time"}}})
want = render(messages, [weather, clock], enable_thinking=False) + \
    (opening.replace("<think></think>\n", "") if name == "GLM-4.6" else
     opening.replace("</think>", "") if name in ("DeepSeek-V3.1", "DeepSeek-V3.2", "GLM-4.7-Flash") else
     opening.replace("\n</think>\n\n", "") if name == "Qwen3.5-4B" else
     opening.replace("</mm:think>", "") if m3 else
     opening.replace("<|close|>think<|sep|><|open|>response<|sep|>", "") if k3 else opening) % "get_time"
failed += got["prompt"] != want
print(("ok" if got["prompt"] == want else "FAIL") + ": a named tool_choice without thinking")
if got["prompt"] != want:
    print("--- faultline\n%s\n--- %s's template\n%s" % (got["prompt"], name, want))
# GLM's and MiniMax's forced call: the model writes the pairs and closes the
# block; here '<' lifted and a stop string end the answer before any pair,
# so the call comes back with no arguments (the block closed for it: the
# model ended)
glm = name in ("GLM-4.6", "GLM-4.7-Flash")
dsml = name == "DeepSeek-V3.2"
if glm or name == "MiniMax-M2" or xml or dsml or m3 or k3:
    first = "]" if m3 else "<"  # what every pair and close starts with
    lt = post("/tokenize", {"content": first})["tokens"][0]
    r = post("/v1/chat/completions", {"messages": messages, "tools": [weather, clock],
                                      "tool_choice": {"type": "function", "function": {"name": "get_time"}},
                                      "logit_bias": {str(lt): 100}, "stop": [first], "max_tokens": 4})
    c = r["choices"][0]
    ok = c["finish_reason"] == "tool_calls" and c["message"]["content"] is None and \
        [t["function"] for t in c["message"]["tool_calls"]] == [{"name": "get_time", "arguments": "{}"}]
    failed += not ok
    print(("ok" if ok else "FAIL") + ": a named call: " + json.dumps(c["message"]))
# ... and held to the tool's parameters by a grammar (api/tool-grammar.c): whatever the
# random model writes at temperature 1, a named get_weather call starts with its required
# city, and "required" with one of the two tools; a cut answer (max_tokens) shows as content
if glm or name == "MiniMax-M2" or xml or dsml or m3 or k3:
    nl = "\n" if name == "GLM-4.6" else ""  # GLM-4.7 writes its pairs without newlines
    named = "<arg_key>city</arg_key>%s<arg_value>" % nl if glm else "<parameter=city>\n" if xml else \
        '<｜DSML｜parameter name="city" string="true">' if dsml else NS + "<city>" if m3 else \
        '<|open|>argument key="city" type="string"<|sep|>' if k3 else \
        '<parameter name="city">'
    starts = ("get_weather%s<arg_key>city</arg_key>" % nl, "get_time" + nl) if glm else \
        ("get_weather>\n<parameter=city>\n", "get_time>\n") if xml else \
        ('<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">',
         '<｜DSML｜invoke name="get_time">\n') if dsml else \
        (NS + '<invoke name="get_weather">' + NS + "<city>", NS + '<invoke name="get_time">') if m3 else \
        ('get_weather" index="1"<|sep|><|open|>argument key="city"', 'get_time" index="1"<|sep|>') \
        if k3 else \
        ('<invoke name="get_weather">\n<parameter name="city">', '<invoke name="get_time">\n')
    for seed in range(3):
        for choice, want in (({"type": "function", "function": {"name": "get_weather"}}, (named,)),
                             ("required", starts)):
            r = post("/v1/chat/completions", {"messages": messages, "tools": [weather, clock],
                                              "tool_choice": choice, "temperature": 1.0,
                                              "seed": seed, "max_tokens": 40})
            c = r["choices"][0]
            text = c["message"]["content"] or ""
            calls = c["message"].get("tool_calls") or []
            ok = (c["finish_reason"] == "length" and  # the cut may come inside the opening
                  any(text.startswith(w) or w.startswith(text) for w in want)) or \
                (c["finish_reason"] == "tool_calls" and calls and
                 (calls[0]["function"]["name"] == "get_time" or
                  "city" in json.loads(calls[0]["function"]["arguments"])))
            failed += not ok
            print(("ok" if ok else "FAIL") + ": a forced call held to the parameters (%s, seed %d): %r"
                  % (json.dumps(choice)[:30], seed, (text or json.dumps(calls))[:60]))
# Kimi K2's "required": after the prompt's `functions.`, one of the tools' names and its index
# (DeepSeek V3.1's: after its <｜tool▁call▁begin｜>, a name and <｜tool▁sep｜>; a grammar: the
# random model could write anything else)
deepseek_fenced = name in ("DeepSeek-V3-0324", "DeepSeek-R1")
if name.startswith("Kimi-K2") or name == "DeepSeek-V3.1" or deepseek_fenced:
    n_calls = sum(len(m.get("tool_calls") or []) for m in messages)
    for seed in range(3):
        r = post("/v1/chat/completions", {"messages": messages, "tools": [weather, clock],
                                          "tool_choice": "required", "temperature": 1.0,
                                          "seed": seed, "max_tokens": 40})
        c = r["choices"][0]
        text = c["message"]["content"] or ""
        calls = c["message"].get("tool_calls") or []
        want = ("get_weather:%d<|tool_call_argument_begin|>" % n_calls,
                "get_time:%d<|tool_call_argument_begin|>" % n_calls) if name.startswith("Kimi") \
            else ("get_weather<｜tool▁sep｜>", "get_time<｜tool▁sep｜>") if name == "DeepSeek-V3.1" \
            else ("get_weather\n```json\n", "get_time\n```json\n")
        ok = (c["finish_reason"] == "length" and
              any(text.startswith(w) or w.startswith(text) for w in want)) or \
            (c["finish_reason"] == "tool_calls" and calls and
             calls[0]["function"]["name"] in ("get_weather", "get_time"))
        failed += not ok
        print(("ok" if ok else "FAIL") + ": a required call, one of the tools (seed %d): %r"
              % (seed, (text or json.dumps(calls))[:70]))
# DeepSeek V3-0324's and R1's named call: the answer is the arguments, held to the tool's
# parameters (JSON mode), read back as the call; with '}' lifted the object closes at once
if deepseek_fenced:
    brace = post("/tokenize", {"content": "}"})["tokens"][0]
    r = post("/v1/chat/completions", {"messages": messages, "tools": [weather, clock],
                                      "tool_choice": {"type": "function", "function": {"name": "get_time"}},
                                      "logit_bias": {str(brace): 100}, "max_tokens": 8})
    c = r["choices"][0]
    ok = c["finish_reason"] == "tool_calls" and c["message"]["content"] is None and \
        [t["function"] for t in c["message"]["tool_calls"]] == [{"name": "get_time", "arguments": "{}"}]
    failed += not ok
    print(("ok" if ok else "FAIL") + ": a named call: " + json.dumps(c["message"]))
    for seed in range(3):
        r = post("/v1/chat/completions", {"messages": messages, "tools": [weather, clock],
                                          "tool_choice": {"type": "function",
                                                          "function": {"name": "get_weather"}},
                                          "temperature": 1.0, "seed": seed, "max_tokens": 60})
        c = r["choices"][0]
        calls = c["message"].get("tool_calls") or []
        ok = c["finish_reason"] == "length" or (
            c["finish_reason"] == "tool_calls" and len(calls) == 1 and
            calls[0]["function"]["name"] == "get_weather" and
            "city" in json.loads(calls[0]["function"]["arguments"]))
        failed += not ok
        print(("ok" if ok else "FAIL") + ": a named call read back (seed %d): %s %r"
              % (seed, c["finish_reason"], (c["message"]["content"] or json.dumps(calls))[:70]))
# a result with no call before it: the template raises (V3.2's reads a message that is not
# there), the server says 400
if name in ("MiniMax-M2", "MiniMax-M3", "DeepSeek-V3.2"):
    code, _ = post("/apply-template", {"messages": [{"role": "user", "content": "x"},
                                                    {"role": "tool", "content": "rain"}]},
                   status=True)
    failed += code != 400
    print(("ok" if code == 400 else "FAIL") + ": a result with no call: %d" % code)
# MiniMax-M3's own kwarg, thinking_mode (the system turn says it; "enabled" opens
# <mm:think>, "disabled" writes </mm:think>), its "root" role (the system turn's text,
# a system or developer message after it the developer turn's), and a later system
# message left out as the template leaves it
if m3:
    root = [{"role": "root", "content": "You are M3."}, {"role": "developer", "content": "Be terse."},
            {"role": "user", "content": "Hi"}, {"role": "system", "content": "(not written)"},
            {"role": "assistant", "content": "<mm:think>\nx\n</mm:think>\nHello\n"},
            {"role": "user", "content": "Again"}]
    for mode in ("enabled", "disabled", "adaptive"):
        for case, (messages, tools) in (("tools, a system turn", cases["tools, a system turn"]),
                                        ("a call, two results", cases["a call, two results"]),
                                        ("the root role", (root, None))):
            body = {"messages": messages, "chat_template_kwargs": {"thinking_mode": mode}}
            if tools:
                body["tools"] = tools
            same_prompt("%s, thinking_mode %s" % (case, mode), body,
                        render(messages, tools, thinking_mode=mode), lambda got: repr(got[-24:]))
    code, r = post("/apply-template", {"messages": root, "chat_template_kwargs": {"thinking_mode": "maybe"}},
                   status=True)
    failed += code != 400
    print(("ok" if code == 400 else "FAIL") + ": thinking_mode maybe: %d %s" % (code, r))
# Kimi K3's own kwargs (thinking, thinking_effort), names on messages, results matched to
# their calls by tool_call_id (written in the calls' order, named by them), by order
# without ids, and a result with no name to be found (the template raises: 400)
if k3:
    call_b = {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    call_a = dict(call, id="a")
    loop = [{"role": "system", "name": "ops", "content": "Be brief & \"exact\"."},
            {"role": "user", "name": "ann", "content": "Weather and time?"},
            {"role": "assistant", "content": "", "tool_calls": [call_a, call_b]},
            {"role": "tool", "tool_call_id": "b", "content": "14:05"},
            {"role": "tool", "tool_call_id": "a", "content": "rain"},
            {"role": "user", "content": "And later?"},
            {"role": "assistant", "content": "", "tool_calls": [call_b]},
            {"role": "tool", "content": "15:00"},
            {"role": "tool", "name": "get_weather", "content": "sun"}]
    for kw in ({}, {"thinking": False}, {"thinking_effort": "low"}, {"thinking_effort": "high"},
               {"thinking": False, "thinking_effort": "medium"}, {"thinking_effort": None}):
        body = {"messages": loop, "tools": [weather, clock], "chat_template_kwargs": kw}
        code, got = post("/apply-template", body, status=True)
        want = render(loop, [weather, clock], **kw)
        ok = code == 200 and got["prompt"] == want
        failed += not ok
        print(("ok" if ok else "FAIL") + ": results by id and order, kwargs %s (%d chars)" % (kw, len(want)))
        if not ok:
            print("--- faultline\n%s\n--- %s's template\n%s" % (got, name, want))
    for bad in ({"thinking_effort": "medium"}, {"thinking_effort": 3}):
        code, r = post("/apply-template", {"messages": loop[:2], "chat_template_kwargs": bad}, status=True)
        failed += code != 400
        print(("ok" if code == 400 else "FAIL") + ": %s: %d %s" % (bad, code, r))
    code, r = post("/apply-template", {"messages": [{"role": "user", "content": "x"},
                                                    {"role": "tool", "content": "rain"}]}, status=True)
    failed += code != 400
    print(("ok" if code == 400 else "FAIL") + ": a result with no name to be found: %d" % code)
sys.exit(1 if failed else 0)
