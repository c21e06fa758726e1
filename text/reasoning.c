/* reasoning.c: an answer's <think> part (reasoning.h). */
#include "text/reasoning.h"

#include <string.h>

#define OPEN "<think>"
#define CLOSE "</think>"

static bool blank(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* The longest end of s[0, n) that is a proper prefix of tag: a tag that
 * may yet be completed. */
static size_t partial_tag(const char *s, size_t n, const char *tag)
{
    const size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k))
            return k;
    return 0;
}

/* The reasoning from s[r] on: to the first </think>, the answer after it. */
static void from(const char *s, size_t n, size_t r, bool done, struct fl_reasoning_split *out)
{
    const char *close = memmem(s + r, n - r, CLOSE, strlen(CLOSE));
    size_t end = close ? (size_t)(close - s) : done ? n : n - partial_tag(s + r, n - r, CLOSE);
    size_t a = r, b = end;
    while (a < b && blank(s[a]))
        a++;
    while (b > a && blank(s[b - 1]))
        b--;
    out->r_off = a;
    out->r_len = b - a;
    if (!close) { /* the answer has not started */
        out->state = FL_REASONING_OPEN;
        out->c_off = n;
        out->settled = done ? n : b;
        return;
    }
    out->state = FL_REASONING_CLOSED;
    size_t c = end + strlen(CLOSE);
    while (c < n && blank(s[c]))
        c++;
    out->c_off = c;
    out->c_len = n - c;
    out->settled = n;
}

void fl_reasoning_split(const char *s, size_t n, bool opened, bool done,
                        struct fl_reasoning_split *out)
{
    memset(out, 0, sizeof(*out));
    if (!s) /* nothing written yet (n is 0) */
        s = "";
    if (opened) {
        from(s, n, 0, done, out);
        return;
    }
    size_t i = 0;
    while (i < n && blank(s[i]))
        i++;
    const size_t rest = n - i, t = strlen(OPEN);
    if (rest >= t && !memcmp(s + i, OPEN, t)) {
        from(s, n, i + t, done, out);
    } else if (!done && rest < t && !memcmp(s + i, OPEN, rest)) {
        out->c_off = n; /* blanks, or the start of <think>: undecided */
    } else {
        out->state = FL_REASONING_NONE; /* all answer, blanks kept */
        out->c_len = out->settled = n;
    }
}
