/* tool-calls.c: see text/tool-calls.h. */
#include "text/tool-calls.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
#define OPEN_LEN (sizeof(OPEN) - 1)
#define CLOSE_LEN (sizeof(CLOSE) - 1)

static const char *find(const char *s, size_t n, const char *what, size_t wn)
{
    for (size_t i = 0; i + wn <= n; i++)
        if (!memcmp(s + i, what, wn))
            return s + i;
    return NULL;
}

size_t fl_tool_calls_content_prefix(enum fl_chat_format fmt, const char *text, size_t len)
{
    if (!fl_chat_has_tools(fmt))
        return len;
    const char *open = find(text, len, OPEN, OPEN_LEN);
    if (open)
        return (size_t)(open - text);
    /* a tail that may be the start of "<tool_call>" waits for more */
    for (size_t k = OPEN_LEN - 1; k > 0; k--)
        if (k <= len && !memcmp(text + len - k, OPEN, k))
            return len - k;
    return len;
}

/* "arguments": an object, or a string holding one (some models quote it). */
static json_t *arguments_of(json_t *call)
{
    json_t *a = json_object_get(call, "arguments");
    if (json_is_object(a))
        return json_incref(a);
    if (!json_is_string(a))
        return NULL;
    json_t *v = json_loadb(json_string_value(a), json_string_length(a), 0, NULL);
    if (json_is_object(v))
        return v;
    json_decref(v);
    return NULL;
}

/* One block's inside: 0 and the call, -EINVAL when it is not one. */
static int read_call(const char *s, size_t n, struct fl_tool_call *out)
{
    json_t *v = json_loadb(s, n, 0, NULL);
    const char *name = json_string_value(json_object_get(v, "name"));
    json_t *args = v ? arguments_of(v) : NULL;
    int rc = name && name[0] && args ? 0 : -EINVAL;
    if (!rc) {
        out->name = strdup(name);
        out->arguments = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
        rc = out->name && out->arguments ? 0 : -ENOMEM;
    }
    json_decref(args);
    json_decref(v);
    return rc;
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

/* The blocks: 0 when every one is a call, -EINVAL when one is not. */
static int read_blocks(const char *text, size_t len, struct fl_tool_answer *a)
{
    const char *p = text, *end = text + len;
    for (const char *open; (open = find(p, (size_t)(end - p), OPEN, OPEN_LEN));) {
        const char *in = open + OPEN_LEN;
        const char *close = find(in, (size_t)(end - in), CLOSE, CLOSE_LEN);
        if (!close)
            return -EINVAL;
        put(a, p, (size_t)(open - p));
        void *c = realloc(a->calls, sizeof(*a->calls) * (size_t)(a->n_calls + 1));
        if (!c)
            return -ENOMEM;
        a->calls = c;
        a->calls[a->n_calls] = (struct fl_tool_call){ 0 };
        int rc = read_call(in, (size_t)(close - in), &a->calls[a->n_calls]);
        a->n_calls++; /* freed with the answer either way */
        if (rc)
            return rc;
        p = close + CLOSE_LEN;
    }
    put(a, p, (size_t)(end - p));
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
    int rc = read_blocks(text, len, out);
    if (rc == -EINVAL || (rc == 0 && out->n_calls == 0)) { /* all of it is content */
        char *content = out->content;
        out->content = NULL;
        fl_tool_answer_free(out);
        out->content = content;
        out->content_len = 0;
        put(out, text, len);
        rc = 0;
    }
    if (rc) {
        fl_tool_answer_free(out);
        return rc;
    }
    out->content[out->content_len] = '\0';
    if (out->n_calls)
        trim(out);
    return 0;
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
