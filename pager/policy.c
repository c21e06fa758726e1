/* policy.c: the cache policies (lru, lfu-decay, pinned-hot, lfu-step). See
 * pager/policy.h. */
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
/* lfu-step: popularity is mostly a property of the model (issue 19), so its
 * counts forget four times slower than lfu-decay's (its half-life,
 * PAGER_LFU_STEP_HALF_LIFE_TOKENS, is in policy.h: the VRAM cache's
 * lfu-next keeps it too). Both constants were
 * chosen on the tuning traces of scripts/bench-vram-cache.sh (GRID=1):
 * half-lives of 16-64 tokens are within a point of each other, alone and 8
 * sequences stepped together; a recency window (TinyLFU's: the most recent
 * window x budget never evicted) only lost, by 0-4 points, so it is off. */
#define LFU_STEP_WINDOW 0.0

int pager_cache_parse(const char *s, enum pager_cache *out, const char **profile,
                      struct fl_err *err)
{
    *profile = NULL;
    if (s && !strcmp(s, "lru")) {
        *out = PAGER_CACHE_LRU;
    } else if (s && !strcmp(s, "lfu-decay")) {
        *out = PAGER_CACHE_LFU_DECAY;
    } else if (s && !strcmp(s, "lfu-step")) {
        *out = PAGER_CACHE_LFU_STEP;
    } else if (s && !strcmp(s, "lfu-next")) {
        *out = PAGER_CACHE_LFU_NEXT;
    } else if (s && !strcmp(s, "pinned-hot")) {
        *out = PAGER_CACHE_PINNED_HOT; /* the profile comes from a calibration pass */
    } else if (s && !strncmp(s, "pinned-hot:", 11) && s[11]) {
        *out = PAGER_CACHE_PINNED_HOT;
        *profile = s + 11;
    } else {
        return fl_err_set(err, -EINVAL, "--cache: expected lru, lfu-decay, lfu-step, lfu-next, "
                          "pinned-hot or pinned-hot:STATS.json, got '%s'", s ? s : "");
    }
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

/* Marks the hottest of hot[0..n) (sorted, hottest first) that fit in the
 * policy's share of the budget. */
static int choose_hot(struct pager *p, const struct pager_hot_unit *v, int n)
{
    int chosen = 0;
    double frac = p->cfg.hot_fraction > 0 && p->cfg.hot_fraction <= 1 ? p->cfg.hot_fraction
                                                                     : DEFAULT_HOT_FRACTION;
    uint64_t room = (uint64_t)((double)p->budget * frac), used = 0;
    for (int i = 0; i < n && v[i].count > 0; i++) {
        const struct pager_hot_unit *h = &v[i];
        if (h->layer < 0 || h->layer >= p->n_layers || h->expert < 0 || h->expert >= p->n_expert)
            continue; /* a profile of another model: ignore what does not fit */
        int32_t u = p->unit_of[h->layer * p->n_expert + h->expert];
        if (u < 0 || p->units[u].hot || used + p->units[u].charge > room)
            continue;
        p->units[u].hot = true;
        used += p->units[u].charge;
        chosen++;
    }
    return chosen;
}

/* A sorted copy of hot[0..n), or NULL (out of memory: then no expert is
 * hot and pinned-hot is plain LRU, as a policy is advice, never a failure). */
static struct pager_hot_unit *sorted_copy(const struct pager_hot_unit *hot, int n)
{
    struct pager_hot_unit *v = n > 0 && hot ? malloc(sizeof(*v) * (size_t)n) : NULL;
    if (!v)
        return NULL;
    memcpy(v, hot, sizeof(*v) * (size_t)n);
    qsort(v, (size_t)n, sizeof(*v), hotter);
    return v;
}

void pg_policy_init(struct pager *p)
{
    const bool step = p->cfg.cache == PAGER_CACHE_LFU_STEP || p->cfg.cache == PAGER_CACHE_LFU_NEXT;
    p->half_life = (step ? PAGER_LFU_STEP_HALF_LIFE_TOKENS : LFU_HALF_LIFE_TOKENS) *
                   (p->n_layers > 0 ? p->n_layers : 1) * (p->n_used > 0 ? p->n_used : 1);
    p->window_frac = LFU_STEP_WINDOW;
    p->step_clock = step;
    p->clock_layer = -1;
    if (p->cfg.cache != PAGER_CACHE_PINNED_HOT)
        return;
    struct pager_hot_unit *v = sorted_copy(p->cfg.hot, p->cfg.n_hot);
    if (v)
        choose_hot(p, v, p->cfg.n_hot);
    free(v);
}

int pager_set_hot(struct pager *p, const struct pager_hot_unit *hot, int n)
{
    if (p->cfg.cache != PAGER_CACHE_PINNED_HOT || n < 0)
        return -EINVAL;
    struct pager_hot_unit *v = sorted_copy(hot, n);
    if (!v && n > 0)
        return -ENOMEM;
    pthread_mutex_lock(&p->mu);
    for (uint32_t u = 0; u < p->n_units; u++)
        p->units[u].hot = false;
    int chosen = choose_hot(p, v, n);
    pthread_mutex_unlock(&p->mu);
    free(v);
    pg_policy_warm(p);
    return chosen;
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

/* The decays' clock. lfu-decay counts acquires; lfu-step counts steps
 * through the layers (n_used per layer the acquires visit), so that a
 * batch, whose steps acquire the union of many sequences' experts, forgets
 * at the pace of tokens as a single sequence does, not several times
 * faster. */
static uint64_t clock_now(const struct pager *p)
{
    return p->step_clock ? p->steps : p->tick;
}

static double decayed(const struct pager *p, const struct pg_unit *n)
{
    return (double)n->freq * exp2(-(double)(clock_now(p) - n->freq_tick) / p->half_life);
}

void pg_policy_touch_locked(struct pager *p, uint32_t u, uint32_t uses)
{
    struct pg_unit *n = &p->units[u];
    /* a new layer's acquires, or an expert this step used already (a
     * model with one MoE layer): the next step */
    if (p->step_clock &&
        (n->layer != p->clock_layer || (n->freq > 0 && n->freq_tick == p->steps))) {
        p->steps += (uint64_t)(p->n_used > 0 ? p->n_used : 1);
        p->clock_layer = n->layer;
    }
    if (p->cfg.cache == PAGER_CACHE_LFU_DECAY || p->cfg.cache == PAGER_CACHE_LFU_STEP ||
        p->cfg.cache == PAGER_CACHE_LFU_NEXT) {
        n->freq = (float)(decayed(p, n) + (double)uses);
        n->freq_tick = clock_now(p);
    }
    p->tick++;
}

/* lfu-step's window: the most recent units, up to window_frac of the budget,
 * counted from the MRU end. Returns the oldest unit of the window (the
 * scan for a victim stops there), or PG_NONE when the window is empty. */
static uint32_t window_start(const struct pager *p)
{
    const uint64_t room = (uint64_t)((double)p->budget * p->window_frac);
    uint64_t used = 0;
    uint32_t first = PG_NONE;
    for (uint32_t u = p->lru_tail; u != PG_NONE; u = p->units[u].lru_prev) {
        if (used + p->units[u].charge > room)
            break;
        used += p->units[u].charge;
        first = u;
    }
    return first;
}

/* lfu-next: when the expert is next expected, in tokens. Its decayed count
 * over the count of an expert every token uses (steady state of the
 * decay) estimates p, the chance a token uses it; uses come a geometric
 * number of tokens apart, (1 - p) / p whole tokens after its layer's next
 * turn, which is `ahead` of the layer acquiring now (a layer that just ran
 * is a whole token away). Evicting the largest is Belady's choice under
 * that estimate: for experts every step uses (a batch's hot ones), the one
 * whose layer comes last. */
double pager_lfu_next_distance(double count, double rate, int layer, int now, int n_layers)
{
    const int L = n_layers > 0 ? n_layers : 1;
    const int ahead = layer < 0 ? L : ((layer - now - 1) % L + L) % L + 1;
    /* uses per token (a batch's step: tokens that chose it) -> the chance
     * of at least one, as if Poisson */
    double pu = 1.0 - exp(-count * rate);
    pu = pu < 1e-9 ? 1e-9 : pu;
    return (double)ahead / L + (1.0 - pu) / pu;
}

double pager_lfu_next_rate(int n_layers, int n_used, double half_life)
{
    const int L = n_layers > 0 ? n_layers : 1;
    return 1.0 - exp2(-(double)(L * (n_used > 0 ? n_used : 1)) / half_life);
}

/* The policy's choice among the unpinned resident units, skipping those
 * the current layer routed (wanted) unless spare_wanted is false. lfu-step
 * is lfu-decay outside its window (if any): an expert used once stays while
 * it is recent, then goes before any hotter one (TinyLFU's admission). */
static uint32_t pick(struct pager *p, bool spare_wanted)
{
    uint32_t best = PG_NONE;
    double low = INFINITY;
    const uint32_t stop = p->cfg.cache == PAGER_CACHE_LFU_STEP ? window_start(p) : PG_NONE;
    const double rate = pager_lfu_next_rate(p->n_layers, p->n_used, p->half_life);
    for (uint32_t u = p->lru_head; u != PG_NONE && u != stop; u = p->units[u].lru_next) {
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
        if (p->cfg.cache == PAGER_CACHE_LFU_NEXT)
            f = -pager_lfu_next_distance(f, rate, n->layer, p->clock_layer, p->n_layers);
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
    if (u == PG_NONE)
        u = pick(p, false);
    if (u == PG_NONE && p->cfg.cache == PAGER_CACHE_LFU_STEP) {
        /* everything is in the window: the least recent that can go */
        for (u = p->lru_head; u != PG_NONE && p->units[u].wanted; u = p->units[u].lru_next)
            ;
        u = u != PG_NONE ? u : p->lru_head;
    }
    return u;
}
