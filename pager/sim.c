/* sim.c: the RAM cache replayed over a pager skeleton (pager/sim.h).
 *
 * Only the fields policy.c reads are set (units, unit_of, the LRU list, the
 * budget, the clock and cfg); the rest of struct pager stays zero and is
 * never touched, because nothing here takes the lock or starts I/O. */
#include "pager/sim.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "pager/internal.h"

struct pager_sim {
    struct pager p;
    struct pager_sim_stats st;
    bool *ready;       /* [n_expert]: scratch of one layer call */
};

static void evict(struct pager *p, uint32_t u)
{
    struct pg_unit *n = &p->units[u];
    pg_lru_remove(p, u);
    n->state = PG_ABSENT;
    n->wanted = false;
    p->charged -= n->charge;
}

/* Makes u resident as a read would (the real pager's reserve(): victims
 * until it fits); false when nothing can go. */
static bool load(struct pager_sim *s, uint32_t u)
{
    struct pager *p = &s->p;
    while (p->charged + p->units[u].charge > p->budget) {
        uint32_t v = pg_policy_victim_locked(p);
        if (v == PG_NONE)
            return false;
        evict(p, v);
    }
    p->charged += p->units[u].charge;
    p->units[u].state = PG_RESIDENT;
    s->st.loads++;
    return true;
}

static int setup_units(struct pager *p, const struct pager_sim_config *c)
{
    const size_t n = (size_t)c->n_layers * (size_t)c->n_expert;
    p->units = calloc(n, sizeof(*p->units));
    p->unit_of = malloc(n * sizeof(*p->unit_of));
    if (!p->units || !p->unit_of)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct pg_unit *u = &p->units[i];
        u->layer = (int32_t)(i / (size_t)c->n_expert);
        u->expert = (int32_t)(i % (size_t)c->n_expert);
        u->charge = c->unit_bytes;
        u->lru_prev = u->lru_next = PG_NONE;
        p->unit_of[i] = (int32_t)i;
    }
    p->n_units = (uint32_t)n;
    return 0;
}

int pager_sim_create(const struct pager_sim_config *c, struct pager_sim **out)
{
    if (c->n_layers < 1 || c->n_expert < 1 || c->n_used < 1 || c->unit_bytes == 0 ||
        c->budget < c->unit_bytes || (int64_t)c->n_layers * c->n_expert > INT32_MAX)
        return -EINVAL;
    struct pager_sim *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    struct pager *p = &s->p;
    p->n_layers = c->n_layers;
    p->n_expert = c->n_expert;
    p->n_used = c->n_used;
    p->budget = c->budget;
    p->lru_head = p->lru_tail = PG_NONE;
    p->cfg.cache = c->cache;
    p->cfg.hot = c->hot;
    p->cfg.n_hot = c->n_hot;
    p->cfg.hot_fraction = c->hot_fraction;
    s->ready = calloc((size_t)c->n_expert, sizeof(bool));
    if (!s->ready || setup_units(p, c) < 0) {
        pager_sim_destroy(s);
        return -ENOMEM;
    }
    pg_policy_init(p);
    if (c->half_life_tokens > 0)
        p->half_life = c->half_life_tokens * c->n_layers * c->n_used;
    if (c->window_frac >= 0)
        p->window_frac = c->window_frac;
    if (c->clock)
        p->step_clock = c->clock == 1;
    p->cfg.hot = NULL; /* read during create only, as pager_open does */
    /* pinned-hot's warm start: the hot set is read at open. Those reads
     * count (every replay starts from an empty cache, MIN's too). */
    for (uint32_t u = 0; u < p->n_units; u++)
        if (p->units[u].hot && load(s, u))
            pg_lru_push_mru(p, u);
    *out = s;
    return 0;
}

void pager_sim_destroy(struct pager_sim *s)
{
    if (!s)
        return;
    free(s->p.units);
    free(s->p.unit_of);
    free(s->ready);
    free(s);
}

/* pager_acquire + pager_release of one unit: pinned (out of the list, so
 * its own read cannot evict it), a use for the policy, read if a read of
 * this layer pushed it out, then most recent. */
static void acquire(struct pager_sim *s, uint32_t u, uint32_t uses)
{
    struct pager *p = &s->p;
    struct pg_unit *n = &p->units[u];
    pg_lru_remove(p, u);
    n->wanted = false;
    pg_policy_touch_locked(p, u, uses);
    if (n->state != PG_RESIDENT) {
        s->st.rereads++;
        if (!load(s, u))
            return;
    }
    pg_lru_push_mru(p, u);
}

void pager_sim_layer(struct pager_sim *s, int layer, const int32_t *experts, int n)
{
    pager_sim_layer_uses(s, layer, experts, NULL, n);
}

void pager_sim_layer_uses(struct pager_sim *s, int layer, const int32_t *experts,
                          const int32_t *uses, int n)
{
    struct pager *p = &s->p;
    if (layer < 0 || layer >= p->n_layers)
        return;
    const int32_t *ids = p->unit_of + (size_t)layer * (size_t)p->n_expert;
    for (int i = 0; i < n; i++) { /* the router ran: what was resident (--stats' hits) */
        if (experts[i] < 0 || experts[i] >= p->n_expert)
            continue;
        struct pg_unit *un = &p->units[ids[experts[i]]];
        s->ready[experts[i]] = un->state == PG_RESIDENT;
        s->st.acquires++;
        s->st.ready += s->ready[experts[i]];
        if (s->ready[experts[i]]) { /* pager_prefetch: wanted, most recent */
            pg_lru_remove(p, (uint32_t)ids[experts[i]]);
            pg_lru_push_mru(p, (uint32_t)ids[experts[i]]);
            un->wanted = true;
        }
    }
    for (int i = 0; i < n; i++) { /* the reads, in the union's order */
        if (experts[i] < 0 || experts[i] >= p->n_expert || s->ready[experts[i]])
            continue;
        const uint32_t u = (uint32_t)ids[experts[i]];
        if (load(s, u)) { /* pg_load_done_locked: a prefetched unit is wanted */
            pg_lru_push_mru(p, u);
            p->units[u].wanted = true;
        }
    }
    for (int pass = 1; pass >= 0; pass--) /* resident first, then the ones read */
        for (int i = 0; i < n; i++)
            if (experts[i] >= 0 && experts[i] < p->n_expert && s->ready[experts[i]] == pass)
                acquire(s, (uint32_t)ids[experts[i]],
                        uses && uses[i] > 0 ? (uint32_t)uses[i] : 1);
}

struct pager_sim_stats pager_sim_stats(const struct pager_sim *s) { return s->st; }
