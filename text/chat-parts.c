/* chat-parts.c: the pieces several chat formats write with (chat-impl.h):
 * trimming, tool results sharing a turn, an answer's reasoning split off,
 * a call's arguments as tojson writes them or as XML pairs. */
#include <ctype.h>
#include <stdlib.h>

#include "base/json.h"
#include "text/chat-impl.h"

/* s[0..*n) without leading and trailing ASCII whitespace (llama.cpp's
 * trim; the templates' Python str.strip()). */
void chat_trim_span(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s))
        (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

void chat_put_trimmed_n(struct sbuf *b, const char *s, size_t n)
{
    chat_trim_span(&s, &n);
    put_n(b, s, n);
}

void chat_put_trimmed(struct sbuf *b, const char *s)
{
    chat_put_trimmed_n(b, s, strlen(s));
}

bool chat_ends_with(const char *s, const char *end)
{
    const size_t n = strlen(s), e = strlen(end);
    return n >= e && !memcmp(s + n - e, end, e);
}

/* Tool result i: consecutive results share one turn (opened by turn before
 * the first, ended by end after the last), each between open and close. */
void chat_put_result(struct sbuf *b, const struct fl_chat_msg *m, size_t n, size_t i,
                       const char *turn, const char *open, const char *close, const char *end)
{
    if (i == 0 || !is(m[i - 1].role, "tool"))
        put(b, turn);
    put(b, open);
    put(b, m[i].content);
    put(b, close);
    if (i + 1 == n || !is(m[i + 1].role, "tool"))
        put(b, end);
}

/* An assistant's content as Qwen3's and GLM-4.5's templates split it (and
 * MiniMax-M3's, with its own tags): the reasoning between open and the
 * first close, the answer after the last (leading newlines off both).
 * Without close all of it is answer. */
static void chat_think_split(const char *c, const char *open_tag, const char *close_tag,
                             const char **r, size_t *rn, const char **a, size_t *an)
{
    const size_t on = strlen(open_tag), cn = strlen(close_tag);
    const char *first = strstr(c, close_tag), *last = first;
    *r = "", *rn = 0, *a = c, *an = strlen(c);
    if (!first)
        return;
    for (const char *p; (p = strstr(last + cn, close_tag));)
        last = p;
    size_t n = (size_t)(first - c);
    while (n && c[n - 1] == '\n')
        n--;
    const char *open = c;
    for (const char *p = c; (p = strstr(p, open_tag)) && p + on <= c + n; p += on)
        open = p + on;
    while (open < c + n && *open == '\n')
        open++;
    *r = open, *rn = (size_t)(c + n - open);
    *a = last + cn;
    while (**a == '\n')
        (*a)++;
    *an = strlen(*a);
}

void chat_reasoning_tagged(const struct fl_chat_msg *m, const char *open, const char *close,
                           const char **r, size_t *rn, const char **a, size_t *an)
{
    if (!m->reasoning) {
        chat_think_split(m->content, open, close, r, rn, a, an);
        return;
    }
    *r = m->reasoning, *rn = strlen(m->reasoning);
    *a = m->content, *an = strlen(m->content);
}

/* An assistant message's reasoning and answer: its reasoning_content as
 * given (the content then whole, as the templates take it), else split
 * from its content. */
void chat_reasoning_of(const struct fl_chat_msg *m, const char **r, size_t *rn, const char **a,
                         size_t *an)
{
    chat_reasoning_tagged(m, "<think>", "</think>", r, rn, a, an);
}

/* A call's arguments as the XML-style formats write them (GLM's
 * <arg_key>K</arg_key>\n<arg_value>V</arg_value>\n, MiniMax's <parameter
 * name="K">V</parameter>\n): open, the key, mid, the value, close; strings
 * as they are, other values as JSON. -EINVAL when they are not an object. */
int chat_xml_args(struct sbuf *b, const char *arguments, const char *open, const char *mid,
                    const char *close)
{
    json_t *o = json_loads(arguments, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return -EINVAL;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        put(b, open);
        put(b, k);
        put(b, mid);
        char *j = json_is_string(v) ? NULL : fl_json_dumps_python(v);
        put(b, json_is_string(v) ? json_string_value(v) : j ? j : "");
        free(j);
        put(b, close);
    }
    json_decref(o);
    return 0;
}

int chat_put_tojson(struct sbuf *b, const char *arguments)
{
    json_t *v = json_loads(arguments, JSON_DECODE_ANY, NULL);
    char *j = v ? fl_json_dumps_python(v) : NULL;
    json_decref(v);
    if (!j) {
        const int rc = v ? -ENOMEM : -EINVAL;
        if (!b->err)
            b->err = rc;
        return rc;
    }
    put(b, j);
    free(j);
    return 0;
}
