/* tools.c: tools in OpenAI requests and tool calls in their answers
 * (openai.h, request-tools.h). */
#include "api/request-chat.h"
#include "api/request-tools.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text/json-schema.h"
#include "text/tool-calls.h"

static int bad(struct fl_err *err, const char *field, const char *what)
{
    return fl_err_set(err, -EINVAL, "%s: %s", field, what);
}

static int parse_tool(json_t *t, size_t i, struct api_request *r, struct fl_err *err)
{
    char path[32];
    snprintf(path, sizeof(path), "tools[%zu]", i);
    const char *type = fl_json_str(t, "type");
    json_t *f = json_object_get(t, "function");
    if (!json_is_object(t) || !type || strcmp(type, "function") || !json_is_object(f))
        return bad(err, path, "expected {\"type\": \"function\", \"function\": {...}}");
    const char *name = fl_json_str(f, "name");
    if (!name || !fl_tool_name_ok(name, strlen(name)))
        return fl_err_set(err, -EINVAL, "%s.function.name: expected 1-64 letters, digits, "
                          "'_', '-' or '.'", path);
    const json_t *params = json_object_get(f, "parameters");
    if (params && !json_is_object(params) && !json_is_null(params))
        return fl_err_set(err, -EINVAL, "%s.function.parameters: expected an object", path);
    const json_t *desc = json_object_get(f, "description");
    if (desc && !json_is_string(desc))
        return fl_err_set(err, -EINVAL, "%s.function.description: expected a string", path);
    for (size_t j = 0; j < i; j++)
        if (!strcmp(r->tool_names[j], name))
            return fl_err_set(err, -EINVAL, "%s.function.name: \"%s\" is given twice", path, name);
    /* as the template's tojson writes the tool llama-server passes it: the
     * name, the description ("" when absent) and the parameters ({} when
     * absent, as given when null too), other keys ("strict", ...) left out */
    json_t *p = params ? json_incref((json_t *)params) : json_object(); /* o steals it */
    json_t *as_passed = json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function", "function",
                                  "name", name, "description", desc ? json_string_value(desc) : "",
                                  "parameters", p);
    r->tools_json[i] = as_passed ? fl_json_dumps_python(as_passed) : NULL;
    json_decref(as_passed);
    if (!r->tools_json[i])
        return fl_err_set(err, -ENOMEM, "out of memory");
    r->tool_names[i] = name;
    return 0;
}

size_t api_tool_index(const struct api_request *r, const char *name)
{
    size_t i = 0;
    while (i < r->n_tools && strcmp(r->tool_names[i], name))
        i++;
    return i;
}

const json_t *api_tool_function(const struct api_request *r, size_t i)
{
    return json_object_get(json_array_get(json_object_get(r->doc, "tools"), i), "function");
}

size_t api_request_n_calls(const struct api_request *r)
{
    size_t calls = 0;
    for (size_t i = 0; i < r->n_msgs; i++)
        calls += r->msgs[i].n_calls;
    return calls;
}

static int parse_choice(json_t *body, struct api_request *r, struct fl_err *err)
{
    json_t *c = json_object_get(body, "tool_choice");
    const char *s = json_string_value(c);
    if (!c || json_is_null(c) || (s && !strcmp(s, "auto")))
        r->tool_choice = API_TOOL_AUTO;
    else if (s && !strcmp(s, "none"))
        r->tool_choice = API_TOOL_NONE;
    else if (s && !strcmp(s, "required"))
        r->tool_choice = API_TOOL_REQUIRED;
    else if (json_is_object(c) && (r->tool_name = fl_json_str(json_object_get(c, "function"), "name")))
        r->tool_choice = API_TOOL_NAMED;
    else
        return bad(err, "tool_choice", "expected \"none\", \"auto\", \"required\" or "
                   "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    if (r->tool_choice >= API_TOOL_REQUIRED && !r->n_tools)
        return bad(err, "tool_choice", "asks for a call, and no tools are given");
    if (r->tool_choice == API_TOOL_REQUIRED && r->n_tools == 1) {
        r->tool_choice = API_TOOL_NAMED;
        r->tool_name = r->tool_names[0];
    }
    if (r->tool_choice == API_TOOL_NAMED && api_tool_index(r, r->tool_name) == r->n_tools) {
        /* a name that is no tool name is not written back (one line) */
        return fl_tool_name_ok(r->tool_name, strlen(r->tool_name))
                   ? fl_err_set(err, -EINVAL, "tool_choice: no tool is named \"%s\"", r->tool_name)
                   : bad(err, "tool_choice", "names no tool (not a function name)");
    }
    return 0;
}

int api_parse_tools(json_t *body, struct api_request *r, struct fl_err *err)
{
    json_t *t = json_object_get(body, "tools");
    if (t && !json_is_null(t) && !json_is_array(t))
        return bad(err, "tools", "expected an array");
    const size_t n = json_is_array(t) ? json_array_size(t) : 0;
    if (n > API_MAX_TOOLS)
        return fl_err_set(err, -EINVAL, "tools: more than %d", API_MAX_TOOLS);
    if (n && (!(r->tools_json = calloc(n, sizeof(*r->tools_json))) ||
              !(r->tool_names = calloc(n, sizeof(*r->tool_names)))))
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int rc = parse_tool(json_array_get(t, i), i, r, err);
        r->n_tools = i + (rc ? 0 : 1);
        if (rc)
            return rc;
    }
    int rc = parse_choice(body, r, err);
    const json_t *p = json_object_get(body, "parallel_tool_calls");
    if (!rc && p && !json_is_null(p) && !json_is_boolean(p))
        rc = bad(err, "parallel_tool_calls", "expected true or false");
    r->one_call = json_is_false(p);
    if (!rc && (r->json_object || r->json_schema) && n && r->tool_choice != API_TOOL_NONE)
        rc = bad(err, "response_format", "JSON mode or a JSON schema and tools cannot be asked "
                 "together");
    return rc;
}

/* One call: {"function": {"name", "arguments": a string or an object}}. */
static int parse_call(json_t *c, const char *path, size_t j, struct fl_chat_tool_call *out,
                      struct fl_err *err)
{
    json_t *f = json_object_get(c, "function");
    json_t *a = json_object_get(f, "arguments");
    out->name = fl_json_str(f, "name");
    out->id = fl_json_str(c, "id");
    if (!json_is_object(c) || !json_is_object(f) || !out->name)
        return fl_err_set(err, -EINVAL, "%s.tool_calls[%zu]: expected {\"type\": \"function\", "
                          "\"function\": {\"name\", \"arguments\"}}", path, j);
    if (json_is_object(a)) { /* written as the template would: its tojson */
        char *s = fl_json_dumps_python(a);
        if (!s || json_object_set_new(f, "arguments", json_string(s))) {
            free(s);
            return fl_err_set(err, -ENOMEM, "out of memory");
        }
        free(s);
        a = json_object_get(f, "arguments");
    }
    if (!(out->arguments = json_string_value(a)))
        return fl_err_set(err, -EINVAL, "%s.tool_calls[%zu].function.arguments: expected a "
                          "string (JSON) or an object", path, j);
    /* the templates take the object it holds (llama-server too: "Failed to parse tool call
     * arguments as JSON") */
    json_t *v = json_loads(out->arguments, JSON_DECODE_ANY, NULL);
    json_decref(v);
    if (!v)
        return fl_err_set(err, -EINVAL, "%s.tool_calls[%zu].function.arguments: not JSON text",
                          path, j);
    return 0;
}

int api_parse_message_calls(json_t *msg, const char *path, struct fl_chat_msg *m,
                            struct fl_err *err)
{
    json_t *calls = json_object_get(msg, "tool_calls");
    if (!calls || json_is_null(calls))
        return 0;
    if (!json_is_array(calls) || strcmp(m->role, "assistant"))
        return fl_err_set(err, -EINVAL, "%s.tool_calls: expected an array, in an assistant "
                          "message", path);
    const size_t n = json_array_size(calls);
    struct fl_chat_tool_call *v = n ? calloc(n, sizeof(*v)) : NULL;
    if (n && !v)
        return fl_err_set(err, -ENOMEM, "out of memory");
    m->calls = v;
    m->n_calls = n;
    for (size_t j = 0; j < n; j++) {
        int rc = parse_call(json_array_get(calls, j), path, j, &v[j], err);
        if (rc)
            return rc;
    }
    return 0;
}

void api_free_tools(struct api_request *r)
{
    for (size_t i = 0; i < r->n_tools; i++)
        free(r->tools_json[i]);
    free(r->tools_json);
    free(r->tool_names);
    for (size_t i = 0; i < r->n_msgs && r->msgs; i++)
        free((void *)r->msgs[i].calls);
}

/* --- the prompt ---------------------------------------------------------------------- */

/* A forced call's own opening inside its block, up to where the model
 * goes on: the name's (name non-NULL) or the bare call's. */
static int call_head(enum fl_chat_format fmt, const char *name, size_t index, char *buf, size_t n)
{
    if (fmt == FL_CHAT_KIMI_K2_INSTRUCT || fmt == FL_CHAT_KIMI_K2_THINKING) /* index: the call's */
        return name ? snprintf(buf, n, "<|tool_call_begin|>functions.%s:%zu"
                               "<|tool_call_argument_begin|>", name, index)
                    : snprintf(buf, n, "<|tool_call_begin|>functions.");
    if (fmt == FL_CHAT_DEEPSEEK_V31)
        return snprintf(buf, n, "<｜tool▁call▁begin｜>%s%s", name ? name : "",
                        name ? "<｜tool▁sep｜>" : "");
    if (fmt == FL_CHAT_DEEPSEEK_V3_0324 || fmt == FL_CHAT_DEEPSEEK_R1)
        return snprintf(buf, n, "<｜tool▁call▁begin｜>function<｜tool▁sep｜>%s%s", name ? name : "",
                        name ? "\n```json\n" : "");
    if (fmt == FL_CHAT_QWEN35 || fmt == FL_CHAT_QWEN3_CODER)
        return name ? snprintf(buf, n, "\n<function=%s>\n", name)
                    : snprintf(buf, n, "\n<function=");
    if (fmt == FL_CHAT_GLM45 || fmt == FL_CHAT_GLM47) /* 4.7 writes no newline after the name */
        return snprintf(buf, n, "%s%s", name ? name : "", name && fmt == FL_CHAT_GLM45 ? "\n" : "");
    if (fmt == FL_CHAT_MINIMAX_M2)
        return name ? snprintf(buf, n, "\n<invoke name=\"%s\">\n", name) : snprintf(buf, n, "\n");
    if (fmt == FL_CHAT_KIMI_K3) /* index: the call's in its message */
        return name ? snprintf(buf, n, "<|open|>call tool=\"%s\" index=\"1\"<|sep|>", name)
                    : snprintf(buf, n, "<|open|>call tool=\"");
    if (fmt == FL_CHAT_MINIMAX_M3)
        return name ? snprintf(buf, n, "\n" FL_MINIMAX_M3_NS "<invoke name=\"%s\">", name)
                    : snprintf(buf, n, "\n");
    if (fmt == FL_CHAT_DEEPSEEK_V32)
        return name ? snprintf(buf, n, "\n<｜DSML｜invoke name=\"%s\">\n", name)
                    : snprintf(buf, n, "\n");
    return name ? snprintf(buf, n, "\n{\"name\": \"%s\", \"arguments\": ", name)
                : snprintf(buf, n, "\n");
}

/* A forced call as the template writes one, up to where the model goes on:
 * its block's opening (text/tool-calls.h), then the call's. */
static int call_opening(enum fl_chat_format fmt, const char *name, size_t index, char *buf,
                        size_t n)
{
    /* gpt-oss's has no block: the answer's header, after the prompt's <|start|>assistant */
    if (fmt == FL_CHAT_GPT_OSS)
        return name ? snprintf(buf, n, "<|channel|>commentary to=functions.%s <|constrain|>json"
                               "<|message|>", name)
                    : snprintf(buf, n, "<|channel|>commentary to=functions.");
    const char *blank = fmt == FL_CHAT_DEEPSEEK_V32 ? "\n\n" : ""; /* V3.2's line before it */
    const int b = snprintf(buf, n, "%s%s%s", blank, fl_tool_calls_block_lead(fmt),
                           fl_tool_calls_block_open(fmt));
    if (b < 0 || (size_t)b >= n)
        return b;
    const int h = call_head(fmt, name, index, buf + b, n - (size_t)b);
    return h < 0 ? h : b + h;
}

/* s after the n bytes of *text: the new length, or -ENOMEM. */
static int append(char **text, int n, const char *s)
{
    const size_t m = strlen(s);
    char *p = realloc(*text, (size_t)n + m + 1);
    if (!p)
        return -ENOMEM;
    memcpy(p + n, s, m + 1);
    *text = p;
    return n + (int)m;
}

int api_render_chat(enum fl_chat_format chat, const struct api_request *r, char **text,
                    const char **why)
{
    /* "tool_choice": "none" still describes the tools, as llama-server does (no call
     * is read back), where the format can */
    const bool tools = r->n_tools && (r->tool_choice != API_TOOL_NONE || fl_chat_has_tools(chat));
    struct fl_chat_opts o;
    int n = api_chat_opts(r, tools, &o, why);
    if (n < 0)
        return n;
    struct fl_chat_msg *msgs = r->msgs;
    if (o.cont != FL_CHAT_CONTINUE_NONE && r->continued) { /* the prefill's own join */
        if (!(msgs = malloc(r->n_msgs * sizeof(*msgs)))) {
            *why = "out of memory";
            return -ENOMEM;
        }
        memcpy(msgs, r->msgs, r->n_msgs * sizeof(*msgs));
        msgs[r->n_msgs - 1].content = json_string_value(r->continued);
    }
    n = fl_chat_render(chat, msgs, r->n_msgs, &o, text);
    if (msgs != r->msgs)
        free(msgs);
    if (n == -ENOTSUP)
        *why = "tools and tool calls need a chat format with a tool-call format here: chatml "
               "(Qwen3), qwen3.5, qwen3-coder, glm-4.5, glm-4.7, minimax-m2, minimax-m3, kimi-k3, "
               "openai-gpt-oss, "
               "kimi-k2-instruct / -thinking, deepseek-v3.1, deepseek-v3.2, deepseek-v3-0324 or "
               "deepseek-r1; "
               "this model's is another";
    else if (n < 0 && chat == FL_CHAT_KIMI_K3 && fl_chat_thinks(&o) && o.thinking_effort &&
             o.thinking_effort[0] && !api_thinking_effort_ok(o.thinking_effort))
        *why = "chat_template_kwargs.thinking_effort: Kimi K3's template takes \"low\", \"high\" "
               "or \"max\" when it thinks";
    else if (n < 0)
        *why = "the messages do not fit the chat format";
    /* an answer held to JSON from its first token: a prompt that opened the
     * reasoning (MiniMax-M2's, DeepSeek V3.1's) closes it first, as a
     * forced call's does */
    const bool opened = n >= 0 && fl_chat_opens_reasoning(chat, r->msgs, r->n_msgs, &o);
    /* MiniMax-M3's answers without reasoning start with a bare </mm:think>
     * (unless its prompt wrote it: thinking_mode "disabled") */
    const bool mm_bare = n >= 0 && chat == FL_CHAT_MINIMAX_M3 && !opened && !o.cont &&
                         fl_chat_minimax_m3_mode(&o) != FL_THINK_MODE_DISABLED;
    const bool gpt_oss = chat == FL_CHAT_GPT_OSS;
    /* a continued message's reasoning closes with the format's own tag
     * (gpt-oss: its analysis message ends and the final one starts) */
    const char *close = o.cont == FL_CHAT_CONTINUE_REASONING ? fl_chat_reasoning_close(chat)
                        : chat == FL_CHAT_MINIMAX_M2        ? "</think>\n\n"
                        : chat == FL_CHAT_MINIMAX_M3        ? "</mm:think>"
                        : chat == FL_CHAT_KIMI_K3 ? "<|close|>think<|sep|><|open|>response<|sep|>"
                        : chat == FL_CHAT_QWEN35 ? "\n</think>\n\n" /* its opening's "<think>\n" */
                                                 : "</think>";
    if ((opened || mm_bare) && (r->json_object || r->json_schema))
        return append(text, n, close);
    if (n < 0 || !tools || r->tool_choice < API_TOOL_REQUIRED)
        return n;
    /* the forced call's opening (after closing the <think> a prompt opened;
     * after a continued message's text, gpt-oss's call in a message of its
     * own; in GLM's assistant turn, after its empty <think>, which the
     * opening holds already without thinking) */
    char open[320];
    const char *head = o.cont && gpt_oss                  ? "<|end|><|start|>assistant"
                       : opened || mm_bare                ? close
                       : o.cont                           ? ""
                       : chat == FL_CHAT_GLM45 ? (o.no_thinking ? "\n" : "\n<think></think>\n")
                       : chat == FL_CHAT_KIMI_K2_THINKING ? "<think></think>"
                                                          : "";
    const int h = snprintf(open, sizeof(open), "%s", head);
    call_opening(chat, r->tool_choice == API_TOOL_NAMED ? r->tool_name : NULL,
                 api_request_n_calls(r), open + h, sizeof(open) - (size_t)h);
    return append(text, n, open);
}

/* --- the answer ---------------------------------------------------------------------- */

void api_tool_reader_init(const struct api_request *req, enum fl_chat_format fmt,
                          struct api_tool_reader *out)
{
    memset(out, 0, sizeof(*out));
    out->fmt = fmt;
    out->one_call = req->one_call;
    if (req->kind != API_CHAT || !req->n_tools || req->tool_choice == API_TOOL_NONE)
        return;
    out->mode = req->tool_choice == API_TOOL_NAMED      ? API_TOOLS_ARGS
                : req->tool_choice == API_TOOL_REQUIRED ? API_TOOLS_CALL
                                                        : API_TOOLS_BLOCKS;
    if (out->mode == API_TOOLS_ARGS)
        snprintf(out->name, sizeof(out->name), "%s", req->tool_name);
    /* a forced call in JSON: the answer is its object (openai.h); gpt-oss's
     * named call too (its arguments), the call among several is not (the
     * model writes the name in the header) */
    out->json = (out->mode != API_TOOLS_BLOCKS && fmt == FL_CHAT_CHATML) ||
                (out->mode == API_TOOLS_ARGS &&
                 (fmt == FL_CHAT_GPT_OSS || fmt == FL_CHAT_KIMI_K2_INSTRUCT ||
                  fmt == FL_CHAT_KIMI_K2_THINKING || fmt == FL_CHAT_DEEPSEEK_V31 ||
                  fmt == FL_CHAT_DEEPSEEK_V3_0324 || fmt == FL_CHAT_DEEPSEEK_R1));
}

size_t api_tool_content_prefix(const struct api_tool_reader *t, const char *text, size_t len)
{
    switch (t->mode) {
    case API_TOOLS_OFF: return len;
    case API_TOOLS_BLOCKS: return fl_tool_calls_content_prefix(t->fmt, text, len);
    default: return 0; /* a forced call is no content until it fails to be one */
    }
}

/* Tool i's "parameters" (a new reference, "type": "object" added when
 * they say no type) if faultline can hold arguments to them, else NULL:
 * the arguments are then any object. */
static json_t *tool_params(const struct api_request *req, size_t i)
{
    json_t *p = json_object_get(api_tool_function(req, i), "parameters");
    struct fl_schema *s;
    if (!json_is_object(p) || fl_schema_compile(p, &s, NULL))
        return NULL;
    fl_schema_free(s);
    /* arguments are an object: parameters that do not say a type ({}, or
     * bare properties) would let any value through */
    json_t *t = json_object_get(p, "type");
    if (t && !(json_is_string(t) && !strcmp(json_string_value(t), "object")))
        return NULL;
    json_t *copy = json_deep_copy(p);
    if (copy && !t && json_object_set_new(copy, "type", json_string("object"))) {
        json_decref(copy);
        return NULL;
    }
    return copy;
}

/* A parameters schema moved to at (a JSON pointer): its "$ref"s into
 * itself ("#", "#/$defs/X") made to point there still. 0 or -ENOMEM. */
static int rebase_refs(json_t *v, const char *at)
{
    const char *k;
    size_t i;
    json_t *x;
    const char *ref = json_string_value(json_object_get(v, "$ref"));
    if (ref && ref[0] == '#') {
        char *r = malloc(strlen(at) + strlen(ref));
        if (!r)
            return -ENOMEM;
        sprintf(r, "%s%s", at, ref + 1);
        const int rc = json_object_set_new(v, "$ref", json_string(r));
        free(r);
        if (rc)
            return -ENOMEM;
    }
    json_object_foreach(v, k, x) if (rebase_refs(x, at)) return -ENOMEM;
    json_array_foreach(v, i, x) if (rebase_refs(x, at)) return -ENOMEM;
    return 0;
}

/* Every tool's call's object, {"name": NAME, "arguments": its parameters}
 * in that order, as an anyOf; a copy of each parameters schema whose refs
 * point where it now sits. */
static json_t *calls_schema(const struct api_request *req)
{
    json_t *any = json_array();
    for (size_t i = 0; any && i < req->n_tools; i++) {
        char at[64];
        snprintf(at, sizeof(at), "#/anyOf/%zu/properties/arguments", i);
        json_t *args = tool_params(req, i);
        if (!args)
            args = json_pack("{s:s}", "type", "object");
        if (args && rebase_refs(args, at)) {
            json_decref(args);
            args = NULL;
        }
        /* a literal call's object: {"name": NAME, "arguments": {...}} in that order */
        json_t *call = json_pack("{s:s, s:{s:{s:s}, s:o}, s:[s, s], s:b}", "type", "object",
                                 "properties", "name", "const", req->tool_names[i], "arguments",
                                 args, "required", "name", "arguments", "additionalProperties", 0);
        if (!call || json_array_append_new(any, call)) {
            json_decref(any);
            return NULL;
        }
    }
    return any ? json_pack("{s:o}", "anyOf", any) : NULL;
}

json_t *api_tool_schema(const struct api_request *req, const struct api_tool_reader *t)
{
    if (!t->json)
        return NULL;
    const size_t named = api_tool_index(req, t->name);
    if (t->mode == API_TOOLS_ARGS)
        return named < req->n_tools ? tool_params(req, named) : NULL;
    if (req->n_tools <= FL_SCHEMA_MAX_ALTS) /* every call's opening read at once */
        return calls_schema(req);
    /* more tools than readings kept at once: the name held, the arguments any object */
    json_t *names = json_array();
    for (size_t i = 0; names && i < req->n_tools && i < FL_SCHEMA_MAX_ENUM; i++)
        json_array_append_new(names, json_string(req->tool_names[i]));
    if (!names || req->n_tools > FL_SCHEMA_MAX_ENUM) {
        json_decref(names);
        return NULL; /* any object, as JSON mode */
    }
    return json_pack("{s:s, s:{s:{s:o}, s:{s:s}}, s:[s, s], s:b}", "type", "object", "properties",
                     "name", "enum", names, "arguments", "type", "object", "required", "name",
                     "arguments", "additionalProperties", 0);
}

static bool has(const char *text, size_t len, const char *s)
{
    return memmem(text, len, s, strlen(s)) != NULL;
}

/* The XML-style formats' close of a forced answer the model ended without
 * closing its block: the call's end (call_end, sep) and the block's, or
 * the block's alone once the call's is written (or for "required"). */
static void close_left(char out[96], bool args, const char *text, size_t len, const char *call_end,
                       const char *sep, const char *close)
{
    out[0] = '\0';
    if (args && !has(text, len, call_end))
        snprintf(out, 96, "%s%s", call_end, sep);
    strcat(out, close);
}

/* What closes a forced answer's block. JSON's object ends the answer: the
 * block is closed here. GLM's, MiniMax's, Qwen's XML, Kimi's and DeepSeek's model closes it (an
 * answer it ended without doing so is closed too; one max_tokens cut is
 * not); gpt-oss's call ends with its arguments. */
static void forced_tail(const struct api_tool_reader *t, const char *text, size_t len, bool ended,
                        char out[96])
{
    const bool args = t->mode == API_TOOLS_ARGS;
    const char *close = fl_tool_calls_block_close(t->fmt);
    const bool open_left = ended && !has(text, len, close);
    out[0] = '\0';
    switch (t->fmt) {
    case FL_CHAT_GPT_OSS: break;
    case FL_CHAT_GLM45:
    case FL_CHAT_GLM47: strcpy(out, open_left ? close : ""); break;
    case FL_CHAT_MINIMAX_M2:
    case FL_CHAT_MINIMAX_M3:
    case FL_CHAT_KIMI_K3:
    case FL_CHAT_DEEPSEEK_V32:
    case FL_CHAT_QWEN35:
    case FL_CHAT_QWEN3_CODER:
        if (open_left) {
            const bool k3 = t->fmt == FL_CHAT_KIMI_K3;
            const char *call_end = t->fmt == FL_CHAT_MINIMAX_M2     ? "</invoke>"
                                   : t->fmt == FL_CHAT_MINIMAX_M3   ? FL_MINIMAX_M3_NS "</invoke>"
                                   : k3                             ? "<|close|>call<|sep|>"
                                   : t->fmt == FL_CHAT_DEEPSEEK_V32 ? "</｜DSML｜invoke>"
                                                                    : "</function>";
            close_left(out, args, text, len, call_end, k3 ? "" : "\n", close);
        }
        break;
    case FL_CHAT_KIMI_K2_INSTRUCT:
    case FL_CHAT_KIMI_K2_THINKING:
    case FL_CHAT_DEEPSEEK_V31:
    case FL_CHAT_DEEPSEEK_V3_0324:
    case FL_CHAT_DEEPSEEK_R1: {
        const bool kimi = t->fmt == FL_CHAT_KIMI_K2_INSTRUCT || t->fmt == FL_CHAT_KIMI_K2_THINKING;
        const char *end = kimi ? "<|tool_call_end|>" : "<｜tool▁call▁end｜>";
        if (t->json && (t->fmt == FL_CHAT_DEEPSEEK_V3_0324 || t->fmt == FL_CHAT_DEEPSEEK_R1))
            strcpy(out, "\n```"); /* the arguments' fence */
        if (t->json || (open_left && !has(text, len, end)))
            strcat(out, end);
        if (t->json || open_left)
            strcat(out, close);
        break;
    }
    default: strcpy(out, args ? "}\n</tool_call>" : "\n</tool_call>"); break;
    }
}

/* A forced answer as the format writes the call: the opening the prompt
 * gave it, the text, then tail (malloc'd, *n its length; NULL: no memory). */
static char *forced_whole(const struct api_tool_reader *t, const char *text, size_t len,
                          const char *tail, size_t *n)
{
    char head[256];
    const int h = call_opening(t->fmt, t->mode == API_TOOLS_ARGS ? t->name : NULL, 0, head,
                               sizeof(head));
    *n = (size_t)h + len + strlen(tail);
    char *whole = malloc(*n + 1);
    if (!whole)
        return NULL;
    memcpy(whole, head, (size_t)h);
    if (len)
        memcpy(whole + h, text, len);
    strcpy(whole + h + len, tail);
    return whole;
}

/* The forced answer with the opening the prompt gave it, read as a block;
 * one that is no call (cut by max_tokens) is content as it came. */
static int read_forced(const struct api_tool_reader *t, const char *text, size_t len, bool ended,
                       struct fl_tool_answer *out)
{
    char tail[96];
    forced_tail(t, text, len, ended, tail);
    size_t n;
    char *whole = forced_whole(t, text, len, tail, &n);
    if (!whole)
        return -ENOMEM;
    int rc = fl_tool_calls_parse(t->fmt, whole, n, out);
    free(whole);
    if (rc || out->n_calls)
        return rc;
    fl_tool_answer_free(out);
    return fl_tool_answer_content(text, len, out);
}

int api_tool_partial(const struct api_tool_reader *t, const char *text, size_t len,
                     struct fl_tool_partial **out)
{
    *out = NULL;
    if (t->mode == API_TOOLS_OFF || !len) /* nothing written: no call begun, a forced one neither */
        return 0;
    int n;
    if (t->mode == API_TOOLS_BLOCKS) {
        n = fl_tool_calls_partial(t->fmt, text, len, out);
    } else { /* a forced call: read as read_forced reads it, without a tail */
        size_t wn;
        char *whole = forced_whole(t, text, len, "", &wn);
        if (!whole)
            return -ENOMEM;
        n = fl_tool_calls_partial(t->fmt, whole, wn, out);
        free(whole);
    }
    if (n > 1 && t->one_call) { /* the first call only, as the whole answer keeps */
        for (int i = 1; i < n; i++) {
            free((*out)[i].name);
            free((*out)[i].args);
        }
        n = 1;
    }
    return n;
}

int api_tool_read(const struct api_tool_reader *t, const char *text, size_t len, bool ended,
                  struct fl_tool_answer *out)
{
    int rc = t->mode == API_TOOLS_OFF    ? fl_tool_answer_content(text, len, out)
             : t->mode == API_TOOLS_BLOCKS ? fl_tool_calls_parse(t->fmt, text, len, out)
                                         : read_forced(t, text, len, ended, out);
    if (rc == -ENOTSUP) /* a format without calls: all content */
        rc = fl_tool_answer_content(text, len, out);
    while (!rc && t->one_call && out->n_calls > 1) {
        out->n_calls--;
        free(out->calls[out->n_calls].name);
        free(out->calls[out->n_calls].arguments);
    }
    return rc;
}

/* Call i's id in a response: the same in its stream's chunks. */
static void call_id(char cid[96], const char *id, int i)
{
    snprintf(cid, 96, "call_%s_%d", id, i);
}

json_t *api_tool_call_delta_json(const char *id, int i, const char *name, const char *args,
                                 size_t args_len)
{
    char cid[96];
    call_id(cid, id, i);
    json_t *a = fl_json_stringn(args, args_len);
    return name ? json_pack("{s:i, s:s, s:s, s:{s:s, s:o}}", "index", i, "id", cid, "type",
                            "function", "function", "name", name, "arguments", a)
                : json_pack("{s:i, s:{s:o}}", "index", i, "function", "arguments", a);
}

json_t *api_tool_calls_json(const struct fl_tool_answer *a, const char *id)
{
    json_t *v = json_array();
    for (int i = 0; v && i < a->n_calls; i++) {
        char cid[96];
        call_id(cid, id, i);
        json_t *c = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", cid, "type", "function",
                              "function", "name", a->calls[i].name, "arguments",
                              a->calls[i].arguments);
        if (!c || json_array_append_new(v, c)) {
            json_decref(v);
            return NULL;
        }
    }
    return v;
}
