/* reasoning.c: an answer's reasoning part (reasoning.h). */
#include "text/reasoning.h"

#include <stdint.h>
#include <string.h>

const struct fl_reasoning_tags fl_think_tags = { "<think>", "</think>", "", "" };
/* MiniMax-M3's: an answer without reasoning starts with a bare </mm:think> */
const struct fl_reasoning_tags fl_mm_think_tags = { "<mm:think>", "</mm:think>", "", "</mm:think>" };
const struct fl_reasoning_tags fl_harmony_tags = {
    "<|channel|>analysis<|message|>", "<|end|>", "<|start|>assistant<|channel|>final<|message|>",
    "<|channel|>final<|message|>"
};

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

/* Where the answer starts at s[c] (blanks skipped): after opening when it
 * follows; SIZE_MAX while a partial one may still become it. */
static size_t answer_at(const char *opening, const char *s, size_t n, size_t c, bool done)
{
    while (c < n && blank(s[c]))
        c++;
    const size_t an = strlen(opening);
    if (!an)
        return c;
    if (n - c >= an)
        return memcmp(s + c, opening, an) ? c : c + an;
    return done || memcmp(s + c, opening, n - c) ? c : SIZE_MAX;
}

/* The reasoning from s[r] on: to the first close tag, the answer after it. */
static void from(const struct fl_reasoning_tags *t, const char *s, size_t n, size_t r, bool done,
                 struct fl_reasoning_split *out)
{
    const size_t cn = strlen(t->close);
    const char *close = memmem(s + r, n - r, t->close, cn);
    size_t end = close ? (size_t)(close - s) : done ? n : n - partial_tag(s + r, n - r, t->close);
    size_t a = r, b = end;
    while (a < b && blank(s[a]))
        a++;
    while (b > a && blank(s[b - 1]))
        b--;
    out->r_off = a;
    out->r_len = b - a;
    out->state = close ? FL_REASONING_CLOSED : FL_REASONING_OPEN;
    out->c_off = n;
    out->settled = done ? n : b;
    if (!close) /* the answer has not started */
        return;
    const size_t c = answer_at(t->answer, s, n, end + cn, done);
    out->settled = c == SIZE_MAX ? end + cn : n;
    if (c == SIZE_MAX) /* the answer's opening may be coming */
        return;
    out->c_off = c;
    out->c_len = n - c;
}

void fl_reasoning_split_tags(const struct fl_reasoning_tags *t, const char *s, size_t n,
                             bool opened, bool done, struct fl_reasoning_split *out)
{
    memset(out, 0, sizeof(*out));
    if (!s) /* nothing written yet (n is 0) */
        s = "";
    if (opened) {
        from(t, s, n, 0, done, out);
        return;
    }
    size_t i = 0;
    while (i < n && blank(s[i]))
        i++;
    const size_t rest = n - i, on = strlen(t->open);
    const size_t direct = t->direct[0] ? answer_at(t->direct, s, n, i, done) : i;
    if (rest >= on && !memcmp(s + i, t->open, on)) {
        from(t, s, n, i + on, done, out);
    } else if (!done && ((rest < on && !memcmp(s + i, t->open, rest)) || direct == SIZE_MAX)) {
        out->c_off = n; /* blanks, or the start of a tag: undecided */
    } else {
        /* no reasoning: all answer, blanks kept (after the answer's opening
         * when the text starts with it) */
        out->state = FL_REASONING_NONE;
        out->c_off = direct > i ? direct : 0;
        out->c_len = n - out->c_off;
        out->settled = n;
    }
}

void fl_reasoning_split(const char *s, size_t n, bool opened, bool done,
                        struct fl_reasoning_split *out)
{
    fl_reasoning_split_tags(&fl_think_tags, s, n, opened, done, out);
}
