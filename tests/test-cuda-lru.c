/* test-cuda-lru.c: the VRAM expert cache's slot bookkeeping (plain C; runs
 * without a GPU). Hand-made scenarios, then random runs checked against a
 * naive model (timestamps, linear scans) of the same policy, LRU and
 * lfu-decay; lfu-next on hand-made choices and against Belady's MIN on a
 * cycle through the layers. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda-backend.h"
#include "backend/cuda/expert-lru.h"
#include "pager/belady.h"
#include "pager/policy.h"
#include "tests/check.h"

static int acq(struct fl_xlru *c, int l, int e, struct fl_xlru_res *r)
{
    return fl_xlru_acquire(c, l, e, r);
}

static void scenario_lru(void)
{
    printf("scenario: 3 slots, LRU order, eviction report\n");
    struct fl_xlru *c;
    CHECK(fl_xlru_create(3, 4, 8, &c) == 0, "create");
    struct fl_xlru_res r;
    int s[3];
    for (int i = 0; i < 3; i++) {
        CHECK(acq(c, 0, i, &r) == 0 && !r.hit && r.evicted_layer == -1, "fill %d", i);
        s[i] = r.slot;
        fl_xlru_release(c, r.slot);
    }
    CHECK(s[0] != s[1] && s[1] != s[2] && s[0] != s[2], "distinct slots");
    /* touch 0 so 1 becomes the LRU */
    CHECK(acq(c, 0, 0, &r) == 0 && r.hit && r.slot == s[0], "hit 0");
    fl_xlru_release(c, r.slot);
    CHECK(acq(c, 1, 5, &r) == 0 && !r.hit && r.slot == s[1], "evicts LRU slot");
    CHECK(r.evicted_layer == 0 && r.evicted_expert == 1, "names victim (got %d/%d)",
          r.evicted_layer, r.evicted_expert);
    fl_xlru_release(c, r.slot);
    CHECK(fl_xlru_lookup(c, 0, 1) == -ENOENT, "victim forgotten");
    CHECK(fl_xlru_lookup(c, 1, 5) == s[1], "new key mapped");
    int l, e;
    CHECK(fl_xlru_key(c, s[1], &l, &e) && l == 1 && e == 5, "slot key");
    struct fl_xlru_stats st = fl_xlru_stats(c);
    CHECK(st.hits == 1 && st.misses == 4 && st.evictions == 1, "stats %llu/%llu/%llu",
          (unsigned long long)st.hits, (unsigned long long)st.misses,
          (unsigned long long)st.evictions);
    fl_xlru_destroy(c);
}

static void scenario_pins(void)
{
    printf("scenario: pinned slots are never evicted, -EBUSY when all are\n");
    struct fl_xlru *c;
    CHECK(fl_xlru_create(2, 1, 8, &c) == 0, "create");
    struct fl_xlru_res a, b, r;
    CHECK(acq(c, 0, 0, &a) == 0 && acq(c, 0, 1, &b) == 0, "two pinned");
    CHECK(acq(c, 0, 2, &r) == -EBUSY, "all pinned -> EBUSY");
    CHECK(acq(c, 0, 0, &r) == 0 && r.hit && fl_xlru_pins(c, a.slot) == 2, "hit on pinned slot");
    fl_xlru_release(c, a.slot);
    fl_xlru_release(c, a.slot);
    /* a (0/0) is more recent than b but b is pinned: a must go */
    CHECK(acq(c, 0, 3, &r) == 0 && r.slot == a.slot && r.evicted_expert == 0, "skips pinned LRU");
    CHECK(fl_xlru_release(c, b.slot) == 0 && fl_xlru_release(c, b.slot) == -EINVAL,
          "double release refused");
    CHECK(fl_xlru_invalidate(c, r.slot) == 0 && fl_xlru_lookup(c, 0, 3) == -ENOENT, "invalidate");
    CHECK(acq(c, 0, 4, &r) == 0 && r.slot == a.slot && r.evicted_layer == -1,
          "invalidated slot reused first, as free");
    CHECK(acq(c, 5, 0, &r) == -EINVAL && acq(c, 0, 8, &r) == -EINVAL && acq(c, -1, 0, &r) == -EINVAL,
          "keys out of range");
    CHECK(fl_xlru_create(0, 1, 1, &c) == -EINVAL, "zero slots refused");
    fl_xlru_destroy(c);
}

static void scenario_budget(void)
{
    printf("scenario: slots for a budget never exceed free memory\n");
    const size_t M = 1 << 20;
    CHECK(fl_xlru_slots_for_budget(100 * M, 1000 * M, 10 * M, 10 * M) == 10, "budget-bound");
    CHECK(fl_xlru_slots_for_budget(1000 * M, 100 * M, 10 * M, 10 * M) == 9, "free-bound");
    CHECK(fl_xlru_slots_for_budget(1000 * M, 10 * M, 10 * M, 1 * M) == 0, "nothing free");
    CHECK(fl_xlru_slots_for_budget(5 * M, 100 * M, 0, 10 * M) == 0, "slot above budget");
    CHECK(fl_xlru_slots_for_budget(5 * M, 100 * M, 0, 0) == 0, "zero-size slot");
}

static void scenario_lfu(void)
{
    printf("scenario: lfu-decay keeps the often used, and forgets them\n");
    for (int pass = 0; pass < 2; pass++) {
        const double half_life = pass ? 1e9 : 4.0; /* 1e9: counts that never fade */
        struct fl_xlru *c;
        struct fl_xlru_res r;
        CHECK(fl_xlru_create(2, 1, 8, &c) == 0 && fl_xlru_set_lfu(c, half_life) == 0, "create");
        CHECK(fl_xlru_set_lfu(c, 0.0) == -EINVAL, "half-life 0 refused");
        const int seq[] = { 0, 0, 0, 0, 0, 0, 1 }; /* 0 used six times, 1 once and last */
        for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
            CHECK(acq(c, 0, seq[i], &r) == 0, "acquire %d", seq[i]);
            fl_xlru_release(c, r.slot);
        }
        /* LRU would evict 0 (least recent); lfu-decay evicts 1 (fewer uses) */
        CHECK(acq(c, 0, 2, &r) == 0 && r.evicted_expert == 1, "evicts the rarely used (got %d)",
              r.evicted_expert);
        fl_xlru_release(c, r.slot);
        /* 2 and 3 in turn, 8 times: each miss evicts the other (fewer uses
         * than 0's six); with a half-life of 4 acquires 0's old uses fade
         * below theirs and 0 goes, with counts that never fade it stays */
        for (int i = 0; i < 8; i++) {
            CHECK(acq(c, 0, 2 + i % 2, &r) == 0, "turn %d", i);
            fl_xlru_release(c, r.slot);
        }
        CHECK((fl_xlru_lookup(c, 0, 0) == -ENOENT) == !pass, "half-life %g: 0 %s", half_life,
              pass ? "kept" : "evicted");
        fl_xlru_destroy(c);
    }
}

/* Naive model: per slot key, pins and a time stamp; the victim is a free
 * slot if any (the most recently invalidated first, then never-used ones
 * in index order), else the unpinned occupied slot used longest ago, or,
 * with a half-life, the one of the smallest decayed use count (each use
 * counts 1, halving every half_life acquires; ties to the least recent),
 * or with n_used, lfu-next's: counts on a clock of layer steps (n_used per
 * change of layer, or per repeated key in one step), `uses` per acquire (0:
 * none, no clock), the largest expected distance to the next use goes
 * (pager_lfu_next_distance; ties to the least recent). */
struct model {
    int n;
    int key[16], pins[16];
    long used[16]; /* last acquire time; free slots keep theirs, set to -1 on invalidation */
    long clock;
    double half_life;       /* 0: LRU */
    double count[64];       /* per key: decayed count as of its last use */
    long last[64];          /* per key: acquires counted when last used */
    long tick;
    int n_used, n_layer, n_expert, clock_layer; /* lfu-next when n_used > 0 */
    long steps;
};

static double model_next_count(const struct model *m, int k)
{
    return m->count[k] * exp2(-(double)(m->steps - m->last[k]) / m->half_life);
}

static double model_distance(const struct model *m, int k)
{
    return pager_lfu_next_distance(model_next_count(m, k),
                                   pager_lfu_next_rate(m->n_layer, m->n_used, m->half_life),
                                   k / m->n_expert, m->clock_layer, m->n_layer);
}

static double model_count(const struct model *m, int k)
{
    return m->count[k] * exp2(-(double)(m->tick - m->last[k]) / m->half_life);
}

static bool model_better(const struct model *m, int s, int best)
{
    const int fb = best >= 0 && m->key[best] < 0, fs = m->key[s] < 0;
    if (best < 0 || (fs && !fb))
        return true;
    if (fs != fb)
        return false;
    if (m->n_used && !fs) {
        const double ds = model_distance(m, m->key[s]), db = model_distance(m, m->key[best]);
        if (fabs(ds - db) > 1e-9 * (ds + db))
            return ds > db;
    } else if (m->half_life > 0 && !fs) {
        const double cs = model_count(m, m->key[s]), cb = model_count(m, m->key[best]);
        if (fabs(cs - cb) > 1e-9 * (cs + cb))
            return cs < cb;
    }
    return m->used[s] < m->used[best];
}

static void model_use(struct model *m, int k, int uses)
{
    if (m->n_used) {
        if (uses) {
            m->count[k] = model_next_count(m, k) + uses;
            m->last[k] = m->steps;
        }
    } else if (m->half_life > 0) {
        m->count[k] = model_count(m, k) + 1.0;
        m->last[k] = m->tick;
    }
}

static int model_acquire(struct model *m, int k, int uses, int *evicted, bool *hit)
{
    *evicted = -1;
    *hit = true;
    m->tick++;
    if (m->n_used && uses &&
        (k / m->n_expert != m->clock_layer || (m->count[k] > 0 && m->last[k] == m->steps))) {
        m->steps += m->n_used;
        m->clock_layer = k / m->n_expert;
    }
    for (int s = 0; s < m->n; s++)
        if (m->key[s] == k) {
            m->pins[s]++;
            m->used[s] = ++m->clock;
            model_use(m, k, uses);
            return s;
        }
    int best = -1;
    for (int s = 0; s < m->n; s++)
        if (!m->pins[s] && model_better(m, s, best))
            best = s;
    if (best < 0)
        return -EBUSY;
    *hit = false;
    *evicted = m->key[best];
    m->key[best] = k;
    m->pins[best] = 1;
    m->used[best] = ++m->clock;
    model_use(m, k, uses);
    return best;
}

/* half_life < 0: lfu-next with 2 experts per token */
static void random_run(double half_life)
{
    printf("random: 20000 acquire/release/invalidate ops vs a naive model (%s)\n",
           half_life > 0 ? "lfu-decay" : half_life < 0 ? "lfu-next" : "LRU");
    enum { SLOTS = 6, LAYERS = 3, EXPERTS = 5, N_USED = 2 };
    struct fl_xlru *c;
    CHECK(fl_xlru_create(SLOTS, LAYERS, EXPERTS, &c) == 0, "create");
    CHECK(half_life <= 0 || fl_xlru_set_lfu(c, half_life) == 0, "lfu");
    CHECK(half_life >= 0 || fl_xlru_set_lfu_next(c, N_USED) == 0, "lfu-next");
    struct model m = {.n = SLOTS, .half_life = half_life, .n_layer = LAYERS, .n_expert = EXPERTS,
                      .clock_layer = -1};
    if (half_life < 0) {
        m.n_used = N_USED;
        m.half_life = PAGER_LFU_STEP_HALF_LIFE_TOKENS * LAYERS * N_USED;
    }
    for (int s = 0; s < SLOTS; s++) {
        m.key[s] = -1;
        m.used[s] = -(SLOTS - s); /* initial free order: slot 0 first */
    }
    srand(1234);
    int held[64], n_held = 0, mismatches = 0;
    for (int op = 0; op < 20000 && mismatches < 5; op++) {
        const int what = rand() % 10;
        if (what < 6) {
            const int l = rand() % LAYERS, e = rand() % EXPERTS, k = l * EXPERTS + e;
            const int uses = half_life < 0 ? rand() % 4 : 1; /* 0: a prefetch */
            struct fl_xlru_res r;
            int ev;
            bool hit;
            const int rc = fl_xlru_acquire_uses(c, l, e, (uint32_t)uses, &r);
            const int ms = model_acquire(&m, k, uses, &ev, &hit);
            if (rc < 0 || ms < 0) {
                if (rc != ms) {
                    mismatches++;
                    CHECK(0, "op %d: acquire rc %d, model %d", op, rc, ms);
                }
                continue;
            }
            const int got_ev = r.evicted_layer < 0 ? -1 : r.evicted_layer * EXPERTS + r.evicted_expert;
            if (r.slot != ms || got_ev != ev || r.hit != hit) {
                mismatches++;
                CHECK(0, "op %d: acquire %d/%d slot %d (model %d) evicted %d (model %d)", op, l, e,
                      r.slot, ms, got_ev, ev);
            }
            if (n_held < 64)
                held[n_held++] = r.slot;
            else {
                fl_xlru_release(c, r.slot);
                m.pins[r.slot]--;
            }
        } else if (n_held > 0) {
            const int i = rand() % n_held, s = held[i];
            held[i] = held[--n_held];
            if (what == 9 && m.pins[s] == 1) {
                CHECK(fl_xlru_invalidate(c, s) == 0, "invalidate");
                m.key[s] = -1;
                m.pins[s] = 0;
                m.used[s] = -1000000 - op; /* free again, and the first choice */
            } else {
                CHECK(fl_xlru_release(c, s) == 0, "release");
                m.pins[s]--;
            }
        }
        for (int s = 0; s < SLOTS; s++)
            if (fl_xlru_pins(c, s) != m.pins[s]) {
                mismatches++;
                CHECK(0, "op %d: slot %d pins %d, model %d", op, s, fl_xlru_pins(c, s), m.pins[s]);
            }
    }
    fl_xlru_destroy(c);
}

/* 2 layers of 4 experts, 2 slots. Step 1: layer 0 acquires expert 0 for
 * `uses` tokens, layer 1 expert 0 for one. Step 2, layer 0 needs expert 1:
 * the victim is the expert whose next use comes later. Used by 5 tokens,
 * (0,0) is expected back soon: (1,0) goes. Used by one token each, the two
 * are as likely; (1,0)'s layer comes next, (0,0)'s a whole token later:
 * (0,0) goes (LRU would evict it too, as the older). Prefetches (0 uses)
 * in between change nothing. */
static int lfu_next_victim(uint32_t uses, bool prefetches)
{
    struct fl_xlru *c;
    struct fl_xlru_res r;
    int layer = -1, expert = -1;
    CHECK(fl_xlru_create(2, 2, 4, &c) == 0 && fl_xlru_set_lfu_next(c, 1) == 0, "create");
    CHECK(fl_xlru_acquire_uses(c, 0, 0, uses, &r) == 0 && fl_xlru_release(c, r.slot) == 0, "0/0");
    CHECK(fl_xlru_acquire_uses(c, 1, 0, 1, &r) == 0 && fl_xlru_release(c, r.slot) == 0, "1/0");
    for (int i = 0; prefetches && i < 20; i++)
        CHECK(fl_xlru_acquire_uses(c, 1, 0, 0, &r) == 0 && r.hit &&
              fl_xlru_release(c, r.slot) == 0, "a prefetch of a cached expert");
    CHECK(fl_xlru_acquire_uses(c, 0, 1, 1, &r) == 0 && !r.hit, "0/1 misses");
    layer = r.evicted_layer;
    expert = r.evicted_expert;
    fl_xlru_destroy(c);
    return expert == 0 ? layer : -1;
}

static void scenario_lfu_next(void)
{
    printf("scenario: lfu-next counts tokens, then goes by the layer's distance\n");
    CHECK(lfu_next_victim(5, false) == 1, "used by 5 tokens, (0,0) stays");
    CHECK(lfu_next_victim(1, false) == 0, "equal counts: the farther layer goes");
    CHECK(lfu_next_victim(5, true) == 1, "prefetches count no use");
    struct fl_xlru *c;
    CHECK(fl_xlru_create(1, 1, 1, &c) == 0 && fl_xlru_set_lfu_next(c, 0) == -EINVAL,
          "n_used 0 refused");
    fl_xlru_destroy(c);
}

/* One expert per layer, every token the same (all equally hot), 4 layers
 * through 3 slots: LRU evicts the expert the next layer needs (a load per
 * acquire); lfu-next, once its counts outweigh a layer's distance, evicts
 * the one whose layer comes farthest ahead, MIN's choice: from token 32 to
 * 64 it loads what MIN loads (give or take one, where the phases differ). */
static uint64_t cycle_loads(bool next, int tokens)
{
    struct fl_xlru *c;
    struct fl_xlru_res r;
    if (fl_xlru_create(3, 4, 1, &c) || (next && fl_xlru_set_lfu_next(c, 1)))
        return 0;
    for (int t = 0; t < tokens; t++)
        for (int l = 0; l < 4; l++)
            if (fl_xlru_acquire(c, l, 0, &r) == 0)
                fl_xlru_release(c, r.slot);
    const uint64_t loads = fl_xlru_stats(c).misses;
    fl_xlru_destroy(c);
    return loads;
}

static void scenario_lfu_next_cycle(void)
{
    int32_t keys[4 * 64], group[4 * 64];
    for (int i = 0; i < 4 * 64; i++)
        keys[i] = i % 4, group[i] = i;
    const int64_t min32 = fl_belady_loads(keys, group, 4 * 32, 4, 3);
    const int64_t min64 = fl_belady_loads(keys, group, 4 * 64, 4, 3);
    const uint64_t lru = cycle_loads(false, 64);
    const int64_t d_next = (int64_t)(cycle_loads(true, 64) - cycle_loads(true, 32));
    const int64_t d_min = min64 - min32;
    CHECK(lru == 256 && d_min > 0 && d_next <= d_min + 1 && d_next >= d_min - 1,
          "4 layers through 3 slots: LRU %llu loads (256); tokens 32-64 lfu-next %lld, MIN %lld",
          (unsigned long long)lru, (long long)d_next, (long long)d_min);
    printf("scenario: a cycle through 4 layers in 3 slots, tokens 32-64: lfu-next %lld loads, "
           "MIN %lld (LRU: a load per acquire)\n", (long long)d_next, (long long)d_min);
}

int main(void)
{
    scenario_lru();
    scenario_pins();
    scenario_budget();
    scenario_lfu();
    scenario_lfu_next();
    scenario_lfu_next_cycle();
    random_run(0.0);
    random_run(6.0);
    random_run(-1.0);
    printf("fl_cuda_available() = %d\n", fl_cuda_available());
    return check_summary("test-cuda-lru");
}
