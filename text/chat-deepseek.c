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
#include <stdint.h>
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
        put(b, fl_chat_thinks(o) ? "<｜Assistant｜><think>"
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

bool fl_chat_thinks(const struct fl_chat_opts *o)
{
    /* the template's `thinking`, else enable_thinking (llama-server passes it, true unless
     * turned off) */
    return o->ds_thinking ? o->ds_thinking > 0 : !o->no_thinking;
}

/* ---- V3.2 -------------------------------------------------------------------
 * As deepseek-ai-DeepSeek-V3.2.jinja in llama.cpp's models writes a
 * conversation: the system turns and the tools (each function as JSON
 * under a "## Tools" header that teaches the DSML call format) at the
 * start; each answer opened with </think> (<think>REASONING</think> for
 * one after the last user turn when it thinks); calls as a
 * <｜DSML｜function_calls> block of invokes whose parameters say whether
 * they are strings; the results of one answer's calls in one
 * <function_results> block, after which the answer goes on without a new
 * <｜Assistant｜>. */

#define DSML "｜DSML｜"

static const char v32_tools_header[] =
    "## Tools\n\nYou have access to a set of tools you can use to answer the user's question.\n"
    "You can invoke functions by writing a \"<" DSML "function_calls>\" block like the "
    "following as part of your reply to the user:\n<" DSML "function_calls>\n<" DSML
    "invoke name=\"$FUNCTION_NAME\">\n<" DSML "parameter name=\"$PARAMETER_NAME\" "
    "string=\"true|false\">$PARAMETER_VALUE</" DSML "parameter>\n...\n</" DSML "invoke>\n<" DSML
    "invoke name=\"$FUNCTION_NAME2\">\n...\n</" DSML "invoke>\n</" DSML "function_calls>\n\n"
    "String and scalar parameters should be specified as is without any escaping or quotes, "
    "while lists and objects should use JSON format. The \"string\" attribute should be set to "
    "\"true\" for string type parameters and \"false\" for other types (numbers, booleans, "
    "arrays, objects).\n\nIf the thinking_mode is enabled, then after function results you "
    "should strongly consider outputting a thinking block. Here is an example:\n\n<" DSML
    "function_calls>\n...\n</" DSML "function_calls>\n\n<function_results>\n...\n"
    "</function_results>\n\n<think>...thinking about results</think>\n\nHere are the functions "
    "available in JSONSchema format:\n<functions>\n";

/* The system prompt: the system turns joined, then the tools. */
static int v32_system(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                      const struct fl_chat_opts *o)
{
    const size_t start = b->n;
    bool any = false; /* a system turn so far */
    for (size_t i = 0; i < n; i++)
        if (is(m[i].role, "system")) {
            put(b, any ? "\n\n" : "");
            put(b, m[i].content);
            any = true;
        }
    if (!o->n_tools)
        return 0;
    put(b, b->n > start ? "\n\n" : ""); /* the joined system turns, when they say anything */
    put(b, v32_tools_header);
    for (size_t i = 0; i < o->n_tools; i++) {
        json_t *t = json_loads(o->tools[i], 0, NULL);
        const char *type = json_string_value(json_object_get(t, "type"));
        char *f = type && !strcmp(type, "function")
                      ? fl_json_dumps_python(json_object_get(t, "function")) : NULL;
        const bool skip = t && !(type && !strcmp(type, "function"));
        json_decref(t);
        if (skip)
            continue;
        if (!f)
            return -EINVAL;
        put(b, f);
        put(b, "\n");
        free(f);
    }
    put(b, "</functions>\n");
    return 0;
}

/* One call: its parameters, strings as they are, other values as JSON. */
static int v32_call(struct sbuf *b, const struct fl_chat_tool_call *c)
{
    json_t *args = json_loads(c->arguments, 0, NULL);
    if (!json_is_object(args)) {
        json_decref(args);
        return -EINVAL;
    }
    put(b, "<" DSML "invoke name=\"");
    put(b, c->name);
    put(b, "\">\n");
    const char *k;
    json_t *v;
    json_object_foreach(args, k, v) {
        char *j = json_is_string(v) ? NULL : fl_json_dumps_python(v);
        put(b, "<" DSML "parameter name=\"");
        put(b, k);
        put(b, json_is_string(v) ? "\" string=\"true\">" : "\" string=\"false\">");
        put(b, json_is_string(v) ? json_string_value(v) : j ? j : "");
        put(b, "</" DSML "parameter>\n");
        free(j);
    }
    put(b, "</" DSML "invoke>\n");
    json_decref(args);
    return 0;
}

/* The template's pending markers: an answer opens after a user turn (with
 * <｜Assistant｜>) or after the last result of an answer's calls. */
struct v32_state {
    bool asst, tool;
    size_t caller; /* the last answer with calls so far; SIZE_MAX: none */
};

/* Result i (of caller's calls): the block's opening before the first, its
 * close after the last. */
static void v32_result(struct sbuf *b, const struct fl_chat_msg *m, size_t i,
                       struct v32_state *s)
{
    const size_t order = i - s->caller;
    put(b, order == 1 ? "\n\n<function_results>" : "");
    put(b, "\n<result>");
    put(b, m[i].content);
    put(b, "</result>");
    if (order == m[s->caller].n_calls) {
        put(b, "\n</function_results>");
        s->asst = false, s->tool = true;
    }
}

/* Answer i: its opening (where one is pending), content and calls. */
static int v32_answer(struct sbuf *b, const struct fl_chat_msg *m, size_t i, bool after_last_user,
                      bool thinking, struct v32_state *s)
{
    const bool reason = after_last_user && thinking;
    if (s->asst || s->tool) {
        put(b, s->asst ? "<｜Assistant｜>" : "\n\n");
        put(b, reason ? "<think>" : "");
        put(b, reason && m[i].reasoning ? m[i].reasoning : "");
        put(b, "</think>");
    }
    s->asst = s->tool = false;
    put(b, m[i].content);
    if (m[i].n_calls) {
        put(b, "\n\n<" DSML "function_calls>\n");
        for (size_t j = 0; j < m[i].n_calls; j++) {
            int rc = v32_call(b, &m[i].calls[j]);
            if (rc)
                return rc;
        }
        put(b, "</" DSML "function_calls>");
        s->caller = i;
    }
    put(b, "<｜end▁of▁sentence｜>");
    return 0;
}

/* The last user (or developer) turn's index, SIZE_MAX when none. */
static size_t v32_last_user(const struct fl_chat_msg *m, size_t n)
{
    size_t last = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (is(m[i].role, "user") || is(m[i].role, "developer"))
            last = i;
    return last;
}

/* The turns after the system prompt into b (NULL: only the state). */
static int v32_turns(struct sbuf *b, const struct fl_chat_msg *m, size_t n, bool thinking,
                     struct v32_state *s)
{
    const size_t last_user = v32_last_user(m, n);
    *s = (struct v32_state){ .caller = SIZE_MAX };
    struct sbuf none = { 0 };
    struct sbuf *out = b ? b : &none;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (is(m[i].role, "user")) {
            put(out, "<｜User｜>");
            put(out, m[i].content);
            s->asst = true, s->tool = false;
        } else if (is(m[i].role, "assistant")) {
            rc = v32_answer(out, m, i, last_user == SIZE_MAX || i > last_user, thinking, s);
        } else if (is(m[i].role, "tool")) {
            if (s->caller == SIZE_MAX) /* a result of no call */
                rc = -EINVAL;
            else
                v32_result(out, m, i, s);
        }
    }
    free(none.p);
    return rc;
}

int fl_chat_deepseek_v32(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                         const struct fl_chat_opts *o)
{
    const bool thinking = fl_chat_thinks(o);
    struct v32_state s;
    int rc = v32_system(b, m, n, o);
    rc = rc ? rc : v32_turns(b, m, n, thinking, &s);
    if (rc || !o->add_assistant || !(s.asst || s.tool))
        return rc;
    put(b, s.asst ? "<｜Assistant｜>" : "\n\n");
    put(b, thinking ? "<think>" : "<think></think>");
    return 0;
}

bool fl_chat_deepseek_v32_opens(const struct fl_chat_msg *m, size_t n)
{
    struct v32_state s;
    return v32_turns(NULL, m, n, false, &s) == 0 && (s.asst || s.tool);
}
