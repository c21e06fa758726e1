/* tool-stream.c: the calls of an answer still being written (tool-calls.h's
 * fl_tool_calls_partial), so that a stream can send a call's name and its
 * arguments as they come, as llama-server and OpenAI do.
 *
 * The open block is healed: cut where the text stops being certain (after
 * the last whole member of the arguments' object, or the last whole
 * key/value pair), closed as its format closes it, and read by the same
 * readers as a whole answer (tool-calls.c). Its last call's arguments,
 * written as those readers write them (compact JSON, members in order),
 * less their closing brace, are then a prefix of what that call's
 * arguments will be: later text only adds members (a key written twice
 * makes the whole answer no call, tool-calls.c). A stream that sent a call
 * whose answer then does not read as calls (cut by max_tokens, malformed)
 * cannot take it back; the whole answer's text then comes as content. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text/tool-calls-impl.h"
#include "text/tool-calls.h"

/* A growing string; the first allocation failure sticks in err. */
struct text {
    char *p;
    size_t n;
    int err;
};

static void add(struct text *t, const char *s, size_t n)
{
    char *p = t->err ? NULL : realloc(t->p, t->n + n + 1);
    if (!p) {
        t->err = -ENOMEM;
        return;
    }
    memcpy(p + t->n, s, n);
    t->p = p;
    t->n += n;
    t->p[t->n] = '\0';
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && isspace((unsigned char)s[i]))
        i++;
    return i;
}

/* s[i] is '"': the index past the string's closing quote, or 0 when it is
 * not closed yet. */
static size_t string_end(const char *s, size_t n, size_t i)
{
    for (size_t k = i + 1; k < n; k++) {
        if (s[k] == '\\')
            k++;
        else if (s[k] == '"')
            return k + 1;
    }
    return 0;
}

/* s[0..n) starts (after blanks) with a JSON object: where to cut it so
 * that it ends after its last member later text cannot change (at the last
 * comma between its members, or at its closing brace; just past the
 * opening brace when no member is whole yet). 0: s does not start with
 * '{'. */
static size_t members_end(const char *s, size_t n)
{
    size_t i = skip_ws(s, n, 0);
    if (i == n || s[i] != '{')
        return 0;
    size_t cut = i + 1;
    int depth = 0;
    for (; i < n; i++) {
        if (s[i] == '"') {
            const size_t e = string_end(s, n, i);
            if (!e)
                break;
            i = e - 1;
        } else if (s[i] == '{' || s[i] == '[') {
            depth++;
        } else if (s[i] == '}' || s[i] == ']') {
            if (--depth == 0)
                return i;
        } else if (s[i] == ',' && depth == 1) {
            cut = i;
        }
    }
    return cut;
}

/* s[*i..) holds the exact bytes word (after blanks): *i past them. */
static bool word(const char *s, size_t n, size_t *i, const char *w)
{
    const size_t k = skip_ws(s, n, *i), wn = strlen(w);
    if (n - k < wn || memcmp(s + k, w, wn))
        return false;
    *i = k + wn;
    return true;
}

/* chatml's open block: {"name": "NAME", "arguments": {... healed (the
 * name first: else nothing before the block closes). */
static bool heal_chatml(const char *s, size_t n, struct text *h)
{
    size_t i = 0, e;
    if (!word(s, n, &i, "{") || !word(s, n, &i, "\"name\"") || !word(s, n, &i, ":"))
        return false;
    i = skip_ws(s, n, i);
    if (i == n || s[i] != '"' || !(e = string_end(s, n, i)))
        return false;
    i = e;
    if (!word(s, n, &i, ",") || !word(s, n, &i, "\"arguments\"") || !word(s, n, &i, ":"))
        return false;
    const size_t cut = members_end(s + i, n - i);
    if (!cut)
        return false;
    add(h, s, i + cut);
    add(h, "}}", 2);
    return true;
}

/* Where the arguments of the open entry at e (n bytes) start, or 0 when
 * its name is not whole yet. */
static size_t entry_args(const struct fl_tool_entry_tags *t, const char *e, size_t n)
{
    const char *mid = memmem(e, n, t->mid, strlen(t->mid));
    if (!mid)
        return 0;
    size_t i = (size_t)(mid - e) + strlen(t->mid);
    if (t->fenced) { /* the name runs to the newline, the fence follows */
        const char *nl = memchr(e + i, '\n', n - i);
        const char *f = nl ? memmem(nl, (size_t)(e + n - nl), "```", 3) : NULL;
        if (!f)
            return 0;
        i = (size_t)(f - e) + 3;
        if (n - i >= 4 && !memcmp(e + i, "json", 4))
            i += 4;
    }
    return i;
}

static bool heal_section(const struct fl_tool_entry_tags *t, const char *s, size_t n, struct text *h,
                         bool *open)
{
    const size_t bn = strlen(t->begin), en = strlen(t->end);
    size_t i = skip_ws(s, n, 0), whole = 0;
    while (i < n && n - i >= bn && !memcmp(s + i, t->begin, bn)) {
        const char *e = memmem(s + i, n - i, t->end, en);
        if (e) { /* a whole entry */
            i = skip_ws(s, n, (size_t)(e - s) + en);
            whole = i;
            continue;
        }
        const size_t a = entry_args(t, s + i, n - i);
        const size_t cut = a ? members_end(s + i + a, n - i - a) : 0;
        if (!cut)
            break;
        add(h, s, i + a + cut);
        add(h, "}", 1);
        if (t->fenced)
            add(h, "\n```", 4);
        add(h, t->end, en);
        *open = true;
        return true;
    }
    add(h, s, whole);
    return whole > 0;
}

/* Where w last occurs in s[0..n), or NULL. */
static const char *last_of(const char *s, size_t n, const char *w)
{
    const size_t wn = strlen(w);
    const char *last = NULL;
    for (const char *p = s; (p = memmem(p, (size_t)(s + n - p), w, wn)); p += wn)
        last = p;
    return last;
}

/* The XML-style calls (Qwen's <function=, MiniMax's <invoke name="): the
 * open call cut after its last whole pair and closed. */
static bool heal_xml(const struct fl_tool_xml_tags *t, const char *s, size_t n, struct text *h,
                     bool *open)
{
    const char *c = last_of(s, n, t->call);
    if (!c)
        return false;
    const size_t at = (size_t)(c - s);
    const char *ce = memmem(c, n - at, t->call_end, strlen(t->call_end));
    if (ce) { /* every call whole (what follows may be the block's close, cut) */
        add(h, s, (size_t)(ce - s) + strlen(t->call_end));
        return true;
    }
    const char *ne = memmem(c, n - at, t->name_end, strlen(t->name_end));
    if (!ne) { /* the calls before it */
        add(h, s, at);
        return at > 0 && memmem(s, at, t->call, strlen(t->call));
    }
    const char *v = last_of(ne, (size_t)(s + n - ne), t->value_end);
    const char *cut = v ? v + strlen(t->value_end) : ne + strlen(t->name_end);
    add(h, s, (size_t)(cut - s));
    add(h, "\n", 1);
    add(h, t->call_end, strlen(t->call_end));
    *open = true;
    return true;
}

/* GLM's open block: NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>...
 * cut after its last whole pair (the name whole: a newline or a tag after
 * it). */
static bool heal_glm(const char *s, size_t n, struct text *h, bool *open)
{
    size_t i = skip_ws(s, n, 0);
    while (i < n && s[i] != '\n' && s[i] != '<')
        i++;
    if (i == n)
        return false;
    const char *v = last_of(s, n, "</arg_value>");
    add(h, s, v ? (size_t)(v - s) + 12 : i);
    *open = true;
    return true;
}

/* MiniMax-M3's open block: its whole calls, then the open one cut after
 * its last whole argument (its tags nest: an argument is whole when the
 * depth of tags comes back to the call's) and closed. Every tag follows
 * the namespace token, which no value holds. */
static bool heal_m3(const char *s, size_t n, struct text *h, bool *open)
{
    static const char ns[] = FL_MINIMAX_M3_NS, invoke[] = FL_MINIMAX_M3_NS "<invoke name=\"";
    const size_t nsn = sizeof(ns) - 1;
    size_t i = skip_ws(s, n, 0), whole = 0, cut = 0;
    for (bool closed = true; closed && n - i >= sizeof(invoke) - 1 &&
                             !memcmp(s + i, invoke, sizeof(invoke) - 1);) {
        int depth = 0;
        closed = false;
        for (const char *t = s + i; (t = memmem(t, (size_t)(s + n - t), ns, nsn)); t += nsn) {
            const size_t at = (size_t)(t - s) + nsn;
            const char *gt = at < n ? memchr(s + at, '>', n - at) : NULL;
            if (!gt || s[at] != '<')
                break; /* a tag still being written, or not one */
            depth += s[at + 1] == '/' ? -1 : 1;
            if (depth == 1) /* the call's opening, or an argument's close */
                cut = (size_t)(gt - s) + 1;
            if (depth == 0) { /* the call's close */
                i = skip_ws(s, n, (size_t)(gt - s) + 1);
                whole = i;
                cut = 0;
                closed = true;
                break;
            }
        }
    }
    if (!cut) {
        add(h, s, whole);
        return whole > 0;
    }
    add(h, s, cut);
    add(h, FL_MINIMAX_M3_NS "</invoke>", sizeof(FL_MINIMAX_M3_NS "</invoke>") - 1);
    *open = true;
    return true;
}

/* Kimi K3's open tools part: its calls cut after their last whole
 * argument and closed, as the XML formats' are (the call's head, its
 * name's and index's attributes, runs to <|sep|>). */
static bool heal_k3(const char *s, size_t n, struct text *h, bool *open)
{
    static const struct fl_tool_xml_tags k3 = {
        .call = "<|open|>call", .name_end = "<|sep|>", .call_end = "<|close|>call<|sep|>",
        .value_end = "<|close|>argument<|sep|>"
    };
    return heal_xml(&k3, s, n, h, open);
}

/* The open block's inside healed into h: false when nothing in it is
 * certain yet; *open: its last call is cut (its arguments go on). */
static bool heal(enum fl_chat_format fmt, const char *s, size_t n, struct text *h, bool *open)
{
    const struct fl_tool_entry_tags *entries = fl_tool_entry_tags(fmt);
    const struct fl_tool_xml_tags *xml = fl_tool_xml_tags(fmt);
    if (entries)
        return heal_section(entries, s, n, h, open);
    if (xml)
        return heal_xml(xml, s, n, h, open);
    switch (fmt) {
    case FL_CHAT_CHATML: return heal_chatml(s, n, h) && (*open = true);
    case FL_CHAT_GLM45:
    case FL_CHAT_GLM47: return heal_glm(s, n, h, open);
    case FL_CHAT_MINIMAX_M3: return heal_m3(s, n, h, open);
    case FL_CHAT_KIMI_K3: return heal_k3(s, n, h, open);
    default: return false;
    }
}

/* Reads one block's inside into a; a block that does not read leaves a as
 * it was (-EINVAL). */
static int read_or_keep(enum fl_chat_format fmt, const char *s, size_t n, struct fl_tool_answer *a)
{
    const int before = a->n_calls;
    const int rc = fl_tool_read_block(fmt, s, n, a);
    while (rc && a->n_calls > before) {
        a->n_calls--;
        free(a->calls[a->n_calls].name);
        free(a->calls[a->n_calls].arguments);
    }
    return rc;
}

/* The blocks of text[0..len) into a, the open one healed; *open: the last
 * call read is cut. */
static int read_so_far(enum fl_chat_format fmt, const char *text, size_t len,
                       struct fl_tool_answer *a, bool *open)
{
    const char *p = text, *end = text + len, *otag = fl_tool_calls_block_open(fmt);
    const char *ctag = fl_tool_calls_block_close(fmt);
    const size_t on = strlen(otag), cn = strlen(ctag);
    for (const char *o; (o = memmem(p, (size_t)(end - p), otag, on));) {
        const char *in = o + on, *c = memmem(in, (size_t)(end - in), ctag, cn);
        if (c) {
            if (read_or_keep(fmt, in, (size_t)(c - in), a))
                return 0; /* not a call: no more are certain */
            p = c + cn;
            continue;
        }
        struct text h = { 0 };
        bool cut = false;
        const int rc = heal(fmt, in, (size_t)(end - in), &h, &cut) && !h.err
                           ? read_or_keep(fmt, h.p, h.n, a) : h.err;
        free(h.p);
        if (rc == -ENOMEM)
            return rc;
        *open = cut && !rc;
        return 0;
    }
    return 0;
}

/* gpt-oss's one call: its header whole (to=functions.NAME ... <|message|>),
 * its arguments healed. */
static int read_gpt_oss_so_far(const char *text, size_t len, struct fl_tool_answer *a, bool *open)
{
    const char *name;
    size_t name_n;
    const char *msg = fl_tool_gpt_oss_header(text, len, &name, &name_n);
    const size_t at = msg ? (size_t)(msg - text) + 11 : 0; /* past <|message|> */
    const size_t cut = msg ? members_end(text + at, len - at) : 0;
    if (!cut)
        return 0;
    struct text h = { 0 };
    add(&h, text, at + cut);
    add(&h, "}", 1);
    a->content = h.err ? NULL : malloc(h.n + 1);
    int rc = !a->content ? -ENOMEM : fl_tool_read_gpt_oss(h.p, h.n, a);
    free(h.p);
    if (rc) /* not a call (yet) */
        fl_tool_answer_free(a);
    *open = !rc;
    return rc == -ENOMEM ? rc : 0;
}

int fl_tool_calls_partial(enum fl_chat_format fmt, const char *text, size_t len,
                          struct fl_tool_partial **out)
{
    *out = NULL;
    if (!fl_chat_has_tools(fmt) || !len)
        return 0;
    struct fl_tool_answer a = { 0 };
    bool open = false;
    int rc = fmt == FL_CHAT_GPT_OSS ? read_gpt_oss_so_far(text, len, &a, &open)
                                    : read_so_far(fmt, text, len, &a, &open);
    struct fl_tool_partial *v = !rc && a.n_calls ? calloc((size_t)a.n_calls, sizeof(*v)) : NULL;
    if (!rc && a.n_calls && !v)
        rc = -ENOMEM;
    for (int i = 0; v && i < a.n_calls; i++) { /* the calls move over */
        v[i] = (struct fl_tool_partial){ .name = a.calls[i].name, .args = a.calls[i].arguments,
                                         .args_len = strlen(a.calls[i].arguments), .whole = true };
        a.calls[i].name = a.calls[i].arguments = NULL;
    }
    if (v && open) { /* the cut call's closing brace is not certain yet */
        struct fl_tool_partial *last = &v[a.n_calls - 1];
        last->args[--last->args_len] = '\0';
        last->whole = false;
    }
    const int n = v ? a.n_calls : 0;
    fl_tool_answer_free(&a);
    if (rc)
        return rc;
    *out = v;
    return n;
}

void fl_tool_partials_free(struct fl_tool_partial *p, int n)
{
    for (int i = 0; p && i < n; i++) {
        free(p[i].name);
        free(p[i].args);
    }
    free(p);
}
