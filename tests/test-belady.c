/* test-belady: Belady's MIN (pager/belady.h) and the RAM cache replay
 * (pager/sim.h) that bench-xlru judges policies with.
 *   - MIN on hand-made traces whose optimum is worked out below;
 *   - MIN against an exhaustive search over every eviction choice (the
 *     test's own, not the code under test) on random small grouped traces;
 *   - no policy replayed through the pager's code reads less than MIN on
 *     the same requests, and the replay reproduces hand-counted LRU and
 *     lfu-step outcomes;
 *   - on a cycle through the layers with equal counts, lfu-next reads what
 *     MIN reads once warm, and lfu-step what LRU reads;
 *   - the popularity reference on hand-made traces, and on random ones
 *     between MIN and no cache at all. */
#include <errno.h>
#include <string.h>

#include "pager/belady.h"
#include "pager/sim.h"
#include "tests/check.h"

/* Each request its own group. */
static int64_t min_single(const int32_t *keys, size_t n, int32_t n_keys, int cap)
{
    int32_t group[64];
    for (size_t i = 0; i < n; i++)
        group[i] = (int32_t)i;
    return fl_belady_loads(keys, group, n, n_keys, cap);
}

static void test_hand(void)
{
    /* The textbook reference string with 3 frames: the optimum faults 7
     * times (1 2 3 cold; 4 evicts 3; 1, 2 hit; 5 evicts 4; 1, 2 hit; 3
     * evicts 1 or 2; 4 evicts one of the two left: 1, 2, 3, 4, 5, 3, 4). */
    static const int32_t s1[] = { 1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5 };
    CHECK(min_single(s1, 12, 6, 3) == 7, "textbook string: %lld loads, expected 7",
          (long long)min_single(s1, 12, 6, 3));
    /* one frame: every change of key is a load */
    static const int32_t s2[] = { 0, 0, 1, 1, 0, 2, 2 };
    CHECK(min_single(s2, 7, 3, 1) == 4, "one frame");
    /* a cyclic scan 0123 0123 through 3 frames: 0, 1, 2 cold; 3 evicts 2
     * (the farthest next use); 0, 1 hit; 2 evicts 0 or 1 (neither comes
     * back); 3 hits: 5 loads */
    static const int32_t s3[] = { 0, 1, 2, 3, 0, 1, 2, 3 };
    CHECK(min_single(s3, 8, 4, 3) == 5, "cyclic scan: %lld", (long long)min_single(s3, 8, 4, 3));
    /* groups: {0,1} {2} {0,1} with 2 frames. 2 must evict 0 or 1 (the
     * group holds neither any more), one of them is read again: 4 loads. A
     * group may not evict its own: {0,1,2} in 2 frames is impossible. */
    static const int32_t k4[] = { 0, 1, 2, 0, 1 }, g4[] = { 0, 0, 1, 2, 2 };
    CHECK(fl_belady_loads(k4, g4, 5, 3, 2) == 4, "groups");
    static const int32_t k5[] = { 0, 1, 2 }, g5[] = { 0, 0, 0 };
    CHECK(fl_belady_loads(k5, g5, 3, 3, 2) == -EINVAL, "a group larger than the cache");
    /* the pin matters: {1} {0,2} {1} in 2 frames. Flat MIN at 2 would
     * evict 0 (never used again) for 2 and keep 1: 3 loads; held, 0 must
     * stay while 2 loads, so 1 goes and is read again: 4. */
    static const int32_t k6[] = { 1, 0, 2, 1 }, g6[] = { 0, 1, 1, 2 };
    CHECK(fl_belady_loads(k6, g6, 4, 3, 2) == 4, "a group's keys are held together: %lld",
          (long long)fl_belady_loads(k6, g6, 4, 3, 2));
    static const int32_t bad[] = { 0, 7 };
    CHECK(min_single(bad, 2, 4, 2) == -EINVAL, "a key out of range");
    printf("hand-made traces: MIN as worked out\n");
}

/* The fewest loads over every choice of victim: request i onwards with the
 * cache `have` (a bit per key), `held` the keys its group holds already. */
static int search(const int32_t *k, const int32_t *g, int n, int i, unsigned have,
                  unsigned held, int cap)
{
    if (i == n)
        return 0;
    if (i > 0 && g[i] != g[i - 1])
        held = 0;
    const unsigned b = 1u << k[i];
    if (have & b)
        return search(k, g, n, i + 1, have, held | b, cap);
    if (__builtin_popcount(have) < cap)
        return 1 + search(k, g, n, i + 1, have | b, held | b, cap);
    int best = 1 << 20;
    for (unsigned v = have & ~held; v; v &= v - 1) {
        const unsigned out = v & -v;
        const int r = 1 + search(k, g, n, i + 1, (have & ~out) | b, held | b, cap);
        best = r < best ? r : best;
    }
    return best;
}

static uint32_t rng = 12345;
static uint32_t next_rand(void)
{
    rng = rng * 1103515245u + 12345u;
    return rng >> 16;
}

/* A random trace of `groups` groups of distinct keys, each of 1..cap keys
 * (at most `max_req` requests). Returns n. */
static int random_trace(int32_t *k, int32_t *g, int n_keys, int cap, int groups, int max_req)
{
    int n = 0;
    for (int gi = 0; gi < groups && n < max_req; gi++) {
        unsigned used = 0;
        const int m = 1 + (int)(next_rand() % (unsigned)cap);
        for (int j = 0; j < m && n < max_req; j++) {
            int key;
            do
                key = (int)(next_rand() % (unsigned)n_keys);
            while (used & (1u << key));
            used |= 1u << key;
            k[n] = key;
            g[n++] = gi;
        }
    }
    return n;
}

static void test_exhaustive(void)
{
    int checked = 0;
    for (int t = 0; t < 400; t++) {
        int32_t k[16], g[16];
        const int n_keys = 3 + (int)(next_rand() % 4), cap = 1 + (int)(next_rand() % 3);
        const int n = random_trace(k, g, n_keys, cap, 12, 11);
        const int want = search(k, g, n, 0, 0, 0, cap);
        const int64_t got = fl_belady_loads(k, g, (size_t)n, n_keys, cap);
        CHECK(got == want, "trace %d (%d keys, %d frames, %d requests): MIN %lld, search %d", t,
              n_keys, cap, n, (long long)got, want);
        checked++;
    }
    printf("exhaustive search: MIN optimal on %d random grouped traces\n", checked);
}

static void test_popularity(void)
{
    /* capacity 3, groups of one: the 2 most requested (0 three times, 1
     * twice) held, each read once; 2 and 3 read: 4 loads of 7 */
    static const int32_t k1[] = { 0, 1, 2, 0, 3, 1, 0 }, g1[] = { 0, 1, 2, 3, 4, 5, 6 };
    CHECK(fl_static_top_loads(k1, g1, 7, 4, 3) == 4, "groups of one: %lld",
          (long long)fl_static_top_loads(k1, g1, 7, 4, 3));
    /* {0,1} {0,2} {0,3} in 3 frames: groups of 2 leave room to hold one key
     * (0): 1 + 3 loads; MIN also needs 4 */
    static const int32_t k2[] = { 0, 1, 0, 2, 0, 3 }, g2[] = { 0, 0, 1, 1, 2, 2 };
    CHECK(fl_static_top_loads(k2, g2, 6, 4, 3) == 4, "groups of two");
    CHECK(fl_belady_loads(k2, g2, 6, 4, 3) == 4, "groups of two, MIN");
    /* no room to hold anything: every request a load */
    CHECK(fl_static_top_loads(k1, g1, 7, 4, 1) == 7, "one frame");
    CHECK(fl_static_top_loads(k2, g2, 6, 4, 1) == -EINVAL, "a group larger than the cache");
    static const int32_t bad[] = { 0, 9 };
    CHECK(fl_static_top_loads(bad, g1, 2, 4, 2) == -EINVAL, "a key out of range");
    int checked = 0;
    for (int t = 0; t < 400; t++) {
        int32_t k[64], g[64];
        const int n_keys = 6 + (int)(next_rand() % 10), cap = 2 + (int)(next_rand() % 4);
        const int n = random_trace(k, g, n_keys, cap, 40, 64);
        const int64_t top = fl_static_top_loads(k, g, (size_t)n, n_keys, cap);
        const int64_t min = fl_belady_loads(k, g, (size_t)n, n_keys, cap);
        /* the test's own count: the widest group, then the held keys by
         * repeated selection of the most requested one left */
        int count[16] = { 0 }, widest = 0;
        for (int i = 0, first = 0; i < n; i++) {
            first = i && g[i] != g[i - 1] ? i : first;
            widest = i - first + 1 > widest ? i - first + 1 : widest;
            count[k[i]]++;
        }
        int64_t want = n;
        for (int h = 0; h < cap - widest; h++) {
            int best = 0;
            for (int key = 1; key < n_keys; key++)
                best = count[key] > count[best] ? key : best;
            want -= count[best] > 0 ? count[best] - 1 : 0;
            count[best] = 0;
        }
        CHECK(top == want, "random trace %d: %lld loads, the test counts %lld", t,
              (long long)top, (long long)want);
        CHECK(min >= 0 && min <= top && top <= n, "random trace %d: MIN %lld, reference %lld, "
              "%d requests", t, (long long)min, (long long)top, n);
        checked++;
    }
    printf("popularity reference: as counted on hand-made traces and %d random ones, never "
           "below MIN\n", checked);
}

/* Loads of one policy on layer-0 requests, one group per call. */
static double window = -1; /* lfu-step's window, < 0: its own */

static uint64_t sim_loads(enum pager_cache c, const int32_t *k, const int32_t *g, int n,
                          int n_keys, int cap, uint64_t *ready)
{
    struct pager_sim_config cfg = { .n_layers = 1, .n_expert = n_keys, .n_used = 1,
                                    .unit_bytes = 4096, .budget = 4096u * (unsigned)cap,
                                    .cache = c, .window_frac = window };
    struct pager_sim *s;
    if (pager_sim_create(&cfg, &s))
        return UINT64_MAX;
    for (int i = 0; i < n;) {
        int32_t u[16];
        int m = 0, j = i;
        for (; j < n && g[j] == g[i]; j++) /* ascending, as the engine's union */
            u[m++] = k[j];
        for (int a = 1; a < m; a++)
            for (int b = a; b > 0 && u[b - 1] > u[b]; b--) {
                const int32_t x = u[b];
                u[b] = u[b - 1];
                u[b - 1] = x;
            }
        pager_sim_layer(s, 0, u, m);
        i = j;
    }
    const struct pager_sim_stats st = pager_sim_stats(s);
    pager_sim_destroy(s);
    if (ready)
        *ready = st.ready;
    return st.loads;
}

static void test_sim(void)
{
    static const enum pager_cache pol[] = { PAGER_CACHE_LRU, PAGER_CACHE_LFU_DECAY,
                                            PAGER_CACHE_LFU_STEP, PAGER_CACHE_LFU_NEXT };
    for (int t = 0; t < 200; t++) {
        int32_t k[64], g[64];
        const int n_keys = 4 + (int)(next_rand() % 8), cap = 2 + (int)(next_rand() % 3);
        const int n = random_trace(k, g, n_keys, cap, 30, 64);
        const int64_t opt = fl_belady_loads(k, g, (size_t)n, n_keys, cap);
        for (size_t p = 0; p < sizeof(pol) / sizeof(pol[0]); p++) {
            const uint64_t l = sim_loads(pol[p], k, g, n, n_keys, cap, NULL);
            CHECK(opt >= 0 && l >= (uint64_t)opt, "trace %d: policy %zu read %llu < MIN %lld", t,
                  p, (unsigned long long)l, (long long)opt);
        }
    }
    /* LRU on a cyclic scan of 4 experts through 3: nothing ever hits */
    static const int32_t scan[] = { 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3 };
    int32_t sg[12];
    for (int i = 0; i < 12; i++)
        sg[i] = i;
    uint64_t ready = 0;
    CHECK(sim_loads(PAGER_CACHE_LRU, scan, sg, 12, 4, 3, &ready) == 12 && ready == 0,
          "lru on a scan larger than the cache");
    /* lfu-step, 4 frames: expert 0 used 5 times stays while 1, 2, 3, 4, 5
     * pass through once each; lru keeps the last four, so 0 is read again
     * at the end */
    static const int32_t hot[] = { 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 0 };
    int32_t hg[11];
    for (int i = 0; i < 11; i++)
        hg[i] = i;
    CHECK(sim_loads(PAGER_CACHE_LFU_STEP, hot, hg, 11, 6, 4, NULL) == 6, "lfu-step keeps the hot");
    CHECK(sim_loads(PAGER_CACHE_LRU, hot, hg, 11, 6, 4, NULL) == 7, "lru forgets the hot");
    /* a window of a quarter of 4 frames (the most recent expert): 0, 1, 2
     * used three times, 3 once, then 4 and 3. Without it 4 evicts 3 (one
     * use) and 3 is read again, evicting 4: 6 loads; with it 3 is the
     * window at 4's read, 0 goes (the most decayed of the hot), 3 hits: 5 */
    static const int32_t w[] = { 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 4, 3 };
    const uint64_t off = sim_loads(PAGER_CACHE_LFU_STEP, w, sg, 12, 5, 4, NULL);
    window = 0.25;
    const uint64_t on = sim_loads(PAGER_CACHE_LFU_STEP, w, sg, 12, 5, 4, NULL);
    window = -1;
    CHECK(off == 6 && on == 5, "lfu-step's window: %llu loads without, %llu with (6, 5)",
          (unsigned long long)off, (unsigned long long)on);
    printf("replay: no policy below MIN; lru and lfu-step as counted by hand\n");
}

/* Loads of a cyclic pass through n_layers layers of one expert each,
 * `rounds` times, with room for cap experts. */
static uint64_t cycle_loads(enum pager_cache c, int n_layers, int cap, int rounds)
{
    struct pager_sim_config cfg = { .n_layers = n_layers, .n_expert = 1, .n_used = 1,
                                    .unit_bytes = 4096, .budget = 4096u * (unsigned)cap,
                                    .cache = c, .window_frac = -1 };
    struct pager_sim *s;
    if (pager_sim_create(&cfg, &s))
        return UINT64_MAX;
    const int32_t e = 0;
    for (int r = 0; r < rounds; r++)
        for (int l = 0; l < n_layers; l++)
            pager_sim_layer(s, l, &e, 1);
    const uint64_t loads = pager_sim_stats(s).loads;
    pager_sim_destroy(s);
    return loads;
}

/* MIN's loads on the same cycle, each request its own group. */
static int64_t cycle_min(int n_layers, int cap, int rounds)
{
    enum { MAXR = 4 * 64 };
    int32_t keys[MAXR], group[MAXR];
    const int n = n_layers * rounds;
    if (n > MAXR)
        return -1;
    for (int i = 0; i < n; i++) {
        keys[i] = i % n_layers;
        group[i] = i;
    }
    return fl_belady_loads(keys, group, (size_t)n, n_layers, cap);
}

/* One token through 4 layers (one expert each, every token the same: all
 * equally hot), 3 frames. LRU evicts the expert the next layer needs: a
 * load per acquire. lfu-step sees (nearly) equal counts and goes by
 * recency, LRU's choice. lfu-next evicts the expert whose layer comes
 * farthest ahead, MIN's choice, once the counts are high enough that a
 * use's decay weighs less than a layer's distance: from tokens 32 to 64 it
 * reads what MIN reads over them (give or take the one load where the
 * cycles' phases differ). */
static void test_layer_cycle(void)
{
    const int64_t min32 = cycle_min(4, 3, 32), min64 = cycle_min(4, 3, 64);
    const uint64_t lru = cycle_loads(PAGER_CACHE_LRU, 4, 3, 64);
    const uint64_t step = cycle_loads(PAGER_CACHE_LFU_STEP, 4, 3, 64);
    const uint64_t n32 = cycle_loads(PAGER_CACHE_LFU_NEXT, 4, 3, 32);
    const uint64_t n64 = cycle_loads(PAGER_CACHE_LFU_NEXT, 4, 3, 64);
    const int64_t d_next = (int64_t)(n64 - n32), d_min = min64 - min32;
    CHECK(lru == 256 && step == 256 && min32 > 0 && n64 >= (uint64_t)min64 &&
              d_next <= d_min + 1 && d_next >= d_min - 1,
          "a cycle through 4 layers in 3 frames: lru %llu, lfu-step %llu (256 each); tokens "
          "32-64: lfu-next %lld loads, MIN %lld", (unsigned long long)lru,
          (unsigned long long)step, (long long)d_next, (long long)d_min);
    printf("a cycle through the layers, 64 tokens: lru %llu loads, lfu-step %llu, lfu-next %llu, "
           "MIN %lld (tokens 32-64: lfu-next %lld, MIN %lld)\n", (unsigned long long)lru,
           (unsigned long long)step, (unsigned long long)n64, (long long)min64,
           (long long)d_next, (long long)d_min);
}

int main(void)
{
    test_hand();
    test_exhaustive();
    test_sim();
    test_layer_cycle();
    test_popularity();
    return check_summary("test-belady");
}
