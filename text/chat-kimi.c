/* chat-kimi.c: Kimi K2's own chat templates (chat-impl.h), as
 * Kimi-K2-Instruct.jinja and Kimi-K2-Thinking.jinja in llama.cpp's models
 * write a conversation through jinja2: tools declared as JSON in a
 * tool_declare turn, calls in a <|tool_calls_section_begin|> of
 * functions.NAME:INDEX entries (INDEX counts the conversation's calls),
 * results as "## Return of functions.NAME:INDEX" in a tool turn. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "text/chat-impl.h"

/* The role's header: users', the assistant's, and everyone else's as system. */
static void put_header(struct sbuf *b, const char *role)
{
    put(b, is(role, "user") ? "<|im_user|>" : is(role, "assistant") ? "<|im_assistant|>"
                                                                    : "<|im_system|>");
    put(b, role);
    put(b, "<|im_middle|>");
}

/* The calls' ids, in the order results take them (the template's queue). */
struct call_ids {
    char (*id)[96];
    size_t n, next, counter;
};

static int put_calls(struct sbuf *b, const struct fl_chat_msg *m, struct call_ids *q)
{
    put(b, "<|tool_calls_section_begin|>");
    for (size_t j = 0; j < m->n_calls; j++) {
        char id[96];
        snprintf(id, sizeof(id), "functions.%.64s:%zu", m->calls[j].name, q->counter++);
        void *p = realloc(q->id, sizeof(*q->id) * (q->n + 1));
        if (!p)
            return -ENOMEM;
        q->id = p;
        memcpy(q->id[q->n++], id, sizeof(id));
        put(b, "<|tool_call_begin|>");
        put(b, id);
        put(b, "<|tool_call_argument_begin|>");
        int rc = chat_put_tojson(b, m->calls[j].arguments);
        if (rc)
            return rc;
        put(b, "<|tool_call_end|>");
    }
    put(b, "<|tool_calls_section_end|>");
    return 0;
}

/* A result: the next call's id, or an unknown one (a result with no call). */
static void put_result_kimi(struct sbuf *b, const struct fl_chat_msg *m, struct call_ids *q)
{
    char id[96];
    if (q->next < q->n)
        memcpy(id, q->id[q->next++], sizeof(id));
    else
        snprintf(id, sizeof(id), "functions.unknown:%zu", q->counter);
    put(b, "## Return of ");
    put(b, id);
    put(b, "\n");
    put(b, m->content);
}

/* Where Kimi-K2-Thinking's history ends (reasoning is written only after
 * it): its template means the last answer without calls, but its loop runs
 * from the end without stopping, so it keeps the first. */
static size_t history_end(const struct fl_chat_msg *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (is(m[i].role, "assistant") && !m[i].n_calls)
            return i;
    return SIZE_MAX;
}

int fl_chat_kimi(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                 const struct fl_chat_opts *o, bool thinking)
{
    static const char *const sys = "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant "
                                   "created by Moonshot AI.<|im_end|>";
    if (o->n_tools) {
        put(b, "<|im_system|>tool_declare<|im_middle|>[");
        for (size_t i = 0; i < o->n_tools; i++) {
            put(b, i ? ", " : "");
            put(b, o->tools[i]);
        }
        put(b, "]<|im_end|>");
    }
    if (thinking && (!n || !is(m[0].role, "system")))
        put(b, sys);
    const size_t hist_end = history_end(m, n); /* history: up to and with it */
    struct call_ids q = { 0 };
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!thinking && i == 0 && !is(m[0].role, "system")) {
            put(b, sys);
            put(b, "\n"); /* the Instruct template's line break after its default */
        }
        put_header(b, m[i].role);
        if (is(m[i].role, "assistant")) {
            if (thinking) {
                const bool suffix = hist_end == SIZE_MAX || i > hist_end;
                put(b, "<think>");
                put(b, suffix && m[i].reasoning ? m[i].reasoning : "");
                put(b, "</think>");
            }
            put(b, m[i].content);
            if (m[i].n_calls)
                rc = put_calls(b, &m[i], &q);
        } else if (is(m[i].role, "tool")) {
            put_result_kimi(b, &m[i], &q);
        } else {
            put(b, m[i].content);
        }
        put(b, "<|im_end|>");
    }
    free(q.id);
    if (!rc && o->add_assistant)
        put(b, "<|im_assistant|>assistant<|im_middle|>");
    return rc;
}
