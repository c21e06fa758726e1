/* reasoning.c: an answer's reasoning part (reasoning.h). */
#include "text/reasoning.h"

#include <stdint.h>
#include <string.h>

const struct fl_reasoning_tags fl_think_tags = { .open = "<think>", .close = "</think>",
                                                 .answer = "", .direct = "" };
/* MiniMax-M3's: an answer without reasoning starts with a bare </mm:think> */
const struct fl_reasoning_tags fl_mm_think_tags = { .open = "<mm:think>", .close = "</mm:think>",
                                                    .answer = "", .direct = "</mm:think>" };
const struct fl_reasoning_tags fl_harmony_tags = {
    .open = "<|channel|>analysis<|message|>", .close = "<|end|>",
    .answer = "<|start|>assistant<|channel|>final<|message|>",
    .direct = "<|channel|>final<|message|>"
};
/* Kimi K3's: the response part ends at the first close tag, unless the
 * tools part opens first or right after the response part's close */
const struct fl_reasoning_tags fl_kimi_k3_tags = {
    .open = "<|open|>think<|sep|>", .close = "<|close|>think<|sep|>",
    .answer = "<|open|>response<|sep|>", .direct = "<|open|>response<|sep|>",
    .end = "<|close|>", .block = "<|open|>tools<|sep|>", .block_end = "<|close|>tools<|sep|>",
    .lead = "<|close|>response<|sep|>"
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

/* How long the block's opening at s[0, n) is, its lead included; 0 when
 * no block opens there. */
static size_t block_opening(const struct fl_reasoning_tags *t, const char *s, size_t n)
{
    const size_t bn = strlen(t->block), ln = t->lead ? strlen(t->lead) : 0;
    if (n >= bn && !memcmp(s, t->block, bn))
        return bn;
    return ln && n >= ln + bn && !memcmp(s, t->lead, ln) && !memcmp(s + ln, t->block, bn) ? ln + bn
                                                                                          : 0;
}

/* How much of the answer s[c..n) is its content: up to t->end outside
 * the blocks of calls (all of it without an end); a tail that may begin
 * the end is held back unless done. */
static size_t answer_len(const struct fl_reasoning_tags *t, const char *s, size_t n, size_t c,
                         bool done)
{
    if (!t->end)
        return n - c;
    const size_t en = strlen(t->end), bn = strlen(t->block), ben = strlen(t->block_end);
    for (size_t p = c;;) {
        const char *e = memmem(s + p, n - p, t->end, en);
        const char *b = memmem(s + p, (size_t)((e ? e : s + n) - (s + p)), t->block, bn);
        if (!e && !b)
            return (done ? n : n - partial_tag(s + p, n - p, t->end)) - c;
        const size_t at = (size_t)((b ? b : e) - s), open = block_opening(t, s + at, n - at);
        if (!open) /* the end (or where the block may yet open: the text ends inside its lead) */
            return at - c;
        const char *be = memmem(s + at + open, n - at - open, t->block_end, ben);
        if (!be) /* the calls: through their block */
            return n - c;
        p = (size_t)(be - s) + ben;
    }
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
    out->c_len = answer_len(t, s, n, c, done);
    if (t->end && !done) /* what follows the content is not decided before the end */
        out->settled = c + out->c_len;
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
        out->c_len = answer_len(t, s, n, out->c_off, done);
        out->settled = t->end && !done ? out->c_off + out->c_len : n;
    }
}

void fl_reasoning_split(const char *s, size_t n, bool opened, bool done,
                        struct fl_reasoning_split *out)
{
    fl_reasoning_split_tags(&fl_think_tags, s, n, opened, done, out);
}
