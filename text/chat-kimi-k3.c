/* chat-kimi-k3.c: Kimi K3's own template (Kimi-K3.jinja in llama.cpp's
 * models). Every part of a turn is a tag: <|open|>TAG k="v"...<|sep|>
 * opens one, <|close|>TAG<|sep|> closes it; a message ends with
 * <|end_of_msg|>. An answer is a think part (when the model thinks), a
 * response part and a tools part of calls whose arguments say their JSON
 * type; the tools are declared as JSON with sorted keys; the thinking
 * effort and tools come as system messages of their own. */
#include "text/chat-impl.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>

#include "base/json.h"

/* open_tag: <|open|>TAG, each attribute as k="v" (& and " escaped), <|sep|>. */
static void open_tag(struct sbuf *b, const char *tag, const char *const *attrs, size_t n)
{
    put(b, "<|open|>");
    put(b, tag);
    for (size_t i = 0; i + 1 < n; i += 2) {
        put(b, " ");
        put(b, attrs[i]);
        put(b, "=\"");
        for (const char *c = attrs[i + 1]; *c; c++)
            put(b, *c == '&' ? "&amp;" : *c == '"' ? "&quot;" : (char[2]){ *c, 0 });
        put(b, "\"");
    }
    put(b, "<|sep|>");
}

static void close_tag(struct sbuf *b, const char *tag)
{
    put(b, "<|close|>");
    put(b, tag);
    put(b, "<|sep|>");
}

/* A message of role with body (and a "name" attribute when it has one). */
static void message(struct sbuf *b, const char *role, const char *name, const char *body)
{
    const char *attrs[] = { "role", role, "name", name };
    open_tag(b, "message", attrs, name && name[0] ? 4 : 2);
    put(b, body);
    close_tag(b, "message");
    put(b, "<|end_of_msg|>");
}

/* internal_system_message: a system message of a type, its body trimmed. */
static void system_note(struct sbuf *b, const char *type, const char *body)
{
    const char *attrs[] = { "role", "system", "type", type };
    open_tag(b, "message", attrs, 4);
    chat_put_trimmed(b, body);
    close_tag(b, "message");
    put(b, "<|end_of_msg|>");
}

/* An object's key and its place in the object. */
struct key {
    const char *k;
    size_t at;
};

/* jinja's dictsort: keys compared lowercased (ASCII), ties kept in order. */
static int key_order(const void *a, const void *b)
{
    const struct key *x = a, *y = b;
    for (const unsigned char *p = (const void *)x->k, *q = (const void *)y->k;; p++, q++) {
        const int d = tolower(*p) - tolower(*q);
        if (d || !*p)
            return d ? d : (x->at > y->at) - (x->at < y->at);
    }
}

/* json_sorted: every object's members sorted by key, "," and ":" between
 * them, other values as tojson writes them. -ENOMEM. */
static int json_sorted(struct sbuf *b, const json_t *v)
{
    if (json_is_object(v)) {
        const size_t n = json_object_size(v);
        struct key *keys = malloc(n * sizeof(*keys) + 1);
        if (!keys)
            return -ENOMEM;
        size_t i = 0;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            keys[i] = (struct key){ k, i };
            i++;
        }
        qsort(keys, n, sizeof(*keys), key_order);
        put(b, "{");
        int rc = 0;
        for (i = 0; i < n && !rc; i++) {
            json_t *key = json_string(keys[i].k);
            put(b, i ? "," : "");
            rc = key ? json_sorted(b, key) : -ENOMEM;
            json_decref(key);
            put(b, ":");
            rc = rc ? rc : json_sorted(b, json_object_get(v, keys[i].k));
        }
        free(keys);
        put(b, "}");
        return rc;
    }
    if (json_is_array(v)) {
        put(b, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            put(b, i ? "," : "");
            if (json_sorted(b, json_array_get(v, i)))
                return -ENOMEM;
        }
        put(b, "]");
        return 0;
    }
    char *j = fl_json_dumps_python(v);
    put(b, j ? j : "");
    free(j);
    return j ? 0 : -ENOMEM;
}

/* render_tool_declare: the tools as one sorted JSON list. -EINVAL for a
 * tool that is no JSON. */
static int declare_tools(struct sbuf *b, const char *const *tools, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        json_t *t = json_loads(tools[i], 0, NULL);
        if (!t || json_array_append_new(list, t)) {
            json_decref(list);
            return -EINVAL;
        }
    }
    const char *attrs[] = { "role", "system", "type", "tool-declare" };
    open_tag(b, "message", attrs, 4);
    put(b, "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n");
    const int rc = list ? json_sorted(b, list) : -ENOMEM;
    json_decref(list);
    put(b, "\n```");
    close_tag(b, "message");
    put(b, "<|end_of_msg|>");
    return rc;
}

/* xtml_type's word for a value. */
static const char *xtml_type(const json_t *v)
{
    return json_is_boolean(v) ? "boolean" : json_is_null(v) ? "null"
           : json_is_number(v) ? "number" : json_is_string(v) ? "string"
           : json_is_object(v) ? "object" : "array";
}

/* A call: <|open|>call tool="NAME" index="I"<|sep|>, an argument tag per
 * member (strings as they are, other values as tojson), <|close|>call.
 * -EINVAL for arguments that are no JSON object. */
static int put_call(struct sbuf *b, const struct fl_chat_tool_call *c, size_t index)
{
    char idx[24];
    snprintf(idx, sizeof(idx), "%zu", index);
    const char *attrs[] = { "tool", c->name, "index", idx };
    json_t *args = json_loads(c->arguments, 0, NULL);
    if (!json_is_object(args)) {
        json_decref(args);
        return -EINVAL;
    }
    open_tag(b, "call", attrs, 4);
    const char *k;
    json_t *v;
    json_object_foreach(args, k, v) {
        const char *a[] = { "key", k, "type", xtml_type(v) };
        open_tag(b, "argument", a, 4);
        char *j = json_is_string(v) ? NULL : fl_json_dumps_python(v);
        put(b, json_is_string(v) ? json_string_value(v) : j ? j : "");
        free(j);
        close_tag(b, "argument");
    }
    close_tag(b, "call");
    json_decref(args);
    return 0;
}

/* render_assistant: the think part (with thinking), the response, the calls. */
static int assistant(struct sbuf *b, const struct fl_chat_msg *m, bool thinking)
{
    const char *attrs[] = { "role", "assistant", "name", m->name };
    open_tag(b, "message", attrs, m->name && m->name[0] ? 4 : 2);
    if (thinking) {
        open_tag(b, "think", NULL, 0);
        const char *r = m->reasoning ? m->reasoning : "";
        size_t rn = strlen(r);
        const char *t = r;
        chat_trim_span(&t, &rn);
        if (rn) /* written as given, when not blank */
            put(b, r);
        close_tag(b, "think");
    }
    open_tag(b, "response", NULL, 0);
    put(b, m->content);
    close_tag(b, "response");
    if (m->n_calls) {
        open_tag(b, "tools", NULL, 0);
        for (size_t j = 0; j < m->n_calls; j++)
            if (put_call(b, &m->calls[j], j + 1))
                return -EINVAL;
        close_tag(b, "tools");
    }
    close_tag(b, "message");
    put(b, "<|end_of_msg|>");
    return 0;
}

/* The calls results answer, and how many results have been written since. */
struct results {
    const struct fl_chat_msg *call_msg; /* the last assistant message */
    size_t written;
};

/* render_tool_message: the result, named by the call it answers. -EINVAL
 * when no name can be found (the template raises). */
static int result(struct sbuf *b, const struct fl_chat_msg *m, struct results *st,
                  const char *resolved)
{
    st->written++;
    const char *name = resolved ? resolved : m->name;
    if (!name && st->call_msg && st->written <= st->call_msg->n_calls)
        name = st->call_msg->calls[st->written - 1].name;
    if (!name)
        return -EINVAL;
    char idx[24];
    snprintf(idx, sizeof(idx), "%zu", st->written);
    const char *attrs[] = { "role", "tool", "tool", name, "index", idx };
    open_tag(b, "message", attrs, 6);
    put(b, m->content);
    close_tag(b, "message");
    put(b, "<|end_of_msg|>");
    return 0;
}

/* Whether result m answers one of the calls (by id). */
static const struct fl_chat_tool_call *answered(const struct results *st,
                                                const struct fl_chat_msg *m)
{
    for (size_t j = 0; st->call_msg && m->tool_call_id && j < st->call_msg->n_calls; j++)
        if (st->call_msg->calls[j].id && !strcmp(st->call_msg->calls[j].id, m->tool_call_id))
            return &st->call_msg->calls[j];
    return NULL;
}

/* A run of results m[0..n): when every one answers a call by its id, in
 * the calls' order (each id once), named by their calls; else as they
 * come. */
static int results_run(struct sbuf *b, const struct fl_chat_msg *m, size_t n, struct results *st)
{
    size_t found = 0;
    for (size_t i = 0; i < n; i++)
        found += answered(st, &m[i]) != NULL;
    if (!n || found < n) {
        for (size_t i = 0; i < n; i++)
            if (result(b, &m[i], st, NULL))
                return -EINVAL;
        return 0;
    }
    const struct fl_chat_msg *calls = st->call_msg;
    for (size_t j = 0; j < calls->n_calls; j++) {
        const struct fl_chat_tool_call *c = &calls->calls[j];
        bool seen = !c->id;
        for (size_t k = 0; !seen && k < j; k++)
            seen = calls->calls[k].id && !strcmp(calls->calls[k].id, c->id);
        for (size_t i = 0; !seen && i < n; i++)
            if (!strcmp(m[i].tool_call_id, c->id) && result(b, &m[i], st, c->name))
                return -EINVAL;
    }
    return 0;
}

int fl_chat_kimi_k3(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                    const struct fl_chat_opts *o)
{
    const bool thinking = fl_chat_thinks(o);
    const char *effort = o->thinking_effort ? o->thinking_effort : "max";
    if (thinking && effort[0] && strcmp(effort, "low") && strcmp(effort, "high") &&
        strcmp(effort, "max"))
        return -EINVAL; /* the template raises: low, high and max only (or none) */
    if (o->n_tools && declare_tools(b, o->tools, o->n_tools))
        return -EINVAL;
    if (thinking && effort[0]) {
        char note[256];
        snprintf(note, sizeof(note), "`thinking_effort` guides on how much to think in your "
                 "thinking channel (not including the response channel), supported values include "
                 "`low`, `medium`, `high`, and `max`.\nNow the system is invoked with "
                 "`thinking_effort=%s`.", effort);
        system_note(b, "thinking-effort", note);
    }
    struct results st = { 0 };
    for (size_t i = 0; i < n; i++) {
        if (is(m[i].role, "user") || is(m[i].role, "system")) {
            message(b, m[i].role, m[i].name, m[i].content);
        } else if (is(m[i].role, "assistant")) {
            st = (struct results){ .call_msg = m[i].n_calls ? &m[i] : NULL };
            if (assistant(b, &m[i], thinking))
                return -EINVAL;
        } else if (is(m[i].role, "tool")) {
            size_t e = i;
            while (e < n && is(m[e].role, "tool"))
                e++;
            if (results_run(b, m + i, e - i, &st))
                return -EINVAL;
            i = e - 1;
        }
    }
    if (o->add_assistant) {
        const char *attrs[] = { "role", "assistant" };
        open_tag(b, "message", attrs, 2);
        open_tag(b, thinking ? "think" : "response", NULL, 0);
    }
    return 0;
}
