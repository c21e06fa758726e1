/* chat-qwen.c: the chatml templates whose tool calls are XML (chat-impl.h),
 * as Qwen3.5-4B.jinja and Qwen3-Coder.jinja in llama.cpp's models write a
 * conversation: a call is
 *
 *   <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>
 *
 * (V a string as it is, other values as the template's tojson or `| string`
 * write them); results are <tool_response> blocks in a user turn. Qwen3.5
 * (and 3.6) lists the tools as JSON lines and thinks (<think>, as Qwen3);
 * Qwen3-Coder lists them as XML and does not think. */
#include <stdio.h>
#include <stdlib.h>

#include "base/json.h"
#include "text/chat-impl.h"

/* A value as the templates write it: tojson for objects and arrays, `|
 * string` (Python's str) for the rest. */
static int put_value(struct sbuf *b, const json_t *v, bool as_json)
{
    char *s = as_json ? fl_json_dumps_python(v) : fl_json_str_python(v);
    if (!s)
        return -ENOMEM;
    put(b, s);
    free(s);
    return 0;
}

static int put_arg_value(struct sbuf *b, const json_t *v)
{
    return put_value(b, v, json_is_object(v) || json_is_array(v));
}

/* A call's opening and its <parameter=K> lines; -EINVAL when the arguments
 * are no JSON object. */
static int put_call(struct sbuf *b, const struct fl_chat_tool_call *c, const char *open)
{
    json_t *args = json_loads(c->arguments, 0, NULL);
    if (!json_is_object(args)) {
        json_decref(args);
        return -EINVAL;
    }
    put(b, open);
    put(b, c->name);
    put(b, ">\n");
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach(args, k, v) {
        put(b, "<parameter=");
        put(b, k);
        put(b, ">\n");
        if ((rc = put_arg_value(b, v)))
            break;
        put(b, "\n</parameter>\n");
    }
    json_decref(args);
    put(b, "</function>\n</tool_call>");
    return rc;
}

/* Results: consecutive ones share a user turn (opened unless the result
 * is the first of the messages looped over, from start), each in
 * <tool_response>; coder: Qwen3-Coder's newlines and unstripped content. */
static void put_result(struct sbuf *b, const struct fl_chat_msg *m, size_t n, size_t start,
                       size_t i, bool coder)
{
    if (i > start && !is(m[i - 1].role, "tool"))
        put(b, coder ? "<|im_start|>user\n" : "<|im_start|>user");
    put(b, coder ? "<tool_response>\n" : "\n<tool_response>\n");
    if (coder)
        put(b, m[i].content);
    else
        chat_put_trimmed(b, m[i].content);
    put(b, coder ? "\n</tool_response>\n" : "\n</tool_response>");
    if (i + 1 == n || !is(m[i + 1].role, "tool"))
        put(b, "<|im_end|>\n");
}

/* ---- Qwen3.5 ------------------------------------------------------------ */

static const char qwen35_rules[] =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
    "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...>"
    "</function> block must be nested within <tool_call></tool_call> XML tags\n- Required "
    "parameters MUST be specified\n- You may provide optional reasoning for your function call "
    "in natural language BEFORE the function call, but NOT after\n- If there is no function call "
    "available, answer the question like normal with your current knowledge and do not tell the "
    "user about function calls\n</IMPORTANT>";

/* The last user message that is not a tool's result wrapped as one: the
 * template raises when there is none (-1). */
static long last_query(const struct fl_chat_msg *m, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        if (!is(m[i].role, "user"))
            continue;
        const char *c = m[i].content;
        size_t len = strlen(c);
        chat_trim_span(&c, &len);
        if (!(len >= 15 && !strncmp(c, "<tool_response>", 15) && len >= 16 &&
              !strncmp(c + len - 16, "</tool_response>", 16)))
            return (long)i;
    }
    return -1;
}

/* An answer: its reasoning (reasoning_content, else split from the
 * content at </think>) kept in <think> after the last query, then its
 * content and calls. */
static int qwen35_assistant(struct sbuf *b, const struct fl_chat_msg *m, bool after_query)
{
    const char *c = m->content, *r = m->reasoning ? m->reasoning : "";
    size_t cn = strlen(c), rn = strlen(r);
    chat_trim_span(&c, &cn);
    const char *end = m->reasoning ? NULL : memmem(c, cn, "</think>", 8);
    if (end) { /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
        r = c, rn = (size_t)(end - c);
        while (rn && r[rn - 1] == '\n')
            rn--;
        for (const char *o; (o = memmem(r, rn, "<think>", 7));)
            rn -= (size_t)(o + 7 - r), r = o + 7;
        const char *last = end; /* content.split('</think>')[-1].lstrip('\n') */
        for (const char *p; (p = memmem(last + 8, (size_t)(c + cn - last - 8), "</think>", 8));)
            last = p;
        cn -= (size_t)(last + 8 - c), c = last + 8;
        while (cn && *c == '\n')
            c++, cn--;
    }
    chat_trim_span(&r, &rn);
    put(b, "<|im_start|>assistant\n");
    if (after_query) {
        put(b, "<think>\n");
        put_n(b, r, rn);
        put(b, "\n</think>\n\n");
    }
    put_n(b, c, cn);
    size_t tn = cn;
    const char *t = c;
    chat_trim_span(&t, &tn);
    for (size_t j = 0; j < m->n_calls; j++) {
        const char *open = j ? "\n<tool_call>\n<function="
                           : tn ? "\n\n<tool_call>\n<function="
                                : "<tool_call>\n<function=";
        int rc = put_call(b, &m->calls[j], open);
        if (rc)
            return rc;
    }
    put(b, "<|im_end|>\n");
    return 0;
}

static void qwen35_system(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                          const struct fl_chat_opts *o)
{
    const bool sys = n && is(m[0].role, "system");
    if (!o->n_tools) {
        if (sys) {
            put(b, "<|im_start|>system\n");
            chat_put_trimmed(b, m[0].content);
            put(b, "<|im_end|>\n");
        }
        return;
    }
    put(b, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
    for (size_t i = 0; i < o->n_tools; i++) {
        put(b, "\n");
        put(b, o->tools[i]);
    }
    put(b, "\n</tools>");
    put(b, qwen35_rules);
    const char *c = sys ? m[0].content : "";
    size_t cn = strlen(c);
    chat_trim_span(&c, &cn);
    if (cn) {
        put(b, "\n\n");
        put_n(b, c, cn);
    }
    put(b, "<|im_end|>\n");
}

int fl_chat_qwen35(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                   const struct fl_chat_opts *o)
{
    const long query = last_query(m, n);
    if (!n || query < 0)
        return -EINVAL; /* the template raises: no messages, no user query */
    qwen35_system(b, m, n, o);
    for (size_t i = 0; i < n; i++) {
        int rc = 0;
        if (is(m[i].role, "system")) {
            rc = i ? -EINVAL : 0; /* "System message must be at the beginning." */
        } else if (is(m[i].role, "user")) {
            put(b, "<|im_start|>user\n");
            chat_put_trimmed(b, m[i].content);
            put(b, "<|im_end|>\n");
        } else if (is(m[i].role, "assistant")) {
            rc = qwen35_assistant(b, &m[i], (long)i > query);
        } else if (is(m[i].role, "tool")) {
            put_result(b, m, n, 0, i, false);
        } else {
            rc = -EINVAL; /* "Unexpected message role." */
        }
        if (rc)
            return rc;
    }
    if (o->add_assistant)
        put(b, o->no_thinking ? "<|im_start|>assistant\n<think>\n\n</think>\n\n"
                              : "<|im_start|>assistant\n<think>\n");
    return 0;
}

/* ---- Qwen3-Coder -------------------------------------------------------- */

static const char coder_rules[] =
    "\n</tools>\n\nIf you choose to call a tool ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\n"
    "value_1\n</parameter>\n<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n"
    "</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: "
    "the tool calling block MUST begin with an opening <tool_call> tag and end with a closing "
    "</tool_call> tag.\n- Required parameters MUST be specified\n- You may provide optional "
    "reasoning for your function call in natural language BEFORE the function call, but NOT "
    "after\n- If there is no function call available, answer the question like normal with your "
    "current knowledge and do not tell the user about function calls\n</IMPORTANT>";

/* The template's render_extra_keys: o's keys but the handled ones, each
 * as <KEY>value</KEY>. */
static int extra_keys(struct sbuf *b, const json_t *o, const char *const *handled)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        bool skip = false;
        for (const char *const *h = handled; *h && !skip; h++)
            skip = !strcmp(*h, k);
        if (skip)
            continue;
        put(b, "\n<");
        put(b, k);
        put(b, ">");
        int rc = put_arg_value(b, v);
        if (rc)
            return rc;
        put(b, "</");
        put(b, k);
        put(b, ">");
    }
    return 0;
}

/* An optional string field: "\n<TAG>" its value "</TAG>" (trimmed). */
static int tagged_field(struct sbuf *b, const json_t *o, const char *key, bool trim)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    char *s = fl_json_str_python(v);
    if (!s)
        return -ENOMEM;
    put(b, "\n<");
    put(b, key);
    put(b, ">");
    if (trim)
        chat_put_trimmed(b, s);
    else
        put(b, s);
    put(b, "</");
    put(b, key);
    put(b, ">");
    free(s);
    return 0;
}

/* A tool as Qwen3-Coder's template lists it: name, description, each
 * parameter's name, type, description and other keys, then the
 * parameters' and the function's other keys. */
static int coder_tool(struct sbuf *b, const char *tool_json)
{
    static const char *const param_keys[] = { "name", "type", "description", NULL };
    static const char *const params_keys[] = { "type", "properties", NULL };
    static const char *const fn_keys[] = { "type", "name", "description", "parameters", NULL };
    json_t *t = json_loads(tool_json, 0, NULL);
    const json_t *f = json_object_get(t, "function") ? json_object_get(t, "function") : t;
    const json_t *params = json_object_get(f, "parameters");
    const json_t *props = json_object_get(params, "properties");
    int rc = json_is_object(f) ? 0 : -EINVAL;
    const char *name = json_string_value(json_object_get(f, "name"));
    put(b, "\n<function>\n<name>");
    put(b, name ? name : "");
    put(b, "</name>");
    rc = rc ? rc : tagged_field(b, f, "description", true);
    put(b, "\n<parameters>");
    const char *k;
    json_t *p;
    if (json_is_object(params) && json_is_object(props))
        json_object_foreach((json_t *)props, k, p) {
            put(b, "\n<parameter>\n<name>");
            put(b, k);
            put(b, "</name>");
            rc = rc ? rc : tagged_field(b, p, "type", false);
            rc = rc ? rc : tagged_field(b, p, "description", true);
            rc = rc ? rc : extra_keys(b, p, param_keys);
            put(b, "\n</parameter>");
        }
    rc = rc ? rc : extra_keys(b, params, params_keys);
    put(b, "\n</parameters>");
    rc = rc ? rc : extra_keys(b, f, fn_keys);
    put(b, "\n</function>");
    json_decref(t);
    return rc;
}

static int coder_system(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                        const struct fl_chat_opts *o)
{
    const bool sys = n && is(m[0].role, "system");
    if (sys) {
        put(b, "<|im_start|>system\n");
        put(b, m[0].content);
    } else if (o->n_tools) {
        put(b, "<|im_start|>system\nYou are Qwen, a helpful AI assistant that can interact with a "
               "computer to solve tasks.");
    }
    if (o->n_tools) {
        put(b, "\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>");
        for (size_t i = 0; i < o->n_tools; i++) {
            int rc = coder_tool(b, o->tools[i]);
            if (rc)
                return rc;
        }
        put(b, coder_rules);
    }
    if (sys || o->n_tools)
        put(b, "<|im_end|>\n");
    return 0;
}

int fl_chat_qwen3_coder(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                        const struct fl_chat_opts *o)
{
    int rc = coder_system(b, m, n, o);
    const size_t first = n && is(m[0].role, "system");
    for (size_t i = first; i < n && !rc; i++) {
        if (is(m[i].role, "assistant") && m[i].n_calls) {
            put(b, "<|im_start|>assistant");
            const char *c = m[i].content;
            size_t cn = strlen(c);
            chat_trim_span(&c, &cn);
            if (cn) {
                put(b, "\n");
                put_n(b, c, cn);
                put(b, "\n");
            }
            for (size_t j = 0; j < m[i].n_calls && !rc; j++)
                rc = put_call(b, &m[i].calls[j], "\n<tool_call>\n<function=");
            put(b, "<|im_end|>\n");
        } else if (is(m[i].role, "tool")) {
            put_result(b, m, n, first, i, true);
        } else {
            put(b, "<|im_start|>");
            put(b, m[i].role);
            put(b, "\n");
            put(b, m[i].content);
            put(b, "<|im_end|>\n");
        }
    }
    if (!rc && o->add_assistant)
        put(b, "<|im_start|>assistant\n");
    return rc;
}
