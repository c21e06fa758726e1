/* chat-deepseek.c: DeepSeek's own chat templates (chat-impl.h).
 *
 * V3.1's, as deepseek-ai-DeepSeek-V3.1.jinja in llama.cpp's models writes a
 * conversation: the system turns joined at the start, each answer opened
 * with <think></think> (or <think> when it thinks), calls in a
 * <｜tool▁calls▁begin｜> of NAME<｜tool▁sep｜>ARGS entries, results between
 * <｜tool▁output▁begin｜> and <｜tool▁output▁end｜> with no turn of their
 * own.
 *
 * V3-0324's (its GGUFs' tokenizer.chat_template) and R1's (the one R1's
 * GGUFs and llama.cpp's deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja
 * carry): calls as function<｜tool▁sep｜>NAME then the arguments in a
 * ```json fence, results in one <｜tool▁outputs▁begin｜> section. V3-0324
 * opens the answer with each user turn; R1 opens it at the end, with
 * <think>\n, and writes a call only for a message whose content is null,
 * which llama-server never passes: it drops them, and so does faultline.
 *
 * None of these templates describes the tools to the model (llama-server
 * warns so and renders them as they are; so does faultline). */
#include <stdio.h>
#include <stdlib.h>

#include "base/json.h"
#include "text/chat-impl.h"

/* An answer with calls: its content, then every call in one section. */
static int put_calls(struct sbuf *b, const struct fl_chat_msg *m)
{
    put(b, m->content);
    put(b, "<｜tool▁calls▁begin｜>");
    for (size_t j = 0; j < m->n_calls; j++) {
        put(b, "<｜tool▁call▁begin｜>");
        put(b, m->calls[j].name);
        put(b, "<｜tool▁sep｜>");
        int rc = chat_put_tojson(b, m->calls[j].arguments);
        if (rc)
            return rc;
        put(b, "<｜tool▁call▁end｜>");
    }
    put(b, "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>");
    return 0;
}

/* V3-0324's call entries: TYPE<｜tool▁sep｜>NAME, the arguments fenced as
 * ```json, the first without a newline before it. The template adds the
 * arguments to strings, so llama-server passes them as the request's text
 * (checked to be JSON), not as an object to re-write. */
static int put_fenced_calls(struct sbuf *b, const struct fl_chat_msg *m)
{
    put(b, m->content);
    put(b, "<｜tool▁calls▁begin｜>");
    for (size_t j = 0; j < m->n_calls; j++) {
        put(b, j ? "\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                 : "<｜tool▁call▁begin｜>function<｜tool▁sep｜>");
        put(b, m->calls[j].name);
        put(b, "\n```json\n");
        json_t *v = json_loads(m->calls[j].arguments, JSON_DECODE_ANY, NULL);
        if (!v)
            return -EINVAL;
        json_decref(v);
        put(b, m->calls[j].arguments);
        put(b, "\n```<｜tool▁call▁end｜>");
    }
    put(b, "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>");
    return 0;
}

/* A result: the first of a section opens it (the templates' is_output_first,
 * which V3-0324 resets at each answer with calls and R1 never). */
static void put_result(struct sbuf *b, const char *content, bool *output_first)
{
    put(b, *output_first ? "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
                         : "\n<｜tool▁output▁begin｜>");
    put(b, content);
    put(b, "<｜tool▁output▁end｜>");
    *output_first = false;
}

/* The system prompt at the start: V3-0324 joins the system turns, R1 keeps
 * the last. */
static void put_system(struct sbuf *b, const struct fl_chat_msg *m, size_t n, bool join)
{
    const char *last = NULL;
    for (size_t i = 0; i < n; i++)
        if (is(m[i].role, "system")) {
            if (join) {
                put(b, last ? "\n\n" : "");
                put(b, m[i].content);
            }
            last = m[i].content;
        }
    if (!join && last)
        put(b, last);
}

int fl_chat_deepseek_v3(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                        const struct fl_chat_opts *o, bool r1)
{
    put_system(b, m, n, !r1);
    /* the templates' is_last_user (V3-0324), is_tool, is_output_first */
    bool last_user = false, after_result = false, output_first = true;
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content;
        if (is(m[i].role, "user")) {
            put(b, "<｜User｜>");
            put(b, c);
            put(b, r1 ? "" : "<｜Assistant｜>");
            last_user = true, after_result = false;
        } else if (is(m[i].role, "assistant") && m[i].n_calls && !r1) {
            put(b, after_result ? "<｜tool▁outputs▁end｜>" : "");
            last_user = false, after_result = false, output_first = true;
            int rc = put_fenced_calls(b, &m[i]);
            if (rc)
                return rc;
        } else if (is(m[i].role, "assistant")) {
            last_user = false;
            if (after_result) {
                put(b, "<｜tool▁outputs▁end｜>");
            } else if (r1) { /* what follows the last </think> */
                put(b, "<｜Assistant｜>");
                for (const char *t; (t = strstr(c, "</think>"));)
                    c = t + 8;
            }
            put(b, c);
            put(b, "<｜end▁of▁sentence｜>");
            after_result = false;
        } else if (is(m[i].role, "tool")) {
            put_result(b, c, &output_first);
            last_user = false, after_result = true;
        }
    }
    put(b, after_result ? "<｜tool▁outputs▁end｜>" : "");
    if (o->add_assistant && !after_result && (r1 || !last_user))
        put(b, r1 ? "<｜Assistant｜><think>\n" : "<｜Assistant｜>");
    return 0;
}

bool fl_chat_deepseek_r1_opens(const struct fl_chat_msg *m, size_t n)
{
    /* the template's is_tool at the end: a result not yet answered */
    for (size_t i = n; i-- > 0;)
        if (is(m[i].role, "user") || is(m[i].role, "assistant") || is(m[i].role, "tool"))
            return !is(m[i].role, "tool");
    return true;
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
