/* dry.c: see dry.h. The repeat search is a Z-function over the history read
 * backwards (latest token first): z[k], the length of the longest common
 * start of that sequence and its suffix from k, is how far the text's last
 * z[k] tokens also occur ending k tokens earlier, and the token read at
 * k - 1 is what followed them there. */

#include "text/dry.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "text/sampler.h"
#include "text/token-ring.h"
#include "text/tokenizer.h"

#define MAX_BREAKER_BYTES 40 /* llama.cpp's MAX_CHAR_LEN */
#define MAX_TAIL 20          /* and MAX_SEQ_LEN */

/* A breaker in tokens: a head token, and the tail that must follow it
 * (none: the head alone holds a breaker). */
struct breaker {
    int32_t head, n_tail;
    int32_t tail[MAX_TAIL];
};

/* A token that would continue a repeat, and the longest one. */
struct repeat {
    int32_t id, len;
};

/* The breakers of some strings over one vocabulary, by head ascending;
 * shared by the samplers that name the same strings (reference-counted). */
struct fl_dry_breakers {
    atomic_int refs;
    const struct fl_tokenizer *tok;
    char **strings; /* a copy, for fl_dry_breakers_match */
    int32_t n_strings;
    struct breaker *br;
    int32_t n_br, cap_br;
};

struct fl_dry {
    float multiplier, base;
    int32_t allowed, last_n;
    struct fl_dry_breakers *brk; /* NULL: no breakers */
    const struct breaker *br;    /* brk's */
    int32_t n_br;
    int32_t *recent;    /* scratch: recent[i], the i-th latest token */
    int32_t *z;         /* scratch: the Z-function of recent */
    struct repeat *rep; /* scratch: continuing tokens, by id once sorted */
};

static int push_breaker(struct fl_dry_breakers *d, int32_t head, const int32_t *tail, int32_t n)
{
    /* tokens come in ascending id order: a duplicate sits at the end */
    for (int32_t i = d->n_br - 1; i >= 0 && d->br[i].head == head; i--)
        if (d->br[i].n_tail == n && (!n || !memcmp(d->br[i].tail, tail, sizeof(*tail) * (size_t)n)))
            return 0;
    if (d->n_br == d->cap_br) {
        int32_t cap = d->cap_br ? 2 * d->cap_br : 64;
        struct breaker *b = realloc(d->br, sizeof(*b) * (size_t)cap);
        if (!b)
            return -ENOMEM;
        d->br = b;
        d->cap_br = cap;
    }
    struct breaker *b = &d->br[d->n_br++];
    b->head = head;
    b->n_tail = n;
    if (n) /* a lone head's tail is NULL */
        memcpy(b->tail, tail, sizeof(*tail) * (size_t)n);
    return 0;
}

/* Token id spelled w[0..wn): a breaker head when it holds s whole, or ends
 * in a start of s (the tail: the tokens of the rest of s). */
static int breakers_of(struct fl_dry_breakers *d, const struct fl_tokenizer *tok, int32_t id,
                       const char *w, size_t wn, const char *s, size_t sn)
{
    if (memmem(w, wn, s, sn))
        return push_breaker(d, id, NULL, 0);
    for (size_t pos = 0; pos < wn; pos++) {
        if (w[pos] != s[0])
            continue;
        size_t i = 1;
        while (i < sn && pos + i < wn && w[pos + i] == s[i])
            i++;
        if (pos + i < wn) /* a byte of s differs before the piece ends */
            continue;
        int32_t *t;
        int n = fl_tokenize_alloc(tok, s + i, sn - i, false, false, &t);
        if (n < 0)
            return n;
        int rc = push_breaker(d, id, t, n < MAX_TAIL ? n : MAX_TAIL);
        free(t);
        if (rc)
            return rc;
    }
    return 0;
}

static int build_breakers(struct fl_dry_breakers *d, const struct fl_tokenizer *tok)
{
    size_t cap = 256;
    char *w = malloc(cap);
    int rc = w ? 0 : -ENOMEM;
    for (int32_t id = 0; !rc && id < fl_n_vocab(tok); id++) {
        int n = fl_detokenize(tok, &id, 1, w, cap, false, true);
        if (n == -ENOSPC) {
            n = fl_detokenize(tok, &id, 1, NULL, 0, false, true);
            char *bigger = n >= 0 ? realloc(w, (size_t)n + 1) : NULL;
            if (!bigger) {
                rc = n < 0 ? n : -ENOMEM;
                break;
            }
            w = bigger;
            cap = (size_t)n + 1;
            n = fl_detokenize(tok, &id, 1, w, cap, false, true);
        }
        if (n < 0) {
            rc = n;
            break;
        }
        for (int32_t b = 0; !rc && b < d->n_strings; b++) {
            const char *s = d->strings[b];
            size_t sn = strlen(s);
            if (sn) /* llama.cpp skips an empty breaker */
                rc = breakers_of(d, tok, id, w, (size_t)n, s,
                                 sn < MAX_BREAKER_BYTES ? sn : MAX_BREAKER_BYTES);
        }
    }
    free(w);
    return rc;
}

int fl_dry_breakers_new(const char *const *strings, int32_t n, const struct fl_tokenizer *tok,
                        struct fl_dry_breakers **out)
{
    *out = NULL;
    if (n < 1 || n > FL_DRY_MAX_BREAKERS || !tok)
        return -EINVAL;
    struct fl_dry_breakers *d = calloc(1, sizeof(*d));
    if (!d || !(d->strings = calloc((size_t)n, sizeof(char *)))) {
        free(d);
        return -ENOMEM;
    }
    atomic_init(&d->refs, 1);
    d->tok = tok;
    d->n_strings = n;
    int rc = 0;
    for (int32_t i = 0; !rc && i < n; i++)
        rc = !strings[i] ? -EINVAL : !(d->strings[i] = strdup(strings[i])) ? -ENOMEM : 0;
    if (!rc)
        rc = build_breakers(d, tok);
    if (rc) {
        fl_dry_breakers_unref(d);
        return rc;
    }
    *out = d;
    return 0;
}

struct fl_dry_breakers *fl_dry_breakers_ref(struct fl_dry_breakers *b)
{
    if (b)
        atomic_fetch_add(&b->refs, 1);
    return b;
}

void fl_dry_breakers_unref(struct fl_dry_breakers *b)
{
    if (!b || atomic_fetch_sub(&b->refs, 1) > 1)
        return;
    for (int32_t i = 0; i < b->n_strings; i++)
        free(b->strings[i]);
    free(b->strings);
    free(b->br);
    free(b);
}

bool fl_dry_breakers_match(const struct fl_dry_breakers *b, const struct fl_tokenizer *tok,
                           const char *const *strings, int32_t n)
{
    if (!b || b->tok != tok || b->n_strings != n)
        return false;
    for (int32_t i = 0; i < n; i++)
        if (!strings[i] || strcmp(strings[i], b->strings[i]))
            return false;
    return true;
}

int fl_dry_new(const struct fl_sampler_params *p, const struct fl_tokenizer *tok,
               struct fl_dry **out)
{
    *out = NULL;
    if (p->dry_multiplier == 0.0f || !(p->dry_base >= 1.0f) || p->dry_penalty_last_n <= 0)
        return 0;
    if (!isfinite(p->dry_multiplier) || !isfinite(p->dry_base) || p->dry_allowed_length < 0 ||
        p->n_dry_breakers < 0 || p->n_dry_breakers > FL_DRY_MAX_BREAKERS ||
        (p->n_dry_breakers > 0 && !tok))
        return -EINVAL;
    for (int32_t b = 0; b < p->n_dry_breakers; b++)
        if (!p->dry_breakers[b])
            return -EINVAL;
    struct fl_dry *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->multiplier = p->dry_multiplier;
    d->base = p->dry_base;
    d->allowed = p->dry_allowed_length;
    d->last_n = p->dry_penalty_last_n;
    const size_t n = (size_t)d->last_n;
    d->recent = malloc(n * sizeof(*d->recent));
    d->z = malloc(n * sizeof(*d->z));
    d->rep = malloc(n * sizeof(*d->rep));
    int rc = d->recent && d->z && d->rep ? 0 : -ENOMEM;
    if (!rc && p->n_dry_breakers > 0) {
        if (fl_dry_breakers_match(p->dry_table, tok, p->dry_breakers, p->n_dry_breakers))
            d->brk = fl_dry_breakers_ref(p->dry_table);
        else
            rc = fl_dry_breakers_new(p->dry_breakers, p->n_dry_breakers, tok, &d->brk);
        if (!rc) {
            d->br = d->brk->br;
            d->n_br = d->brk->n_br;
        }
    }
    if (rc) {
        fl_dry_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void fl_dry_free(struct fl_dry *d)
{
    if (!d)
        return;
    fl_dry_breakers_unref(d->brk);
    free(d->recent);
    free(d->z);
    free(d->rep);
    free(d);
}

/* The first of n entries of `size` bytes from base, sorted by the int32_t
 * each starts with, whose key is not below key (n when none). */
static int32_t lower_bound(const void *base, size_t size, int32_t n, int32_t key)
{
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2, k;
        memcpy(&k, (const char *)base + (size_t)mid * size, sizeof(k));
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The first breaker of head id (d->n_br when none). */
static int32_t first_breaker(const struct fl_dry *d, int32_t id)
{
    return lower_bound(d->br, sizeof(*d->br), d->n_br, id);
}

/* The longest tail of a breaker headed by recent[i] that the i tokens after
 * it start with (-1: none). */
static int32_t breaker_at(const struct fl_dry *d, int32_t i)
{
    int32_t longest = -1;
    for (int32_t b = first_breaker(d, d->recent[i]); b < d->n_br && d->br[b].head == d->recent[i];
         b++) {
        const struct breaker *br = &d->br[b];
        if (br->n_tail <= longest || br->n_tail > i)
            continue;
        int32_t o = 0;
        while (o < br->n_tail && br->tail[o] == d->recent[i - o - 1])
            o++;
        if (o == br->n_tail)
            longest = br->n_tail;
    }
    return longest;
}

/* z[k] for k in 1..n-1 (z[0] unused): the common start of recent and
 * recent + k, by the Z-algorithm's box [l, r) of the rightmost match. */
static void z_function(const int32_t *s, int32_t n, int32_t *z)
{
    int32_t l = 0, r = 0;
    z[0] = n;
    for (int32_t k = 1; k < n; k++) {
        int32_t len = 0;
        if (k < r)
            len = z[k - l] < r - k ? z[k - l] : r - k;
        while (k + len < n && s[len] == s[k + len])
            len++;
        z[k] = len;
        if (k + len > r) {
            l = k;
            r = k + len;
        }
    }
}

static int repeat_cmp(const void *a, const void *b)
{
    const struct repeat *x = a, *y = b;
    if (x->id != y->id)
        return (x->id > y->id) - (x->id < y->id);
    return (y->len > x->len) - (y->len < x->len); /* the longest first */
}

/* The continuing tokens and their longest repeat, by id; their count. */
static int32_t repeats(struct fl_dry *d, int32_t n, int32_t limit)
{
    z_function(d->recent, n, d->z);
    int32_t m = 0;
    for (int32_t k = 1; k < n; k++) {
        int32_t len = d->z[k] < limit ? d->z[k] : limit;
        if (len >= d->allowed)
            d->rep[m++] = (struct repeat){ d->recent[k - 1], len };
    }
    qsort(d->rep, (size_t)m, sizeof(*d->rep), repeat_cmp);
    int32_t u = 0;
    for (int32_t i = 0; i < m; i++)
        if (u == 0 || d->rep[u - 1].id != d->rep[i].id)
            d->rep[u++] = d->rep[i];
    return u;
}

static const struct repeat *repeat_of(const struct fl_dry *d, int32_t m, int32_t id)
{
    const int32_t i = lower_bound(d->rep, sizeof(*d->rep), m, id);
    return i < m && d->rep[i].id == id ? &d->rep[i] : NULL;
}

/* Whether id alone holds a breaker (such a token is never penalised). */
static bool lone_breaker(const struct fl_dry *d, int32_t id)
{
    for (int32_t b = first_breaker(d, id); b < d->n_br && d->br[b].head == id; b++)
        if (d->br[b].n_tail == 0)
            return true;
    return false;
}

void fl_dry_apply(struct fl_dry *d, const struct fl_token_ring *hist, struct fl_candidate *c,
                  int32_t n_cand)
{
    const int32_t n = hist->n < d->last_n ? hist->n : d->last_n;
    if (n <= d->allowed)
        return;
    for (int32_t i = 0; i < n; i++)
        d->recent[i] = fl_token_ring_latest(hist, i);
    /* no repeat reaches back past the latest breaker */
    int32_t limit = n;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = breaker_at(d, i);
        if (t >= 0) {
            limit = i - t;
            break;
        }
    }
    if (limit < d->allowed)
        return;
    const int32_t m = repeats(d, n, limit);
    /* the exponent at which base^e would overflow a float (llama.cpp's) */
    int32_t max_exp = d->base > 1.000001f ? (int32_t)(88.7228391f / logf(d->base)) : 0;
    for (int32_t i = 0; i < n_cand; i++) {
        const struct repeat *r = m ? repeat_of(d, m, c[i].id) : NULL;
        if (!r || lone_breaker(d, c[i].id))
            continue;
        int32_t e = r->len - d->allowed;
        if (max_exp > 0 && e > max_exp)
            e = max_exp;
        c[i].logit -= (float)((double)d->multiplier * pow((double)d->base, (double)e));
    }
}
