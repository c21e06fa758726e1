/* tool-calls.c: see text/tool-calls.h. */
#include "text/tool-calls.h"
#include "text/tool-calls-impl.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

/* The length of MiniMax-M3's namespace token (text/chat.h). */
#define MM3_NS_LEN (sizeof(FL_MINIMAX_M3_NS) - 1)

/* gpt-oss writes a call as a message to "functions.NAME"; what may open
 * one: the recipient, or a new message's or channel's header. */
static const char *const gpt_oss_marks[] = { "to=functions.", "<|start|>", "<|channel|>" };

static bool kimi(enum fl_chat_format fmt)
{
    return fmt == FL_CHAT_KIMI_K2_INSTRUCT || fmt == FL_CHAT_KIMI_K2_THINKING;
}

/* V3-0324's and R1's entries fence the arguments as ```json; V3.1's do not. */
static bool deepseek_fenced(enum fl_chat_format fmt)
{
    return fmt == FL_CHAT_DEEPSEEK_V3_0324 || fmt == FL_CHAT_DEEPSEEK_R1;
}

static bool deepseek(enum fl_chat_format fmt)
{
    return fmt == FL_CHAT_DEEPSEEK_V31 || deepseek_fenced(fmt);
}

const struct fl_tool_entry_tags *fl_tool_entry_tags(enum fl_chat_format fmt)
{
    static const struct fl_tool_entry_tags
        kimi_k2 = { "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
                    false },
        ds = { "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", false },
        ds_fenced = { "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", true };
    return kimi(fmt) ? &kimi_k2 : deepseek_fenced(fmt) ? &ds_fenced : deepseek(fmt) ? &ds : NULL;
}

const char *fl_tool_calls_block_open(enum fl_chat_format fmt)
{
    return fmt == FL_CHAT_MINIMAX_M2     ? "<minimax:tool_call>"
           : fmt == FL_CHAT_MINIMAX_M3   ? FL_MINIMAX_M3_NS "<tool_call>"
           : fmt == FL_CHAT_KIMI_K3      ? "<|open|>tools<|sep|>"
           : fmt == FL_CHAT_DEEPSEEK_V32 ? "<｜DSML｜function_calls>"
           : kimi(fmt)                   ? "<|tool_calls_section_begin|>"
           : deepseek(fmt)               ? "<｜tool▁calls▁begin｜>"
                                         : "<tool_call>";
}

const char *fl_tool_calls_block_lead(enum fl_chat_format fmt)
{
    return fmt == FL_CHAT_KIMI_K3 ? "<|close|>response<|sep|>" : "";
}

/* The bytes before the first of n marks, or before a tail that may begin
 * one. */
static size_t before_marks(const char *text, size_t len, const char *const *marks, size_t n)
{
    size_t at = len;
    for (size_t i = 0; i < n; i++) {
        const size_t tn = strlen(marks[i]);
        const char *open = memmem(text, at, marks[i], tn);
        if (open) {
            at = (size_t)(open - text);
            continue;
        }
        for (size_t k = tn - 1; k > 0; k--) /* a tail that may be its start waits for more */
            if (k <= at && at == len && !memcmp(text + len - k, marks[i], k)) {
                at = len - k;
                break;
            }
    }
    return at;
}

const char *fl_tool_calls_block_close(enum fl_chat_format fmt)
{
    return fmt == FL_CHAT_MINIMAX_M2     ? "</minimax:tool_call>"
           : fmt == FL_CHAT_MINIMAX_M3   ? FL_MINIMAX_M3_NS "</tool_call>"
           : fmt == FL_CHAT_KIMI_K3      ? "<|close|>tools<|sep|>"
           : fmt == FL_CHAT_DEEPSEEK_V32 ? "</｜DSML｜function_calls>"
           : kimi(fmt)                   ? "<|tool_calls_section_end|>"
           : deepseek(fmt)               ? "<｜tool▁calls▁end｜>"
                                         : "</tool_call>";
}

size_t fl_tool_calls_content_prefix(enum fl_chat_format fmt, const char *text, size_t len)
{
    if (!fl_chat_has_tools(fmt))
        return len;
    if (fmt == FL_CHAT_GPT_OSS)
        return before_marks(text, len, gpt_oss_marks, 3);
    const char *open = fl_tool_calls_block_open(fmt), *lead = fl_tool_calls_block_lead(fmt);
    char led[64]; /* the opening after its lead, which is not content either */
    snprintf(led, sizeof(led), "%s%s", lead, open);
    const char *marks[] = { led, open };
    return before_marks(text, len, marks, lead[0] ? 2 : 1);
}

/* "arguments": an object, or a string holding one (some models quote it). */
static json_t *arguments_of(json_t *call)
{
    json_t *a = json_object_get(call, "arguments");
    if (json_is_object(a))
        return json_incref(a);
    if (!json_is_string(a))
        return NULL;
    json_t *v = json_loadb(json_string_value(a), json_string_length(a), JSON_REJECT_DUPLICATES, NULL);
    if (json_is_object(v))
        return v;
    json_decref(v);
    return NULL;
}

bool fl_tool_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || s[i] == '-' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9') ||
              (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
            return false;
    return true;
}

static int make_call(const char *name, size_t name_len, json_t *args, struct fl_tool_call *out)
{
    if (!fl_tool_name_ok(name, name_len) || !json_is_object(args))
        return -EINVAL;
    out->name = strndup(name, name_len);
    out->arguments = fl_json_line(args); /* compact, a model's 0.1 as 0.1 (not 17 digits) */
    return out->name && out->arguments ? 0 : -ENOMEM;
}

/* chatml: {"name": ..., "arguments": {...}}. */
static int read_json_call(const char *s, size_t n, struct fl_tool_call *out)
{
    json_t *v = json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
    const char *name = json_string_value(json_object_get(v, "name"));
    json_t *args = v ? arguments_of(v) : NULL;
    int rc = make_call(name, name ? strlen(name) : 0, args, out);
    json_decref(args);
    json_decref(v);
    return rc;
}

static const char *skip_space(const char *p, const char *end)
{
    while (p < end && isspace((unsigned char)*p))
        p++;
    return p;
}

/* *p starts with open (which may be ""): the text up to close, and *p past
 * that. */
static bool tagged(const char **p, const char *end, const char *open, const char *close,
                   const char **v, size_t *vn)
{
    const size_t on = strlen(open), cn = strlen(close);
    if ((size_t)(end - *p) < on || memcmp(*p, open, on))
        return false;
    const char *c = memmem(*p + on, (size_t)(end - *p - (ptrdiff_t)on), close, cn);
    if (!c)
        return false;
    *v = *p + on, *vn = (size_t)(c - *v);
    *p = c + cn;
    return true;
}

/* GLM's value: JSON when it reads as a number, object, array, true, false
 * or null (the template writes those as JSON), else the text itself (it
 * writes strings bare, so "42" meant as a string comes back a number). */
static json_t *glm_value(const char *v, size_t n)
{
    json_t *j = json_loadb(v, n, JSON_DECODE_ANY, NULL);
    if (j && !json_is_string(j))
        return j;
    json_decref(j);
    return json_stringn(v, n);
}

/* args[k] = value (taken): a key is UTF-8 text without NUL (what a JSON
 * string holds) and given once (a key given twice makes no call, as JSON's
 * duplicate keys do: a stream sent the first value already,
 * text/tool-stream.c); a NULL value makes no call either. */
static int put_pair(json_t *args, const char *k, size_t kn, json_t *value)
{
    json_t *key = json_stringn(k, kn);
    int rc = key && value && !memchr(k, 0, kn) && !json_object_get(args, json_string_value(key))
                 ? 0 : -EINVAL;
    if (!rc && json_object_set(args, json_string_value(key), value))
        rc = -ENOMEM;
    json_decref(key);
    json_decref(value);
    return rc;
}

/* A value is UTF-8 text without NUL, read as glm_value reads it. */
static int set_pair(json_t *args, const char *k, size_t kn, const char *v, size_t vn)
{
    return put_pair(args, k, kn, memchr(v, 0, vn) ? NULL : glm_value(v, vn));
}

/* DeepSeek V3.2's pair: v starts with its type, true"> (v the string as it
 * is) or false"> (v JSON, the call none when it is not). */
static int set_typed_pair(json_t *args, const char *k, size_t kn, const char *v, size_t vn)
{
    const bool str = vn >= 6 && !memcmp(v, "true\">", 6);
    if (!str && (vn < 7 || memcmp(v, "false\">", 7)))
        return -EINVAL;
    if (memchr(k, '"', kn) || memchr(k, '<', kn)) /* the key ran past its own pair's tags */
        return -EINVAL;
    v += str ? 6 : 7, vn -= str ? 6 : 7;
    if (memchr(v, 0, vn)) /* no JSON string holds a NUL (a call's arguments are read back) */
        return put_pair(args, k, kn, NULL);
    return put_pair(args, k, kn,
                    str ? json_stringn(v, vn) : json_loadb(v, vn, JSON_DECODE_ANY, NULL));
}

/* glm-4.5: NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n... */
static int read_glm_call(const char *s, size_t n, struct fl_tool_call *out)
{
    const char *end = s + n, *p = skip_space(s, end);
    const char *name = p;
    while (p < end && *p != '\n' && *p != '<')
        p++;
    const char *name_end = p;
    while (name_end > name && isspace((unsigned char)name_end[-1]))
        name_end--;
    json_t *args = json_object();
    int rc = args ? 0 : -ENOMEM;
    for (p = skip_space(p, end); !rc && p < end; p = skip_space(p, end)) {
        const char *k, *v;
        size_t kn, vn;
        bool pair = tagged(&p, end, "<arg_key>", "</arg_key>", &k, &kn);
        p = skip_space(p, end);
        if (!pair || !tagged(&p, end, "<arg_value>", "</arg_value>", &v, &vn)) {
            rc = -EINVAL;
            break;
        }
        /* a key or value that is no UTF-8 text makes no call */
        rc = set_pair(args, k, kn, v, vn);
    }
    if (!rc)
        rc = make_call(name, (size_t)(name_end - name), args, out);
    json_decref(args);
    return rc;
}

const struct fl_tool_xml_tags *fl_tool_xml_tags(enum fl_chat_format fmt)
{
    static const struct fl_tool_xml_tags
        invoke = { "<invoke name=\"", "\">", "</invoke>", "<parameter name=\"", "\">",
                   "</parameter>", false, false },
        function = { "<function=", ">", "</function>", "<parameter=", ">", "</parameter>", true,
                     false },
        dsml = { "<｜DSML｜invoke name=\"", "\">", "</｜DSML｜invoke>", "<｜DSML｜parameter name=\"",
                 "\" string=\"", "</｜DSML｜parameter>", false, true };
    return fmt == FL_CHAT_MINIMAX_M2                               ? &invoke
           : fmt == FL_CHAT_DEEPSEEK_V32                           ? &dsml
           : fmt == FL_CHAT_QWEN35 || fmt == FL_CHAT_QWEN3_CODER ? &function
                                                                   : NULL;
}

/* minimax-m2: <invoke name="NAME">\n<parameter name="K">V</parameter>\n...
 * </invoke>; qwen3.5 / qwen3-coder: <function=NAME>\n<parameter=K>\nV\n
 * </parameter>\n...</function>. At *p, past it after. */
static int read_xml_call(const struct fl_tool_xml_tags *t, const char **p, const char *end,
                         struct fl_tool_call *out)
{
    const char *name, *body;
    size_t nn, bn;
    if (!tagged(p, end, t->call, t->name_end, &name, &nn) ||
        !tagged(p, end, "", t->call_end, &body, &bn))
        return -EINVAL;
    json_t *args = json_object();
    int rc = args ? 0 : -ENOMEM;
    const char *q = skip_space(body, body + bn), *bend = body + bn;
    for (; !rc && q < bend; q = skip_space(q, bend)) {
        const char *k, *v;
        size_t kn, vn;
        if (!tagged(&q, bend, t->key, t->key_end, &k, &kn) ||
            !tagged(&q, bend, "", t->value_end, &v, &vn)) {
            rc = -EINVAL;
            break;
        }
        if (t->newlines && vn && v[0] == '\n')
            v++, vn--;
        if (t->newlines && vn && v[vn - 1] == '\n')
            vn--;
        rc = t->typed ? set_typed_pair(args, k, kn, v, vn) : set_pair(args, k, kn, v, vn);
    }
    if (!rc)
        rc = make_call(name, nn, args, out);
    json_decref(args);
    return rc;
}

static int read_invoke(const char **p, const char *end, struct fl_tool_call *out)
{
    return read_xml_call(fl_tool_xml_tags(FL_CHAT_MINIMAX_M2), p, end, out);
}

static int read_dsml(const char **p, const char *end, struct fl_tool_call *out)
{
    return read_xml_call(fl_tool_xml_tags(FL_CHAT_DEEPSEEK_V32), p, end, out);
}

static int read_function(const char **p, const char *end, struct fl_tool_call *out)
{
    return read_xml_call(fl_tool_xml_tags(FL_CHAT_QWEN35), p, end, out);
}

/* ---- MiniMax-M3's calls: NS<invoke name="NAME">NS<K>V NS</K>...NS</invoke>,
 * every tag after the namespace token NS, values nested ---- */

/* Nesting deeper than this is no call (a hostile answer cannot recurse far). */
enum { M3_MAX_DEPTH = 32 };

/* At *p (blanks first when skip): an opening tag NS<NAME>; *p past it. */
static bool m3_open(const char **p, const char *end, const char **name, size_t *nn)
{
    const char *s = *p;
    if ((size_t)(end - s) < MM3_NS_LEN + 2 || memcmp(s, FL_MINIMAX_M3_NS, MM3_NS_LEN) ||
        s[MM3_NS_LEN] != '<' || s[MM3_NS_LEN + 1] == '/')
        return false;
    s += MM3_NS_LEN + 1;
    const char *gt = memchr(s, '>', (size_t)(end - s));
    if (!gt || gt == s || memchr(s, '<', (size_t)(gt - s)))
        return false;
    *name = s, *nn = (size_t)(gt - s);
    *p = gt + 1;
    return true;
}

/* At *p: the closing tag NS</NAME>; *p past it. */
static bool m3_close(const char **p, const char *end, const char *name, size_t nn)
{
    const char *s = *p;
    if ((size_t)(end - s) < MM3_NS_LEN + nn + 3 || memcmp(s, FL_MINIMAX_M3_NS "</", MM3_NS_LEN + 2) ||
        memcmp(s + MM3_NS_LEN + 2, name, nn) || s[MM3_NS_LEN + 2 + nn] != '>')
        return false;
    *p = s + MM3_NS_LEN + 3 + nn;
    return true;
}

static json_t *m3_value(const char **p, const char *end, int depth);

/* One tag and its value (at *q, past its close after) appended to pairs
 * as [key, value]: 0, or -EINVAL when it is not one. */
static int m3_member(const char **q, const char *end, int depth, json_t *pairs)
{
    const char *k;
    size_t kn;
    if (!m3_open(q, end, &k, &kn))
        return -EINVAL;
    json_t *x = m3_value(q, end, depth + 1);
    json_t *pair = x ? json_pack("[s#O]", k, (int)kn, x) : NULL;
    json_decref(x);
    if (!pair || !m3_close(q, end, k, kn)) {
        json_decref(pair);
        return -EINVAL;
    }
    return json_array_append_new(pairs, pair) ? -EINVAL : 0; /* (which takes pair either way) */
}

/* The tags from *p on (*p after: at the tag that closes them, blanks
 * skipped): an array when every one is an <item>, else an object (no key
 * twice); NULL when they are not well-formed tags. */
static json_t *m3_container(const char **p, const char *end, int depth)
{
    json_t *pairs = json_array();
    const char *q = skip_space(*p, end), *k;
    size_t kn;
    for (const char *t = q; pairs && m3_open(&t, end, &k, &kn); t = q = skip_space(q, end))
        if (m3_member(&q, end, depth, pairs)) {
            json_decref(pairs);
            return NULL;
        }
    *p = q;
    size_t i;
    json_t *pr;
    bool items = json_array_size(pairs) > 0;
    json_array_foreach(pairs, i, pr)
        items = items && !strcmp(json_string_value(json_array_get(pr, 0)), "item");
    json_t *v = items || !json_array_size(pairs) ? json_array() : json_object();
    json_array_foreach(pairs, i, pr) {
        json_t *key = json_array_get(pr, 0), *x = json_incref(json_array_get(pr, 1));
        if (!v)
            json_decref(x); /* (both take x, whatever happens) */
        else if (json_is_array(v) ? json_array_append_new(v, x)
                                  : put_pair(v, json_string_value(key), json_string_length(key), x)) {
            json_decref(v);
            v = NULL;
        }
    }
    json_decref(pairs);
    return v;
}

/* A value at *p, up to its closing tag: nested tags, or text read as GLM's
 * values are (an empty one is ""). */
static json_t *m3_value(const char **p, const char *end, int depth)
{
    const char *q = skip_space(*p, end), *name;
    size_t nn;
    if (depth > M3_MAX_DEPTH)
        return NULL;
    if (m3_open(&q, end, &name, &nn))
        return m3_container(p, end, depth);
    const char *ns = memmem(*p, (size_t)(end - *p), FL_MINIMAX_M3_NS, MM3_NS_LEN);
    if (!ns || memchr(*p, 0, (size_t)(ns - *p)))
        return NULL;
    json_t *v = glm_value(*p, (size_t)(ns - *p));
    *p = ns;
    return v;
}

/* A call: NS<invoke name="NAME"> its arguments' tags NS</invoke>; at *p,
 * past it after. */
static int read_m3_invoke(const char **p, const char *end, struct fl_tool_call *out)
{
    const char *name;
    size_t nn;
    if (!tagged(p, end, FL_MINIMAX_M3_NS "<invoke name=\"", "\">", &name, &nn) ||
        memchr(name, '"', nn) || memchr(name, '<', nn))
        return -EINVAL;
    json_t *args = m3_container(p, end, 1);
    int rc = args && (json_is_object(args) || json_array_size(args) == 0) ? 0 : -EINVAL;
    if (!rc && !m3_close(p, end, "invoke", 6))
        rc = -EINVAL;
    if (!rc && json_is_array(args)) { /* no arguments */
        json_decref(args);
        args = json_object();
    }
    if (!rc)
        rc = make_call(name, nn, args, out);
    json_decref(args);
    return rc;
}

/* ---- Kimi K3's calls: <|open|>call tool="NAME" index="I"<|sep|>, an
 * <|open|>argument key="K" type="T"<|sep|>V<|close|>argument<|sep|> per
 * argument (or the object in <|open|>json type="object"<|sep|>...
 * <|close|>json<|sep|>), <|close|>call<|sep|> ---- */

/* An attribute's value with the template's escapes (&amp; &quot;) undone:
 * a new JSON string, NULL when it is no UTF-8 text. */
static json_t *attr_value(const char *s, size_t n)
{
    char *u = malloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; u && i < n; i++) {
        if (n - i >= 6 && !memcmp(s + i, "&quot;", 6))
            u[k++] = '"', i += 5;
        else if (n - i >= 5 && !memcmp(s + i, "&amp;", 5))
            u[k++] = '&', i += 4;
        else
            u[k++] = s[i];
    }
    json_t *v = u && !memchr(u, 0, k) ? json_stringn(u, k) : NULL;
    free(u);
    return v;
}

/* The attribute name="..." in a tag's head h[0..n) (its value escaped), or NULL. */
static const char *attr(const char *h, size_t n, const char *name, size_t *vn)
{
    const size_t an = strlen(name);
    for (const char *p = h; (p = memmem(p, (size_t)(h + n - p), name, an)); p += an) {
        if (p == h || p[-1] != ' ' || (size_t)(h + n - p) < an + 2 || p[an] != '=' || p[an + 1] != '"')
            continue;
        const char *v = p + an + 2, *q = memchr(v, '"', (size_t)(h + n - v));
        if (!q)
            return NULL;
        *vn = (size_t)(q - v);
        return v;
    }
    return NULL;
}

/* One argument at *p (past it after) into args: its value a string when
 * its type says string, else the JSON it holds. */
static int read_k3_argument(const char **p, const char *end, json_t *args)
{
    const char *head, *v;
    size_t hn, vn, kn, tn;
    if (!tagged(p, end, "<|open|>argument", "<|sep|>", &head, &hn) ||
        !tagged(p, end, "", "<|close|>argument<|sep|>", &v, &vn) || memchr(v, 0, vn))
        return -EINVAL;
    const char *k = attr(head, hn, "key", &kn), *type = attr(head, hn, "type", &tn);
    json_t *key = k ? attr_value(k, kn) : NULL;
    json_t *value = !type                                 ? glm_value(v, vn)
                    : tn == 6 && !memcmp(type, "string", 6) ? json_stringn(v, vn)
                                                          : json_loadb(v, vn, JSON_DECODE_ANY, NULL);
    const int rc = key ? put_pair(args, json_string_value(key), json_string_length(key), value)
                       : (json_decref(value), -EINVAL);
    json_decref(key);
    return rc;
}

static int read_k3_call(const char **p, const char *end, struct fl_tool_call *out)
{
    const char *head, *name;
    size_t hn, nn;
    if (!tagged(p, end, "<|open|>call", "<|sep|>", &head, &hn) ||
        !(name = attr(head, hn, "tool", &nn)))
        return -EINVAL;
    json_t *args = json_object();
    int rc = args ? 0 : -ENOMEM;
    const char *q = skip_space(*p, end), *js;
    size_t jn;
    if (!rc && tagged(&q, end, "<|open|>json type=\"object\"<|sep|>", "<|close|>json<|sep|>", &js,
                      &jn)) { /* the arguments' object as JSON text */
        json_decref(args);
        args = json_loadb(js, jn, JSON_REJECT_DUPLICATES, NULL);
        rc = json_is_object(args) ? 0 : -EINVAL;
        q = skip_space(q, end);
    }
    while (!rc && (size_t)(end - q) >= 16 && !memcmp(q, "<|open|>argument", 16)) {
        rc = read_k3_argument(&q, end, args);
        q = skip_space(q, end);
    }
    if (!rc && ((size_t)(end - q) < 20 || memcmp(q, "<|close|>call<|sep|>", 20)))
        rc = -EINVAL;
    if (!rc)
        rc = make_call(name, nn, args, out);
    if (!rc)
        *p = q + 20;
    json_decref(args);
    return rc;
}

/* Appends a call to a (freed with it whatever happens); -EINVAL when the
 * reader finds none. */
static int add_call(struct fl_tool_answer *a, int (*read)(const char **, const char *,
                                                           struct fl_tool_call *),
                    const char **p, const char *end)
{
    void *c = realloc(a->calls, sizeof(*a->calls) * (size_t)(a->n_calls + 1));
    if (!c)
        return -ENOMEM;
    a->calls = c;
    a->calls[a->n_calls] = (struct fl_tool_call){ 0 };
    return read(p, end, &a->calls[a->n_calls++]);
}

static int read_one_json(const char **p, const char *end, struct fl_tool_call *out)
{
    const char *s = *p;
    *p = end;
    return read_json_call(s, (size_t)(end - s), out);
}

static int read_one_glm(const char **p, const char *end, struct fl_tool_call *out)
{
    const char *s = *p;
    *p = end;
    return read_glm_call(s, (size_t)(end - s), out);
}

/* An entry of a section of calls: begin NAME mid ARGS end, ARGS a JSON
 * object; at *p, past it after. */
static int read_entry(const struct fl_tool_entry_tags *t, bool kimi_id, const char **p, const char *end,
                      struct fl_tool_call *out)
{
    const size_t bn = strlen(t->begin), mn = strlen(t->mid), en = strlen(t->end);
    if ((size_t)(end - *p) < bn || memcmp(*p, t->begin, bn))
        return -EINVAL;
    const char *id = *p + bn;
    const char *a = memmem(id, (size_t)(end - id), t->mid, mn);
    const char *e = a ? memmem(a, (size_t)(end - a), t->end, en) : NULL;
    if (!e)
        return -EINVAL;
    const char *name = id, *name_end = a;
    if (kimi_id) { /* functions.NAME:INDEX: the name (as llama.cpp's parser takes it) */
        if ((size_t)(a - id) > 10 && !memcmp(id, "functions.", 10))
            name += 10;
        for (const char *c = name_end; c > name; c--)
            if (c[-1] == ':') {
                name_end = c - 1;
                break;
            }
    }
    const char *args = a + mn;
    json_t *v = json_loadb(args, (size_t)(e - args), JSON_REJECT_DUPLICATES, NULL);
    const int rc = json_is_object(v) ? make_call(name, (size_t)(name_end - name), v, out) : -EINVAL;
    json_decref(v);
    *p = e + en;
    return rc;
}

/* Kimi K2's entry: <|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>
 * ARGS<|tool_call_end|>. */
static int read_kimi_call(const char **p, const char *end, struct fl_tool_call *out)
{
    return read_entry(fl_tool_entry_tags(FL_CHAT_KIMI_K2_INSTRUCT), true, p, end, out);
}

/* DeepSeek V3.1's: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>. */
static int read_deepseek_call(const char **p, const char *end, struct fl_tool_call *out)
{
    return read_entry(fl_tool_entry_tags(FL_CHAT_DEEPSEEK_V31), false, p, end, out);
}

/* V3-0324's and R1's: <｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```
 * <｜tool▁call▁end｜> (TYPE is "function"; the fence's "json" may be left out). */
static int read_fenced_call(const char **p, const char *end, struct fl_tool_call *out)
{
    const struct fl_tool_entry_tags *t = fl_tool_entry_tags(FL_CHAT_DEEPSEEK_R1);
    const size_t bn = strlen(t->begin), sn = strlen(t->mid), en = strlen(t->end);
    if ((size_t)(end - *p) < bn || memcmp(*p, t->begin, bn))
        return -EINVAL;
    const char *s = memmem(*p + bn, (size_t)(end - *p - bn), t->mid, sn);
    const char *e = s ? memmem(s, (size_t)(end - s), t->end, en) : NULL;
    const char *name = s ? s + sn : NULL;
    const char *open = e ? memmem(name, (size_t)(e - name), "```", 3) : NULL;
    if (!open)
        return -EINVAL;
    *p = e + en;
    const char *name_end = open, *args = open + 3, *close = e;
    while (name_end > name && isspace((unsigned char)name_end[-1]))
        name_end--;
    if ((size_t)(e - args) >= 4 && !memcmp(args, "json", 4))
        args += 4;
    while (close - args >= 3 && memcmp(close - 3, "```", 3)) /* the fence's end */
        close--;
    if (close - args < 3 || name_end == name)
        return -EINVAL;
    json_t *v = json_loadb(args, (size_t)(close - 3 - args), JSON_REJECT_DUPLICATES, NULL);
    const int rc = json_is_object(v) ? make_call(name, (size_t)(name_end - name), v, out) : -EINVAL;
    json_decref(v);
    return rc;
}

/* One block's inside: its calls (MiniMax's, Kimi's and DeepSeek's may hold
 * several; Qwen's XML one, read as several), -EINVAL when it is not only
 * calls. */
int fl_tool_read_block(enum fl_chat_format fmt, const char *s, size_t n, struct fl_tool_answer *a)
{
    const char *p = s, *end = s + n;
    const bool xml = fmt == FL_CHAT_QWEN35 || fmt == FL_CHAT_QWEN3_CODER;
    int (*entry)(const char **, const char *, struct fl_tool_call *) =
        kimi(fmt)              ? read_kimi_call
        : deepseek_fenced(fmt) ? read_fenced_call
        : deepseek(fmt)        ? read_deepseek_call
        : xml                  ? read_function
        : fmt == FL_CHAT_DEEPSEEK_V32 ? read_dsml
        : fmt == FL_CHAT_MINIMAX_M3   ? read_m3_invoke
        : fmt == FL_CHAT_KIMI_K3      ? read_k3_call
        : fmt == FL_CHAT_MINIMAX_M2   ? read_invoke
                                      : NULL;
    if (!entry) /* one call per block */
        return add_call(a, fmt == FL_CHAT_GLM45 || fmt == FL_CHAT_GLM47 ? read_one_glm : read_one_json,
                        &p, end);
    int rc = -EINVAL; /* at least one */
    for (p = skip_space(p, end); p < end; p = skip_space(p, end))
        if ((rc = add_call(a, entry, &p, end)))
            return rc;
    return rc;
}

int fl_tool_answer_content(const char *text, size_t len, struct fl_tool_answer *out)
{
    memset(out, 0, sizeof(*out));
    if (!(out->content = malloc(len + 1)))
        return -ENOMEM;
    memcpy(out->content, text, len);
    out->content[len] = '\0';
    out->content_len = len;
    return 0;
}

static void put(struct fl_tool_answer *a, const char *s, size_t n)
{
    memcpy(a->content + a->content_len, s, n);
    a->content_len += n;
}

static void trim(struct fl_tool_answer *a)
{
    size_t start = 0, end = a->content_len;
    while (start < end && isspace((unsigned char)a->content[start]))
        start++;
    while (end > start && isspace((unsigned char)a->content[end - 1]))
        end--;
    memmove(a->content, a->content + start, end - start);
    a->content_len = end - start;
    a->content[a->content_len] = '\0';
}

static bool ends_with(const char *s, const char *end, const char *tag)
{
    const size_t n = strlen(tag);
    return (size_t)(end - s) >= n && !memcmp(end - n, tag, n);
}

/* The blocks: 0 when every one is a call, -EINVAL when one is not. */
static int read_blocks(enum fl_chat_format fmt, const char *text, size_t len,
                       struct fl_tool_answer *a)
{
    const char *p = text, *end = text + len, *otag = fl_tool_calls_block_open(fmt);
    const char *ctag = fl_tool_calls_block_close(fmt), *lead = fl_tool_calls_block_lead(fmt);
    const size_t on = strlen(otag), cn = strlen(ctag);
    for (const char *open; (open = memmem(p, (size_t)(end - p), otag, on));) {
        const char *in = open + on;
        const char *close = memmem(in, (size_t)(end - in), ctag, cn);
        if (!close)
            return -EINVAL;
        put(a, p, (size_t)(open - p) - (ends_with(p, open, lead) ? strlen(lead) : 0));
        int rc = fl_tool_read_block(fmt, in, (size_t)(close - in), a);
        if (rc)
            return rc;
        p = close + cn;
    }
    put(a, p, (size_t)(end - p));
    return 0;
}

static bool skip(const char **p, const char *end, const char *s)
{
    const size_t n = strlen(s);
    if ((size_t)(end - *p) < n || memcmp(*p, s, n))
        return false;
    *p += n;
    return true;
}

/* After a call's recipient: the channel (when the recipient was in the
 * role), a constraint (" json", " <|constrain|>json") and <|message|>, as
 * llama.cpp's grammar for gpt-oss reads them: where the message starts, or
 * NULL. */
static const char *header_rest(const char *p, const char *end)
{
    if (skip(&p, end, "<|channel|>") && !skip(&p, end, "commentary") && !skip(&p, end, "analysis"))
        return NULL;
    const char *q = p;
    while (q < end && *q == ' ')
        q++;
    if (q > p) {
        skip(&q, end, "<|constrain|>");
        const char *w = q;
        while (q < end && (isalnum((unsigned char)*q) || *q == '_' || *q == '-'))
            q++;
        if (q == w)
            return NULL;
        p = q;
    }
    return skip(&p, end, "<|message|>") ? p - 11 : NULL;
}

const char *fl_tool_gpt_oss_header(const char *text, size_t len, const char **name,
                                   size_t *name_n)
{
    const char *end = text + len, *to = memmem(text, len, "to=functions.", 13);
    if (!to)
        return NULL;
    const char *p = *name = to + 13;
    while (p < end && *p != '<' && !isspace((unsigned char)*p))
        p++;
    *name_n = (size_t)(p - *name);
    return header_rest(p, end);
}

/* gpt-oss's call: its message's header names the recipient, in the role
 * (<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>)
 * or in the channel (<|channel|>commentary to=functions.NAME <|constrain|>json
 * <|message|>); the arguments run to <|call|> (an end-of-generation token,
 * so mostly to the end). The text before the header is content, a
 * commentary preamble's markup taken off. -EINVAL: no call. */
int fl_tool_read_gpt_oss(const char *text, size_t len, struct fl_tool_answer *a)
{
    const char *end = text + len, *name;
    size_t name_n;
    const char *msg = fl_tool_gpt_oss_header(text, len, &name, &name_n);
    if (!msg || !fl_tool_name_ok(name, name_n))
        return -EINVAL;
    const char *args = msg + 11, *stop = memmem(args, (size_t)(end - args), "<|call|>", 8);
    json_t *v = json_loadb(args, (size_t)((stop ? stop : end) - args), JSON_REJECT_DUPLICATES, NULL);
    int rc = !json_is_object(v) ? -EINVAL : !(a->calls = calloc(1, sizeof(*a->calls))) ? -ENOMEM : 0;
    if (!rc) {
        a->n_calls = 1;
        rc = make_call(name, name_n, v, &a->calls[0]);
    }
    json_decref(v);
    if (rc)
        return rc;
    const char *head = name - 13; /* the header's start: to=functions. */
    while (head > text && isspace((unsigned char)head[-1]))
        head--;
    static const char *const channel[] = { "<|channel|>commentary", "<|channel|>analysis" };
    for (int k = 0; k < 2; k++)
        if (ends_with(text, head, channel[k]))
            head -= strlen(channel[k]);
    if (ends_with(text, head, "<|start|>assistant"))
        head -= strlen("<|start|>assistant");
    const char *c = text, *ce = head;
    skip(&c, ce, "<|start|>assistant"); /* a commentary preamble's markup */
    skip(&c, ce, "<|channel|>commentary<|message|>");
    if (ends_with(c, ce, "<|end|>"))
        ce -= 7;
    put(a, c, (size_t)(ce - c));
    return 0;
}

int fl_tool_calls_parse(enum fl_chat_format fmt, const char *text, size_t len,
                        struct fl_tool_answer *out)
{
    memset(out, 0, sizeof(*out));
    if (!fl_chat_has_tools(fmt))
        return -ENOTSUP;
    if (!(out->content = malloc(len + 1)))
        return -ENOMEM;
    const int rc = fmt == FL_CHAT_GPT_OSS ? fl_tool_read_gpt_oss(text, len, out)
                                          : read_blocks(fmt, text, len, out);
    if (rc == 0 && out->n_calls) {
        out->content[out->content_len] = '\0';
        trim(out);
        static const char *const k3_tail[] = { "<|end_of_msg|>", "<|close|>message<|sep|>" };
        for (int i = 0; fmt == FL_CHAT_KIMI_K3 && i < 2; i++) /* the message's close */
            if (ends_with(out->content, out->content + out->content_len, k3_tail[i]))
                out->content[out->content_len -= strlen(k3_tail[i])] = '\0';
        return 0;
    }
    fl_tool_answer_free(out);
    /* no call, or one that is not well-formed: all of it is content */
    return rc == 0 || rc == -EINVAL ? fl_tool_answer_content(text, len, out) : rc;
}

void fl_tool_answer_free(struct fl_tool_answer *a)
{
    for (int i = 0; i < a->n_calls; i++) {
        free(a->calls[i].name);
        free(a->calls[i].arguments);
    }
    free(a->calls);
    free(a->content);
    memset(a, 0, sizeof(*a));
}
