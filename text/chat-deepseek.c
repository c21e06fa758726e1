/* chat-deepseek.c: DeepSeek V3.1's own chat template (chat-impl.h), as
 * deepseek-ai-DeepSeek-V3.1.jinja in llama.cpp's models writes a
 * conversation: the system turns joined at the start, each answer opened
 * with <think></think> (or <think> when it thinks), calls in a
 * <｜tool▁calls▁begin｜> of NAME<｜tool▁sep｜>ARGS entries, results between
 * <｜tool▁output▁begin｜> and <｜tool▁output▁end｜> with no turn of their
 * own. The template does not describe the tools to the model (llama-server
 * warns so and renders it as is; so does faultline). */
#include <stdio.h>
#include <stdlib.h>

#include "base/json.h"
#include "text/chat-impl.h"

/* A call's arguments as the template's `| tojson` writes the object
 * llama-server reads them into: Python's json.dumps. -EINVAL when they are
 * not JSON. */
static int put_args(struct sbuf *b, const char *arguments)
{
    json_t *v = json_loads(arguments, JSON_DECODE_ANY, NULL);
    char *j = v ? fl_json_dumps_python(v) : NULL;
    json_decref(v);
    if (!j)
        return v ? -ENOMEM : -EINVAL;
    put(b, j);
    free(j);
    return 0;
}

/* An answer with calls: its content, then every call in one section. */
static int put_calls(struct sbuf *b, const struct fl_chat_msg *m)
{
    put(b, m->content);
    put(b, "<｜tool▁calls▁begin｜>");
    for (size_t j = 0; j < m->n_calls; j++) {
        put(b, "<｜tool▁call▁begin｜>");
        put(b, m->calls[j].name);
        put(b, "<｜tool▁sep｜>");
        int rc = put_args(b, m->calls[j].arguments);
        if (rc)
            return rc;
        put(b, "<｜tool▁call▁end｜>");
    }
    put(b, "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>");
    return 0;
}

/* An answer without calls: after a result its content as it is, else what
 * follows its first </think> (the template drops the reasoning). */
static void put_answer(struct sbuf *b, const struct fl_chat_msg *m, bool after_result)
{
    const char *c = m->content, *t = strstr(c, "</think>");
    put(b, !after_result && t ? t + 8 : c);
    put(b, "<｜end▁of▁sentence｜>");
}

int fl_chat_deepseek_v31(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                         const struct fl_chat_opts *o)
{
    bool first_system = true;
    for (size_t i = 0; i < n; i++)
        if (is(m[i].role, "system")) {
            put(b, first_system ? "" : "\n\n");
            put(b, m[i].content);
            first_system = false;
        }
    bool last_user = false, after_result = false; /* the template's is_last_user, is_tool */
    for (size_t i = 0; i < n; i++) {
        if (is(m[i].role, "user")) {
            put(b, "<｜User｜>");
            put(b, m[i].content);
            last_user = true, after_result = false;
        } else if (is(m[i].role, "assistant") && m[i].n_calls) {
            put(b, last_user ? "<｜Assistant｜><think></think>" : "");
            last_user = false, after_result = false;
            int rc = put_calls(b, &m[i]);
            if (rc)
                return rc;
        } else if (is(m[i].role, "assistant")) {
            put(b, last_user ? "<｜Assistant｜><think></think>" : "");
            last_user = false;
            put_answer(b, &m[i], after_result);
            after_result = false;
        } else if (is(m[i].role, "tool")) {
            put(b, "<｜tool▁output▁begin｜>");
            put(b, m[i].content);
            put(b, "<｜tool▁output▁end｜>");
            last_user = false, after_result = true;
        }
    }
    if (o->add_assistant && fl_chat_deepseek_v31_opens(m, n))
        put(b, fl_chat_deepseek_v31_thinks(o) ? "<｜Assistant｜><think>"
                                               : "<｜Assistant｜><think></think>");
    return 0;
}

bool fl_chat_deepseek_v31_opens(const struct fl_chat_msg *m, size_t n)
{
    /* the last turn the template writes in place is a user's (system turns
     * went to the start, other roles are not written); a result or an
     * answer gets no new opening */
    for (size_t i = n; i-- > 0;)
        if (is(m[i].role, "user") || is(m[i].role, "assistant") || is(m[i].role, "tool"))
            return is(m[i].role, "user");
    return false;
}

bool fl_chat_deepseek_v31_thinks(const struct fl_chat_opts *o)
{
    /* the template's `thinking`, else enable_thinking (llama-server passes it, true unless
     * turned off) */
    return o->ds_thinking ? o->ds_thinking > 0 : !o->no_thinking;
}
