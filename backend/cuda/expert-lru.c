/* expert-lru.c: slot map and LRU list of the VRAM expert cache.
 *
 * key -> slot is a dense table (n_layer * n_expert ints: a few hundred KB
 * for the largest MoE models), so lookups are one load. The LRU order is a
 * doubly linked list over slot indices, most recent at the head; eviction
 * walks from the tail past pinned slots. Free slots sit at the tail, so
 * they are taken before any occupied one.
 *
 * lfu-decay keeps, per key, the use count decayed by 2^(-age/half_life)
 * as one number that does not change with time: score = log2(count at
 * its last use) + last_use / half_life. The decayed counts of two keys now
 * compare as their scores do, so the victim scan needs no exponentials.
 *
 * lfu-next keeps the pager's lfu-next (pager/policy.h): decayed counts on a
 * clock of layer steps, uses counted per token, and the victim whose next
 * use is expected farthest ahead (pager_lfu_next_distance). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "backend/cuda/expert-lru.h"
#include "pager/policy.h"

struct fl_xlru {
    int n_slots, n_layer, n_expert;
    int *map;           /* [n_layer * n_expert]: slot or -1 */
    int *key;           /* [n_slots]: layer * n_expert + expert, or -1 when free */
    int *pins;          /* [n_slots] */
    int *prev, *next;   /* LRU list links, -1 at the ends */
    int head, tail;
    double half_life;   /* lfu-decay, in acquires; 0: LRU */
    double *score;      /* lfu-decay: [n_layer * n_expert], -inf before a key's first use */
    uint64_t tick;      /* acquires so far */
    /* lfu-next */
    int n_used;         /* > 0: lfu-next; the clock's step */
    double *count;      /* [n_layer * n_expert]: decayed uses as of count_at */
    uint64_t *count_at; /* [n_layer * n_expert] */
    uint64_t steps;     /* n_used per layer step */
    int clock_layer;    /* the layer acquiring now */
    struct fl_xlru_stats st;
};

static void unlink_slot(struct fl_xlru *c, int s)
{
    if (c->prev[s] >= 0)
        c->next[c->prev[s]] = c->next[s];
    else
        c->head = c->next[s];
    if (c->next[s] >= 0)
        c->prev[c->next[s]] = c->prev[s];
    else
        c->tail = c->prev[s];
    c->prev[s] = c->next[s] = -1;
}

static void push_head(struct fl_xlru *c, int s)
{
    c->prev[s] = -1;
    c->next[s] = c->head;
    if (c->head >= 0)
        c->prev[c->head] = s;
    c->head = s;
    if (c->tail < 0)
        c->tail = s;
}

static void push_tail(struct fl_xlru *c, int s)
{
    c->next[s] = -1;
    c->prev[s] = c->tail;
    if (c->tail >= 0)
        c->next[c->tail] = s;
    c->tail = s;
    if (c->head < 0)
        c->head = s;
}

int fl_xlru_create(int n_slots, int n_layer, int n_expert, struct fl_xlru **out)
{
    if (n_slots < 1 || n_layer < 1 || n_expert < 1 || (int64_t)n_layer * n_expert > INT32_MAX / 2)
        return -EINVAL;
    struct fl_xlru *c = calloc(1, sizeof(*c));
    const size_t nk = (size_t)n_layer * (size_t)n_expert, ns = (size_t)n_slots;
    if (c) {
        c->map = malloc(nk * sizeof(int));
        c->key = malloc(ns * sizeof(int));
        c->pins = calloc(ns, sizeof(int));
        c->prev = malloc(ns * sizeof(int));
        c->next = malloc(ns * sizeof(int));
    }
    if (!c || !c->map || !c->key || !c->pins || !c->prev || !c->next) {
        fl_xlru_destroy(c);
        return -ENOMEM;
    }
    c->n_slots = n_slots;
    c->n_layer = n_layer;
    c->n_expert = n_expert;
    for (size_t i = 0; i < nk; i++)
        c->map[i] = -1;
    c->head = c->tail = -1;
    for (int s = 0; s < n_slots; s++) { /* slot 0 ends at the tail: handed out first */
        c->key[s] = -1;
        push_head(c, s);
    }
    *out = c;
    return 0;
}

void fl_xlru_destroy(struct fl_xlru *c)
{
    if (!c)
        return;
    free(c->map);
    free(c->key);
    free(c->pins);
    free(c->prev);
    free(c->next);
    free(c->score);
    free(c->count);
    free(c->count_at);
    free(c);
}

int fl_xlru_set_lfu(struct fl_xlru *c, double half_life)
{
    if (!(half_life > 0.0))
        return -EINVAL;
    c->n_used = 0; /* not lfu-next any more */
    const size_t nk = (size_t)c->n_layer * (size_t)c->n_expert;
    if (!c->score && !(c->score = malloc(nk * sizeof(double))))
        return -ENOMEM;
    for (size_t i = 0; i < nk; i++)
        c->score[i] = -INFINITY;
    c->half_life = half_life;
    return 0;
}

int fl_xlru_set_lfu_next(struct fl_xlru *c, int n_used)
{
    if (n_used < 1)
        return -EINVAL;
    const size_t nk = (size_t)c->n_layer * (size_t)c->n_expert;
    if (!c->count && !(c->count = calloc(nk, sizeof(double))))
        return -ENOMEM;
    if (!c->count_at && !(c->count_at = calloc(nk, sizeof(uint64_t))))
        return -ENOMEM;
    for (size_t i = 0; i < nk; i++)
        c->count[i] = 0.0, c->count_at[i] = 0;
    free(c->score);
    c->score = NULL;
    c->n_used = n_used;
    c->half_life = PAGER_LFU_STEP_HALF_LIFE_TOKENS * (double)c->n_layer * (double)n_used;
    c->steps = 0;
    c->clock_layer = -1;
    return 0;
}

static double decayed(const struct fl_xlru *c, int k)
{
    return c->count[k] * exp2(-(double)(c->steps - c->count_at[k]) / c->half_life);
}

/* lfu-next's clock: a new layer's acquires (or an expert this step used
 * already, a model with one MoE layer) start the next step. */
static void clock_step(struct fl_xlru *c, int layer, int k)
{
    if (layer != c->clock_layer || (c->count[k] > 0 && c->count_at[k] == c->steps)) {
        c->steps += (uint64_t)c->n_used;
        c->clock_layer = layer;
    }
}

/* The key's decayed use count now, plus this use, as its new score. */
static void count_use(struct fl_xlru *c, int k)
{
    const double now = (double)c->tick / c->half_life;
    const double count = isinf(c->score[k]) ? 0.0 : exp2(c->score[k] - now);
    c->score[k] = log2(count + 1.0) + now;
}

static bool key_ok(const struct fl_xlru *c, int layer, int expert)
{
    return layer >= 0 && layer < c->n_layer && expert >= 0 && expert < c->n_expert;
}

/* Least recently used slot nobody holds, or -1; with lfu-decay, a free
 * slot, else the held-by-nobody slot of the smallest decayed count, ties
 * to the least recent; with lfu-next the one used farthest ahead. */
static int victim(const struct fl_xlru *c)
{
    int best = -1;
    double far = -1.0;
    const double rate = c->n_used ? pager_lfu_next_rate(c->n_layer, c->n_used, c->half_life) : 0.0;
    for (int s = c->tail; s >= 0; s = c->prev[s]) {
        if (c->pins[s] != 0)
            continue;
        if ((!c->score && !c->n_used) || c->key[s] < 0)
            return s;
        if (c->n_used) {
            const int k = c->key[s];
            const double d = pager_lfu_next_distance(decayed(c, k), rate, k / c->n_expert,
                                                     c->clock_layer, c->n_layer);
            if (d > far)
                far = d, best = s;
        } else if (best < 0 || c->score[c->key[s]] < c->score[c->key[best]]) {
            best = s;
        }
    }
    return best;
}

int fl_xlru_acquire(struct fl_xlru *c, int layer, int expert, struct fl_xlru_res *res)
{
    return fl_xlru_acquire_uses(c, layer, expert, 1, res);
}

int fl_xlru_acquire_uses(struct fl_xlru *c, int layer, int expert, uint32_t uses,
                         struct fl_xlru_res *res)
{
    if (!key_ok(c, layer, expert))
        return -EINVAL;
    const int k = layer * c->n_expert + expert;
    int s = c->map[k];
    c->tick++;
    if (c->n_used && uses)
        clock_step(c, layer, k);
    res->evicted_layer = res->evicted_expert = -1;
    res->hit = s >= 0;
    if (s < 0) {
        if ((s = victim(c)) < 0) {
            c->st.busy++;
            return -EBUSY;
        }
        c->st.misses++;
        if (c->key[s] >= 0) {
            res->evicted_layer = c->key[s] / c->n_expert;
            res->evicted_expert = c->key[s] % c->n_expert;
            c->map[c->key[s]] = -1;
            c->st.evictions++;
        }
        c->key[s] = k;
        c->map[k] = s;
    } else {
        c->st.hits++;
    }
    if (c->score)
        count_use(c, k);
    if (c->n_used && uses) {
        c->count[k] = decayed(c, k) + (double)uses;
        c->count_at[k] = c->steps;
    }
    c->pins[s]++;
    unlink_slot(c, s);
    push_head(c, s);
    res->slot = s;
    return 0;
}

int fl_xlru_release(struct fl_xlru *c, int slot)
{
    if (slot < 0 || slot >= c->n_slots || c->pins[slot] == 0)
        return -EINVAL;
    c->pins[slot]--;
    return 0;
}

int fl_xlru_invalidate(struct fl_xlru *c, int slot)
{
    if (slot < 0 || slot >= c->n_slots || c->pins[slot] == 0)
        return -EINVAL;
    if (c->pins[slot] > 1)
        return -EBUSY; /* another holder still uses what it holds */
    c->pins[slot]--;
    if (c->key[slot] >= 0)
        c->map[c->key[slot]] = -1;
    c->key[slot] = -1;
    unlink_slot(c, slot); /* free slots are reused first */
    push_tail(c, slot);
    return 0;
}

int fl_xlru_lookup(const struct fl_xlru *c, int layer, int expert)
{
    if (!key_ok(c, layer, expert))
        return -ENOENT;
    const int s = c->map[layer * c->n_expert + expert];
    return s >= 0 ? s : -ENOENT;
}

bool fl_xlru_key(const struct fl_xlru *c, int slot, int *layer, int *expert)
{
    if (slot < 0 || slot >= c->n_slots || c->key[slot] < 0)
        return false;
    *layer = c->key[slot] / c->n_expert;
    *expert = c->key[slot] % c->n_expert;
    return true;
}

int fl_xlru_slots(const struct fl_xlru *c) { return c->n_slots; }

int fl_xlru_pins(const struct fl_xlru *c, int slot)
{
    return slot >= 0 && slot < c->n_slots ? c->pins[slot] : 0;
}

struct fl_xlru_stats fl_xlru_stats(const struct fl_xlru *c) { return c->st; }

int64_t fl_xlru_slots_for_budget(size_t budget, size_t free_bytes, size_t reserve,
                                 size_t slot_bytes)
{
    if (slot_bytes == 0 || free_bytes <= reserve)
        return 0;
    const size_t avail = free_bytes - reserve;
    const size_t use = budget < avail ? budget : avail;
    const size_t n = use / slot_bytes;
    return n > INT32_MAX ? INT32_MAX : (int64_t)n;
}
