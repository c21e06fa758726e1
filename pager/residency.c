/* residency.c: the RAM budget over paged units, the LRU of unpinned
 * resident units, pin counts, request queues and the pending-fault list.
 *
 * Only resident units with no pins are in the LRU list (oldest first); the
 * cache policy (policy.c: lru, lfu-decay, pinned-hot) picks its victim from
 * that list, so a pinned unit can never be chosen. Everything here runs
 * under p->mu. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "pager/internal.h"
#include "pager/probes.h"

static int q_init(struct pg_queue *q, uint32_t cap)
{
    q->v = malloc(sizeof(uint32_t) * (cap + 1));
    q->head = q->len = 0;
    q->cap = cap + 1;
    return q->v ? 0 : -ENOMEM;
}

static void q_push(struct pg_queue *q, uint32_t u)
{
    q->v[(q->head + q->len++) % q->cap] = u;
}

static uint32_t q_pop(struct pg_queue *q)
{
    uint32_t u = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return u;
}

int pg_res_init(struct pager *p)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    p->lru_head = p->lru_tail = PG_NONE;
    /* Each unit sits at most once in each queue (flags), so n_units bounds them. */
    if (q_init(&p->dq, p->n_units) < 0 || q_init(&p->pq, p->n_units) < 0)
        return -ENOMEM;
    return 0;
}

void pg_res_free(struct pager *p)
{
    free(p->dq.v);
    free(p->pq.v);
    free(p->pend);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

void pg_lru_remove(struct pager *p, uint32_t u)
{
    struct pg_unit *n = &p->units[u];
    if (n->lru_prev != PG_NONE)
        p->units[n->lru_prev].lru_next = n->lru_next;
    else if (p->lru_head == u)
        p->lru_head = n->lru_next;
    else
        return; /* not in the list */
    if (n->lru_next != PG_NONE)
        p->units[n->lru_next].lru_prev = n->lru_prev;
    else
        p->lru_tail = n->lru_prev;
    n->lru_prev = n->lru_next = PG_NONE;
}

void pg_lru_push_mru(struct pager *p, uint32_t u)
{
    struct pg_unit *n = &p->units[u];
    n->lru_prev = p->lru_tail;
    n->lru_next = PG_NONE;
    if (p->lru_tail != PG_NONE)
        p->units[p->lru_tail].lru_next = u;
    else
        p->lru_head = u;
    p->lru_tail = u;
}

void pg_lru_push_lru(struct pager *p, uint32_t u)
{
    struct pg_unit *n = &p->units[u];
    n->lru_prev = PG_NONE;
    n->lru_next = p->lru_head;
    if (p->lru_head != PG_NONE)
        p->units[p->lru_head].lru_prev = u;
    else
        p->lru_tail = u;
    p->lru_head = u;
}

/* A page may be dropped when it holds no RAM byte and no other unit that
 * is loading or resident has bytes in it. */
static bool page_droppable(const struct pager *p, uint64_t pi, uint32_t self)
{
    if (pg_page_is_ram(p, pi))
        return false;
    uint64_t a = pi * p->page, b = a + p->page;
    for (uint32_t k = pg_range_at(p, a); k < p->n_ranges; k++) {
        const struct pg_range *r = &p->ranges[p->by_off[k]];
        if (r->off >= b)
            break;
        uint8_t st = p->units[r->unit].state;
        if (r->unit != self && (st == PG_LOADING || st == PG_RESIDENT))
            return false;
    }
    return true;
}

static void drop_pages(struct pager *p, uint32_t u)
{
    const struct pg_unit *n = &p->units[u];
    for (uint32_t k = n->first; k < n->first + n->n; k++) {
        uint64_t a, b;
        pg_range_pages(p, &p->ranges[k], &a, &b);
        a /= p->page;
        b /= p->page;
        if (!page_droppable(p, a, u))
            a++;
        if (b > a && !page_droppable(p, b - 1, u))
            b--;
        if (b > a)
            madvise(p->base + a * p->page, (b - a) * p->page, MADV_DONTNEED);
    }
}

static void evict_locked(struct pager *p, uint32_t u)
{
    struct pg_unit *n = &p->units[u];
    pg_lru_remove(p, u);
    n->state = PG_ABSENT; /* first, so that page_droppable does not count it */
    n->by_prefetch = false;
    n->spec = n->wanted = n->cold = false;
    n->refill = false;
    drop_pages(p, u);
    p->charged -= n->charge;
    pg_inc(&n->st.evictions, 1);
    pg_inc(&p->st.evictions, 1);
    const struct pg_range *r = &p->ranges[n->first];
    FL_PROBE_EVICT(n->layer, n->expert, r->kind, n->charge, r->off, FL_PROBE_ACQ_COUNT(n->st),
                   FL_PROBE_ACQ_COUNT(p->st));
}

/* Makes room for need bytes by evicting the cache policy's victims; false
 * when the pinned and loading units leave no room. */
static bool reserve(struct pager *p, uint64_t need)
{
    while (p->charged + need > p->budget) {
        uint32_t v = pg_policy_victim_locked(p);
        if (v == PG_NONE)
            return false;
        evict_locked(p, v);
    }
    p->charged += need;
    if (p->charged > p->peak)
        p->peak = p->charged;
    return true;
}

/* A guess (a prediction's prefetch) takes only room no routed expert needs:
 * it is dropped rather than evict one whose acquire is coming. Otherwise a
 * step whose layers each route more experts than the budget holds beside
 * the next layer's guesses (a prefill or a batch of many sequences) evicts
 * each expert before its use and reads it twice. */
static bool reserve_guess(struct pager *p, uint64_t need)
{
    while (p->charged + need > p->budget) {
        uint32_t v = pg_policy_victim_locked(p);
        if (v == PG_NONE || p->units[v].wanted)
            return false;
        evict_locked(p, v);
    }
    return reserve(p, need);
}

void pg_res_fit_budget_locked(struct pager *p)
{
    while (p->charged > p->budget) {
        const uint32_t v = pg_policy_victim_locked(p);
        if (v == PG_NONE)
            return;
        evict_locked(p, v);
    }
}

void pg_request_locked(struct pager *p, uint32_t u, bool demand)
{
    struct pg_unit *n = &p->units[u];
    if (atomic_load(&p->failed))
        return;
    if (demand) {
        if (n->state == PG_LOADING || n->demand)
            return;
        if (n->state == PG_RESIDENT)
            n->refill = true;
        else
            n->state = PG_QUEUED;
        n->demand = true;
        q_push(&p->dq, u);
    } else {
        if (n->state != PG_ABSENT)
            return;
        n->state = PG_QUEUED;
        if (n->prefetch)
            return; /* its old entry is still in the queue and will serve */
        n->prefetch = true;
        q_push(&p->pq, u);
    }
    pg_io_kick(p);
}

static void pin(struct pager *p, uint32_t u)
{
    if (p->units[u].pins++ == 0)
        pg_lru_remove(p, u);
}

static void unpin(struct pager *p, uint32_t u)
{
    struct pg_unit *n = &p->units[u];
    if (--n->pins == 0 && n->state == PG_RESIDENT)
        pg_lru_push_mru(p, u);
}

/* The head of the demand queue, or PG_NONE; a head that cannot fit blocks. */
static uint32_t next_demand(struct pager *p, bool *refill, bool *blocked)
{
    while (p->dq.len) {
        uint32_t u = p->dq.v[p->dq.head];
        struct pg_unit *n = &p->units[u];
        if (n->state == PG_RESIDENT && n->refill) {
            q_pop(&p->dq);
            n->demand = false;
            pin(p, u); /* no eviction under a re-copy */
            *refill = true;
            return u;
        }
        if (n->state == PG_ABSENT)
            n->state = PG_QUEUED; /* evicted while its re-copy waited: load it */
        if (n->state != PG_QUEUED) {
            q_pop(&p->dq);
            n->demand = false;
            continue;
        }
        if (!reserve(p, n->charge)) {
            *blocked = true;
            return PG_NONE;
        }
        q_pop(&p->dq);
        n->demand = false;
        n->state = PG_LOADING;
        return u;
    }
    return PG_NONE;
}

uint32_t pg_next_load_locked(struct pager *p, bool allow_prefetch, bool *refill)
{
    bool blocked = false;
    *refill = false;
    if (atomic_load(&p->failed))
        return PG_NONE;
    uint32_t u = next_demand(p, refill, &blocked);
    if (u != PG_NONE || blocked || !allow_prefetch)
        return u;
    while (p->pq.len) {
        u = q_pop(&p->pq);
        struct pg_unit *n = &p->units[u];
        n->prefetch = false;
        if (n->state != PG_QUEUED || n->demand)
            continue;
        if (!(n->spec ? reserve_guess(p, n->charge) : reserve(p, n->charge))) {
            /* advisory: dropped, never waited for */
            n->state = PG_ABSENT;
            continue;
        }
        n->state = PG_LOADING;
        n->by_prefetch = true;
        return u;
    }
    return PG_NONE;
}

/* Whether unit u's load installed the page at page_off: its own pages and
 * the boundary pages it shares with a neighbour (whose faults list the
 * neighbour, the page's first owner). */
static bool unit_installs_page(const struct pager *p, uint32_t u, uint64_t page_off)
{
    const struct pg_unit *n = &p->units[u];
    for (uint32_t k = 0; k < n->n; k++) {
        uint64_t a, b;
        pg_range_pages(p, &p->ranges[n->first + k], &a, &b);
        if (a <= page_off && page_off < b)
            return true;
    }
    return false;
}

static void pending_resolve(struct pager *p, uint32_t u, int err)
{
    uint64_t now = pg_now_ns();
    uint32_t w = 0;
    for (uint32_t i = 0; i < p->n_pend; i++) {
        struct pg_pending *f = &p->pend[i];
        bool mine = u == PG_NONE || f->unit == u || (!err && unit_installs_page(p, u, f->page_off));
        if (!mine) {
            p->pend[w++] = *f;
            continue;
        }
        /* Counted before the thread is let go: once its access returns,
         * its stall is in the statistics (and the trace). */
        pg_stall_record(p, now - f->t_ns);
        const struct pg_unit *n = &p->units[f->unit];
        FL_PROBE_FAULT_END(n->layer, n->expert, p->ranges[n->first].kind, now - f->t_ns,
                           f->page_off);
        if (err)
            pg_poison_page(p, f->page_off);
        else
            pg_wake_range(p, f->page_off, p->page);
    }
    p->n_pend = w;
}

void pg_load_done_locked(struct pager *p, uint32_t u, bool refill, int err)
{
    struct pg_unit *n = &p->units[u];
    if (refill) {
        n->refill = false;
        unpin(p, u);
    } else if (err == 0) {
        n->state = PG_RESIDENT;
        pg_inc(&n->st.loads, 1);
        pg_inc(&p->st.loads, 1);
        if (n->cold) { /* guessed, and its layer chose otherwise meanwhile */
            n->cold = n->wanted = false;
            if (n->pins == 0)
                pg_lru_push_lru(p, u);
        } else {
            n->wanted = n->by_prefetch; /* routed or guessed: its acquire should come */
            if (n->pins == 0)
                pg_lru_push_mru(p, u);
        }
    } else {
        n->state = PG_ABSENT;
        p->charged -= n->charge;
    }
    pending_resolve(p, u, err);
    pthread_cond_broadcast(&p->cv);
}

void pg_pending_add_locked(struct pager *p, uint64_t page_off, uint32_t u)
{
    if (p->n_pend == p->cap_pend) {
        uint32_t nc = p->cap_pend ? p->cap_pend * 2 : 64;
        struct pg_pending *np = realloc(p->pend, nc * sizeof(*np));
        if (!np) { /* cannot track it: it must not wait unseen */
            pg_poison_page(p, page_off);
            return;
        }
        p->pend = np;
        p->cap_pend = nc;
    }
    p->pend[p->n_pend++] = (struct pg_pending){ page_off, u, pg_now_ns() };
}

void pg_fail(struct pager *p, int err, const char *fmt, ...)
{
    if (atomic_load(&p->failed) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->errmsg.msg, sizeof(p->errmsg.msg), fmt, ap);
        va_end(ap);
        atomic_store(&p->failed, err < 0 ? err : -EIO);
    }
    /* Nothing queued will be read now: whoever waits on it gets the error. */
    while (p->dq.len) {
        struct pg_unit *n = &p->units[q_pop(&p->dq)];
        n->demand = false;
        if (n->state == PG_QUEUED)
            n->state = PG_ABSENT;
    }
    while (p->pq.len) {
        struct pg_unit *n = &p->units[q_pop(&p->pq)];
        n->prefetch = false;
        if (n->state == PG_QUEUED)
            n->state = PG_ABSENT;
    }
    pending_resolve(p, PG_NONE, err);
    pthread_cond_broadcast(&p->cv);
}

/* --- the public residency calls -------------------------------------------- */

static int unit_for(struct pager *p, int layer, int expert, uint32_t *u)
{
    if (layer < 0 || expert < 0)
        return -EINVAL;
    if (layer >= p->n_layers || expert >= p->n_expert)
        return 1; /* not paged */
    int32_t v = p->unit_of[layer * p->n_expert + expert];
    if (v < 0)
        return 1;
    *u = (uint32_t)v;
    return 0;
}

static int prefetch(struct pager *p, int layer, const int32_t *experts, int n, bool guess)
{
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < n; i++) {
        uint32_t u;
        int k = unit_for(p, layer, experts[i], &u);
        if (k < 0 || (k == 0 && (k = atomic_load(&p->failed)) != 0)) {
            rc = k;
            break;
        }
        if (k > 0)
            continue; /* not paged */
        struct pg_unit *un = &p->units[u];
        if (!guess)
            un->spec = un->cold = false; /* certain now */
        if (!guess && un->state == PG_RESIDENT && un->pins == 0) {
            /* about to be used: not the victim of the reads that follow */
            pg_lru_remove(p, u);
            pg_lru_push_mru(p, u);
            un->wanted = true;
        } else if (un->state == PG_ABSENT && p->held && p->held(p->held_arg, layer, experts[i])) {
            pg_inc(&p->st.prefetch_skips, 1);
        } else if (un->state == PG_ABSENT) {
            un->spec = guess;
            pg_request_locked(p, u, false);
            pg_inc(&p->st.prefetches, 1);
            FL_PROBE_PREFETCH(un->layer, un->expert, p->ranges[un->first].kind, un->charge,
                              p->ranges[un->first].off);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void pager_set_held_elsewhere(struct pager *p, pager_held_fn fn, void *arg)
{
    pthread_mutex_lock(&p->mu);
    p->held = fn;
    p->held_arg = arg;
    pthread_mutex_unlock(&p->mu);
}

int pager_prefetch(struct pager *p, int layer, const int32_t *experts, int n)
{
    return prefetch(p, layer, experts, n, false);
}

int pager_prefetch_guess(struct pager *p, int layer, const int32_t *experts, int n)
{
    return prefetch(p, layer, experts, n, true);
}

void pager_prefetch_settle(struct pager *p, int layer)
{
    if (layer < 0 || layer >= p->n_layers)
        return;
    pthread_mutex_lock(&p->mu);
    for (int e = 0; e < p->n_expert; e++) {
        int32_t u = p->unit_of[layer * p->n_expert + e];
        struct pg_unit *n = u >= 0 ? &p->units[u] : NULL;
        if (!n || !n->spec)
            continue;
        n->spec = n->wanted = false; /* guessed, not chosen */
        if (n->state == PG_RESIDENT && n->pins == 0) {
            pg_lru_remove(p, (uint32_t)u);
            pg_lru_push_lru(p, (uint32_t)u);
        } else if (n->state == PG_LOADING) {
            n->cold = true;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

void pager_prefetch_cancel(struct pager *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->pq.len) {
        struct pg_unit *n = &p->units[q_pop(&p->pq)];
        n->prefetch = false;
        if (n->state == PG_QUEUED && !n->demand)
            n->state = PG_ABSENT;
    }
    pthread_mutex_unlock(&p->mu);
}

int pager_acquire(struct pager *p, int layer, int expert)
{
    return pager_acquire_uses(p, layer, expert, 1);
}

int pager_acquire_uses(struct pager *p, int layer, int expert, uint32_t uses)
{
    uint32_t u;
    int k = unit_for(p, layer, expert, &u);
    if (k != 0)
        return k < 0 ? k : 0;
    struct pg_unit *n = &p->units[u];
    pthread_mutex_lock(&p->mu);
    int rc = atomic_load(&p->failed);
    if (rc == 0) {
        pin(p, u);
        n->spec = n->wanted = n->cold = false;
        pg_policy_touch_locked(p, u, uses ? uses : 1);
        if (n->state == PG_RESIDENT) {
            FL_PROBE_HIT(n->layer, n->expert, p->ranges[n->first].kind, n->charge,
                         p->ranges[n->first].off);
            bool pf = n->by_prefetch;
            n->by_prefetch = false;
            pg_inc(pf ? &n->st.prefetch_hits : &n->st.cache_hits, 1);
            pg_inc(pf ? &p->st.prefetch_hits : &p->st.cache_hits, 1);
            pthread_mutex_unlock(&p->mu);
            return 0;
        }
        uint64_t t0 = pg_now_ns();
        bool pf = n->state == PG_LOADING && n->by_prefetch;
        pg_inc(pf ? &n->st.prefetch_hits : &n->st.misses, 1);
        pg_inc(pf ? &p->st.prefetch_hits : &p->st.misses, 1);
        n->by_prefetch = false;
        pg_request_locked(p, u, true);
        while (n->state != PG_RESIDENT && (rc = atomic_load(&p->failed)) == 0)
            pthread_cond_wait(&p->cv, &p->mu);
        if (rc == 0) {
            uint64_t waited = pg_now_ns() - t0;
            pg_stall_record(p, waited);
            FL_PROBE_ACQUIRED(n->layer, n->expert, p->ranges[n->first].kind, waited,
                              p->ranges[n->first].off, FL_PROBE_ACQ_COUNT(n->st),
                              FL_PROBE_ACQ_COUNT(p->st));
        } else {
            unpin(p, u);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int pager_settle(struct pager *p, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&p->mu);
    int rc = 0;
    while (p->n_pend && !atomic_load(&p->failed) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&p->cv, &p->mu, &dl);
    int out = atomic_load(&p->failed) ? atomic_load(&p->failed) : p->n_pend ? -ETIMEDOUT : 0;
    pthread_mutex_unlock(&p->mu);
    return out;
}

void pager_release(struct pager *p, int layer, int expert)
{
    uint32_t u;
    if (unit_for(p, layer, expert, &u) != 0)
        return;
    pthread_mutex_lock(&p->mu);
    if (p->units[u].pins > 0) {
        unpin(p, u);
        if (p->dq.len)
            pg_io_kick(p); /* a demand read may have waited for room */
    }
    pthread_mutex_unlock(&p->mu);
}

bool pager_resident(struct pager *p, int layer, int expert)
{
    uint32_t u;
    int k = unit_for(p, layer, expert, &u);
    if (k != 0)
        return k > 0;
    pthread_mutex_lock(&p->mu);
    bool r = p->units[u].state == PG_RESIDENT;
    pthread_mutex_unlock(&p->mu);
    return r;
}

uint64_t pager_resident_bytes(const struct pager *p)
{
    pthread_mutex_lock((pthread_mutex_t *)&p->mu);
    uint64_t v = p->charged;
    pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
    return v;
}

uint64_t pager_peak_resident_bytes(const struct pager *p)
{
    pthread_mutex_lock((pthread_mutex_t *)&p->mu);
    uint64_t v = p->peak;
    pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
    return v;
}
