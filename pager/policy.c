/* policy.c: the cache policies (lru, lfu-decay, pinned-hot) and the
 * pinned-hot profile reader. See pager/policy.h. */
#include "pager/policy.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pager/internal.h"

/* A use counts half after this many tokens (x n_layers x n_used acquires):
 * long enough to see a hot expert come back, short enough to forget a topic. */
#define LFU_HALF_LIFE_TOKENS 8.0
#define DEFAULT_HOT_FRACTION 0.5

int pager_cache_parse(const char *s, enum pager_cache *out, const char **profile,
                      struct fl_err *err)
{
    *profile = NULL;
    if (s && !strcmp(s, "lru")) {
        *out = PAGER_CACHE_LRU;
    } else if (s && !strcmp(s, "lfu-decay")) {
        *out = PAGER_CACHE_LFU_DECAY;
    } else if (s && !strncmp(s, "pinned-hot:", 11) && s[11]) {
        *out = PAGER_CACHE_PINNED_HOT;
        *profile = s + 11;
    } else {
        return fl_err_set(err, -EINVAL, "--cache: expected lru, lfu-decay or "
                          "pinned-hot:STATS.json, got '%s'", s ? s : "");
    }
    return 0;
}

/* The number after "key": in obj (a JSON object's text), or -1. */
static int64_t json_num(const char *obj, const char *end, const char *key)
{
    char pat[48];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    size_t n = strlen(pat);
    for (const char *q = obj; q + n < end; q++)
        if (!memcmp(q, pat, n)) {
            char *e;
            long long v = strtoll(q + n, &e, 10);
            return e == q + n || v < 0 ? -1 : v;
        }
    return -1;
}

static char *read_all(const char *path, int *rc)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    *rc = f ? 0 : -errno;
    while (f && *rc == 0) {
        if (len + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 8192);
            if (!nb) {
                *rc = -ENOMEM;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    if (f)
        fclose(f);
    if (*rc == 0 && buf)
        buf[len] = 0;
    if (*rc) {
        free(buf);
        return NULL;
    }
    return buf ? buf : calloc(1, 1);
}

/* One unit object {"layer":..,"expert":..,...} into u; false when it is not one. */
static bool parse_unit(const char *a, const char *b, struct pager_hot_unit *u)
{
    int64_t l = json_num(a, b, "layer"), e = json_num(a, b, "expert");
    int64_t c = json_num(a, b, "cache_hits"), ph = json_num(a, b, "prefetch_hits");
    int64_t m = json_num(a, b, "misses"), f = json_num(a, b, "faults");
    if (l < 0 || e < 0 || l > INT32_MAX || e > INT32_MAX || c < 0 || ph < 0 || m < 0)
        return false;
    *u = (struct pager_hot_unit){ (int32_t)l, (int32_t)e,
                                  (uint64_t)c + (uint64_t)ph + (uint64_t)m + (f > 0 ? (uint64_t)f : 0) };
    return true;
}

int pager_hot_profile_load(const char *path, struct pager_hot_unit **out, int *n,
                           struct fl_err *err)
{
    *out = NULL;
    *n = 0;
    int rc;
    char *txt = read_all(path, &rc);
    if (!txt)
        return fl_err_set(err, rc, "%s: %s", path, strerror(-rc));
    const char *units = strstr(txt, "\"units\":[");
    if (!units) {
        free(txt);
        return fl_err_set(err, -EINVAL, "%s: not a faultline --stats-json file (no \"units\")", path);
    }
    int cap = 0;
    for (const char *q = units + 9; (q = strchr(q, '{')); q++) {
        const char *end = strchr(q, '}');
        if (!end)
            break;
        if (*n == cap) {
            struct pager_hot_unit *nv = realloc(*out, sizeof(**out) * (size_t)(cap = cap * 2 + 256));
            if (!nv) {
                free(txt);
                free(*out);
                *out = NULL;
                return fl_err_set(err, -ENOMEM, "%s: out of memory", path);
            }
            *out = nv;
        }
        if (!parse_unit(q, end, &(*out)[*n])) {
            free(txt);
            free(*out);
            *out = NULL;
            *n = 0;
            return fl_err_set(err, -EINVAL, "%s: a unit object lacks layer/expert/counts", path);
        }
        (*n)++;
        q = end;
    }
    free(txt);
    return 0;
}

/* --- inside the pager ------------------------------------------------------- */

static int hotter(const void *a, const void *b)
{
    const struct pager_hot_unit *x = a, *y = b;
    return x->count != y->count ? (x->count < y->count ? 1 : -1)
           : x->layer != y->layer ? (x->layer < y->layer ? -1 : 1)
           : (x->expert > y->expert) - (x->expert < y->expert);
}

void pg_policy_init(struct pager *p)
{
    p->half_life = LFU_HALF_LIFE_TOKENS * (p->n_layers > 0 ? p->n_layers : 1) *
                   (p->n_used > 0 ? p->n_used : 1);
    if (p->cfg.cache != PAGER_CACHE_PINNED_HOT || p->cfg.n_hot <= 0 || !p->cfg.hot)
        return;
    struct pager_hot_unit *v = malloc(sizeof(*v) * (size_t)p->cfg.n_hot);
    if (!v)
        return; /* plain LRU then: a policy is advice, never a failure */
    memcpy(v, p->cfg.hot, sizeof(*v) * (size_t)p->cfg.n_hot);
    qsort(v, (size_t)p->cfg.n_hot, sizeof(*v), hotter);
    double frac = p->cfg.hot_fraction > 0 && p->cfg.hot_fraction <= 1 ? p->cfg.hot_fraction
                                                                     : DEFAULT_HOT_FRACTION;
    uint64_t room = (uint64_t)((double)p->budget * frac), used = 0;
    for (int i = 0; i < p->cfg.n_hot && v[i].count > 0; i++) {
        const struct pager_hot_unit *h = &v[i];
        if (h->layer < 0 || h->layer >= p->n_layers || h->expert < 0 || h->expert >= p->n_expert)
            continue; /* a profile of another model: ignore what does not fit */
        int32_t u = p->unit_of[h->layer * p->n_expert + h->expert];
        if (u < 0 || p->units[u].hot || used + p->units[u].charge > room)
            continue;
        p->units[u].hot = true;
        used += p->units[u].charge;
    }
    free(v);
}

void pg_policy_warm(struct pager *p)
{
    if (p->cfg.cache != PAGER_CACHE_PINNED_HOT)
        return;
    pthread_mutex_lock(&p->mu);
    for (uint32_t u = 0; u < p->n_units; u++)
        if (p->units[u].hot && p->units[u].state == PG_ABSENT)
            pg_request_locked(p, u, false);
    pthread_mutex_unlock(&p->mu);
}

static double decayed(const struct pager *p, const struct pg_unit *n)
{
    return (double)n->freq * exp2(-(double)(p->tick - n->freq_tick) / p->half_life);
}

void pg_policy_touch_locked(struct pager *p, uint32_t u)
{
    struct pg_unit *n = &p->units[u];
    if (p->cfg.cache == PAGER_CACHE_LFU_DECAY) {
        n->freq = (float)(decayed(p, n) + 1.0);
        n->freq_tick = p->tick;
    }
    p->tick++;
}

/* The policy's choice among the unpinned resident units, skipping those
 * the current layer routed (wanted) unless spare_wanted is false. */
static uint32_t pick(struct pager *p, bool spare_wanted)
{
    uint32_t best = PG_NONE;
    double low = INFINITY;
    for (uint32_t u = p->lru_head; u != PG_NONE; u = p->units[u].lru_next) {
        const struct pg_unit *n = &p->units[u];
        if (spare_wanted && n->wanted)
            continue;
        if (p->cfg.cache == PAGER_CACHE_LRU)
            return u;
        if (p->cfg.cache == PAGER_CACHE_PINNED_HOT) {
            if (!n->hot)
                return u;
            best = best == PG_NONE ? u : best; /* only hot ones left: the oldest */
            continue;
        }
        double f = decayed(p, n);
        if (f < low) {
            low = f;
            best = u;
        }
    }
    return best;
}

/* The LRU list holds exactly the unpinned resident units, oldest first, so
 * every policy picks from it and ties go to the least recently used. An
 * expert the router just chose is kept while anything else can go: evicting
 * it would only read it again a moment later. */
uint32_t pg_policy_victim_locked(struct pager *p)
{
    uint32_t u = pick(p, true);
    return u != PG_NONE ? u : pick(p, false);
}
