/* sched-text.c: a request's generated text (app/sched-impl.h): stop
 * strings, llama-server's n_indent and t_max_predict_ms, and what the text
 * hook may hear. */
#include "app/sched-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "text/tokenizer.h"

int sched_grow_gen(struct sched_req *r, size_t piece)
{
    if (r->n_gen == r->cap_gen) {
        const int cap = r->cap_gen ? 2 * r->cap_gen : 64;
        int32_t *g = realloc(r->gen, sizeof(int32_t) * (size_t)cap);
        if (!g)
            return -ENOMEM;
        r->gen = g;
        if (r->want_lp) {
            struct fl_token_logprob *lp = realloc(r->lp, sizeof(*lp) * (size_t)cap);
            if (!lp)
                return -ENOMEM;
            r->lp = lp;
        }
        r->cap_gen = cap;
    }
    if (r->len + piece + 1 > r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        while (cap < r->len + piece + 1)
            cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t)
            return -ENOMEM;
        r->text = t, r->cap = cap;
    }
    return 0;
}

/* n_indent (llama-server's): the first line after a newline whose first
 * character other than a space or tab comes after fewer than n_indent of
 * them ends the text there (true: cut before that character). Lines are
 * checked once they have such a character; blank lines pass. */
static bool indent_cut(struct sched_req *r)
{
    for (;;) {
        if (!r->line_at) {
            const char *nl = memchr(r->text, '\n', r->len);
            if (!nl)
                return false;
            r->line_at = (size_t)(nl - r->text) + 1;
        }
        size_t p = r->line_at;
        while (!r->line_ok && p < r->len && (r->text[p] == ' ' || r->text[p] == '\t'))
            p++;
        if (p == r->len)
            return false; /* the line has no other character yet */
        if (!r->line_ok && r->text[p] != '\n' && (int)(p - r->line_at) < r->n_indent) {
            r->len = p;
            r->text[p] = '\0';
            return true;
        }
        r->line_ok = true;
        const char *nl = memchr(r->text + p, '\n', r->len - p);
        if (!nl)
            return false; /* the line passed; the next starts after its newline */
        r->line_at = (size_t)(nl - r->text) + 1;
        r->line_ok = false;
    }
}

enum sched_appended sched_append_text(struct eng_sched *q, struct sched_req *r, int32_t id)
{
    char buf[256];
    int n = fl_token_to_piece(q->tok, id, buf, sizeof(buf), false, false);
    n = n > 0 && (size_t)n <= sizeof(buf) ? n : 0;
    memcpy(r->text + r->len, buf, (size_t)n);
    r->len += (size_t)n;
    r->text[r->len] = '\0';
    /* a new match ends in the new piece: search from stop_max before it */
    const size_t from = r->len - (size_t)n > r->stop_max ? r->len - (size_t)n - r->stop_max : 0;
    for (int i = 0; i < r->n_stop; i++) {
        const char *hit = strstr(r->text + from, r->stop[i]);
        if (hit) {
            r->len = (size_t)(hit - r->text);
            r->text[r->len] = '\0';
            r->cut = i;
            return TEXT_STOPPED;
        }
    }
    if (r->n_indent > 0 && indent_cut(r))
        return TEXT_LIMITED;
    /* a line's indentation is not known until its first other character */
    size_t hold = r->stop_max ? r->stop_max - 1 : 0;
    if (r->n_indent > 0 && r->line_at && !r->line_ok && r->len - r->line_at > hold)
        hold = r->len - r->line_at;
    /* after a restart, emitted counts what was sent before: the same bytes */
    if (q->h.text && r->len > r->emitted + hold) {
        q->h.text(q->h.ctx, r->user, r->text + r->emitted, r->len - hold - r->emitted);
        r->emitted = r->len - hold;
    }
    if (r->t_max_ms > 0 && memchr(buf, '\n', (size_t)n) &&
        (fl_clock_s() - r->t_first) * 1e3 > r->t_max_ms)
        return TEXT_LIMITED;
    return TEXT_GOES_ON;
}
