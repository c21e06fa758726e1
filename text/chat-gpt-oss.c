/* chat-gpt-oss.c: gpt-oss's own chat template (chat-impl.h), as
 * openai-gpt-oss-120b.jinja in llama.cpp's models writes a conversation
 * through jinja2 (Hugging Face's apply_chat_template): tools declared as a
 * TypeScript namespace in the developer turn, calls in the commentary
 * channel, results from "functions.NAME". The template's whitespace is
 * kept as jinja2 renders it, oddities included (a nested object's members
 * start a line indented 16 blanks; a oneOf's variants are joined by " | \n"). */
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "text/chat-impl.h"

/* jinja2's truth of a value: absent, null, false, 0, "", [] and {} are false */
static bool truthy(const json_t *v)
{
    if (!v || json_is_null(v) || json_is_false(v))
        return false;
    if (json_is_string(v))
        return json_string_length(v) > 0;
    if (json_is_array(v))
        return json_array_size(v) > 0;
    if (json_is_object(v))
        return json_object_size(v) > 0;
    return !json_is_number(v) || json_number_value(v) != 0;
}

static bool type_is(const json_t *spec, const char *t)
{
    const char *s = json_string_value(json_object_get(spec, "type"));
    return s && !strcmp(s, t);
}

/* v as the template's tojson writes it (a failure sticks in b->err) */
static void put_json(struct sbuf *b, const json_t *v)
{
    char *j = fl_json_dumps_python(v);
    if (!j && !b->err)
        b->err = -ENOMEM;
    put(b, j ? j : "");
    free(j);
}

/* A value as Python's str() writes it into the template's text: strings
 * bare, the rest as JSON (tojson). */
static void put_str(struct sbuf *b, const json_t *v)
{
    if (json_is_string(v))
        put(b, json_string_value(v));
    else
        put_json(b, v);
}

/* s in code points (jinja2's length of a string) */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static void ts_type(struct sbuf *b, const json_t *spec);

static void ts_array(struct sbuf *b, const json_t *spec)
{
    const json_t *items = json_object_get(spec, "items");
    if (!truthy(items)) {
        put(b, "any[]");
    } else if (type_is(items, "string") || type_is(items, "boolean")) {
        put(b, type_is(items, "string") ? "string[]" : "boolean[]");
    } else if (type_is(items, "number") || type_is(items, "integer")) {
        put(b, "number[]");
    } else {
        struct sbuf inner = { 0 };
        ts_type(&inner, items);
        const char *t = inner.p ? inner.p : "";
        put(b, !strcmp(t, "object | object") || utf8_chars(t) > 50 ? "any" : t);
        put(b, "[]");
        b->err = b->err ? b->err : inner.err;
        free(inner.p);
    }
    if (truthy(json_object_get(spec, "nullable")))
        put(b, " | null");
}

/* A oneOf's variants (jinja2's scoping keeps the template's "any" for
 * object variants from ever being chosen). */
static void ts_one_of(struct sbuf *b, const json_t *variants)
{
    for (size_t i = 0; i < json_array_size(variants); i++) {
        const json_t *v = json_array_get(variants, i);
        ts_type(b, v);
        const json_t *d = json_object_get(v, "description");
        if (truthy(d)) {
            put(b, "// ");
            put_str(b, d);
        }
        if (json_object_get(v, "default")) {
            put(b, "                    // default: ");
            put_json(b, json_object_get(v, "default"));
        }
        if (i + 1 < json_array_size(variants))
            put(b, " | \n");
    }
}

static bool required(const json_t *spec, const char *name)
{
    const json_t *r = json_object_get(spec, "required");
    for (size_t i = 0; i < json_array_size(r); i++)
        if (json_is_string(json_array_get(r, i)) &&
            !strcmp(json_string_value(json_array_get(r, i)), name))
            return true;
    return false;
}

static void ts_object(struct sbuf *b, const json_t *spec)
{
    const json_t *props = json_object_get(spec, "properties");
    if (!truthy(props) || !json_is_object(props)) {
        put(b, "object");
        return;
    }
    put(b, "{\n");
    const char *k;
    const json_t *v;
    size_t i = 0;
    json_object_foreach((json_t *)props, k, v) {
        put(b, k);
        if (!required(spec, k))
            put(b, "?");
        put(b, ": \n                ");
        ts_type(b, v);
        if (++i < json_object_size(props))
            put(b, ", ");
    }
    put(b, "}");
}

/* The template's render_typescript_type. */
static void ts_type(struct sbuf *b, const json_t *spec)
{
    const json_t *type = json_object_get(spec, "type"), *one_of = json_object_get(spec, "oneOf");
    if (type_is(spec, "array")) {
        ts_array(b, spec);
    } else if (json_is_array(type) && json_array_size(type)) {
        for (size_t i = 0; i < json_array_size(type); i++) {
            put(b, i ? " | " : "");
            put_str(b, json_array_get(type, i));
        }
    } else if (truthy(one_of) && json_is_array(one_of)) {
        ts_one_of(b, one_of);
    } else if (type_is(spec, "string")) {
        const json_t *e = json_object_get(spec, "enum");
        if (truthy(e) && json_is_array(e)) {
            for (size_t i = 0; i < json_array_size(e); i++) {
                put(b, i ? "\" | \"" : "\"");
                put_str(b, json_array_get(e, i));
            }
            put(b, "\"");
        } else {
            put(b, truthy(json_object_get(spec, "nullable")) ? "string | null" : "string");
        }
    } else if (type_is(spec, "number") || type_is(spec, "integer")) {
        put(b, "number");
    } else if (type_is(spec, "boolean")) {
        put(b, "boolean");
    } else if (type_is(spec, "object")) {
        ts_object(b, spec);
    } else {
        put(b, "any");
    }
}

/* One top-level parameter: its description, name, type and default. */
static void ts_param(struct sbuf *b, const json_t *params, const char *name, const json_t *spec)
{
    const json_t *d = json_object_get(spec, "description"), *dflt = json_object_get(spec, "default");
    if (truthy(d)) {
        put(b, "// ");
        put_str(b, d);
        put(b, "\n");
    }
    put(b, name);
    if (!required(params, name))
        put(b, "?");
    put(b, ": ");
    ts_type(b, spec);
    if (dflt) {
        const bool one_of = truthy(json_object_get(spec, "oneOf"));
        put(b, truthy(json_object_get(spec, "enum")) ? ", // default: "
               : one_of                              ? "// default: "
                                                     : ", // default: ");
        if (truthy(json_object_get(spec, "enum")) || one_of)
            put_str(b, dflt);
        else
            put_json(b, dflt);
    }
    put(b, ",\n");
}

/* The developer turn's "## functions" namespace: each tool's function as
 * a TypeScript type. -EINVAL when a tool is not {"function": {"name"}}. */
static int ts_namespace(struct sbuf *b, const struct fl_chat_opts *o)
{
    put(b, "## functions\n\nnamespace functions {\n\n");
    for (size_t i = 0; i < o->n_tools; i++) {
        json_t *t = json_loads(o->tools[i], 0, NULL);
        const json_t *f = json_object_get(t, "function"), *p = json_object_get(f, "parameters");
        const char *name = json_string_value(json_object_get(f, "name"));
        if (!name) {
            json_decref(t);
            return -EINVAL;
        }
        put(b, "// "); /* a tool without a description gets an empty one */
        if (json_object_get(f, "description"))
            put_str(b, json_object_get(f, "description"));
        put(b, "\ntype ");
        put(b, name);
        put(b, " = ");
        const json_t *props = json_object_get(p, "properties");
        if (truthy(p) && truthy(props) && json_is_object(props)) {
            put(b, "(_: {\n");
            const char *k;
            const json_t *v;
            json_object_foreach((json_t *)props, k, v)
                ts_param(b, p, k, v);
            put(b, "}) => any;\n\n");
        } else {
            put(b, "() => any;\n\n");
        }
        json_decref(t);
    }
    put(b, "} // namespace functions");
    return 0;
}

static bool has_channel_tags(const char *s)
{
    return s && (strstr(s, "<|channel|>analysis<|message|>") || strstr(s, "<|channel|>final<|message|>"));
}

/* An assistant's call (the first of its calls, as the template takes
 * one), after its reasoning (or without any, its content) in the analysis
 * channel unless a later answer without calls follows. -EINVAL when the
 * arguments are not JSON. */
static int put_call(struct sbuf *b, const struct fl_chat_msg *m, size_t n, size_t i)
{
    bool final_later = false;
    for (size_t j = i + 1; j < n; j++)
        final_later |= is(m[j].role, "assistant") && !m[j].n_calls;
    /* the template refuses content beside reasoning ("Cannot pass both
     * content and thinking"); llama-server passes such an answer's
     * reasoning alone (an empty one is none) */
    const char *said = m[i].reasoning && m[i].reasoning[0] ? m[i].reasoning : m[i].content;
    if (said[0] && !final_later) {
        put(b, "<|start|>assistant<|channel|>analysis<|message|>");
        put(b, said);
        put(b, "<|end|>");
    }
    json_t *args = json_loads(m[i].calls[0].arguments, JSON_DECODE_ANY, NULL);
    char *j = args ? fl_json_dumps_python(args) : NULL;
    json_decref(args);
    if (!j)
        return -EINVAL;
    put(b, "<|start|>assistant to=functions.");
    put(b, m[i].calls[0].name);
    put(b, "<|channel|>commentary json<|message|>");
    put(b, j);
    put(b, "<|call|>");
    free(j);
    return 0;
}

/* A tool's result, from the last call's function, its content as JSON. */
static int put_result_of(struct sbuf *b, const char *call, const char *content)
{
    json_t *s = json_string(content);
    char *j = s ? fl_json_dumps_python(s) : NULL;
    json_decref(s);
    if (!call || !j) { /* "Message has tool role, but there was no previous ... tool call" */
        free(j);
        return -EINVAL;
    }
    put(b, "<|start|>functions.");
    put(b, call);
    put(b, " to=assistant<|channel|>commentary<|message|>");
    put(b, j);
    put(b, "<|end|>");
    free(j);
    return 0;
}

static void put_system(struct sbuf *b, const struct fl_chat_opts *o)
{
    char date[32];
    const time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof(date), "%Y-%m-%d", localtime_r(&now, &tm));
    put(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
           "Knowledge cutoff: 2024-06\nCurrent date: ");
    put(b, date);
    put(b, "\n\nReasoning: ");
    put(b, o->reasoning_effort ? o->reasoning_effort : "medium");
    put(b, "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
           "message.");
    if (o->n_tools)
        put(b, "\nCalls to these tools must go to the commentary channel: 'functions'.");
    put(b, "<|end|>");
}

/* The system turn (date, reasoning effort, channels); the first system
 * (or developer) message as the developer's instructions, with the tools;
 * user turns; answers in the final channel, their reasoning dropped as
 * the template drops it for inference (written in the analysis channel
 * only for a last answer not followed by the assistant's opening); calls
 * and results. A later system message is not written. */
int fl_chat_gpt_oss(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                    const struct fl_chat_opts *o)
{
    put_system(b, o);
    const bool dev = n && (is(m[0].role, "developer") || is(m[0].role, "system"));
    if ((dev && m[0].content[0]) || o->n_tools) {
        put(b, "<|start|>developer<|message|>");
        if (dev && m[0].content[0]) {
            put(b, "# Instructions\n\n");
            put(b, m[0].content);
            put(b, "\n\n");
        }
        if (o->n_tools) {
            put(b, "# Tools\n\n");
            if (ts_namespace(b, o))
                return -EINVAL;
        }
        put(b, "<|end|>");
    }
    const char *call = NULL; /* the last call's function */
    for (size_t i = dev; i < n; i++) {
        const char *c = m[i].content, *r = m[i].reasoning;
        int rc = 0;
        if (is(m[i].role, "assistant")) {
            if (has_channel_tags(c) || has_channel_tags(r))
                return -EINVAL;
            const bool training = i + 1 == n && !o->add_assistant;
            if (m[i].n_calls) {
                rc = put_call(b, m, n, i);
                call = m[i].calls[0].name;
            } else {
                if (training && r) {
                    put(b, "<|start|>assistant<|channel|>analysis<|message|>");
                    put(b, r);
                    put(b, "<|end|>");
                }
                put(b, "<|start|>assistant<|channel|>final<|message|>");
                put(b, c);
                put(b, training ? "<|return|>" : "<|end|>");
                call = training ? call : NULL;
            }
        } else if (is(m[i].role, "tool")) {
            rc = put_result_of(b, call, c);
        } else if (is(m[i].role, "user")) {
            put(b, "<|start|>user<|message|>");
            put(b, c);
            put(b, "<|end|>");
        }
        if (rc)
            return rc;
    }
    if (o->add_assistant)
        put(b, "<|start|>assistant");
    return 0;
}
