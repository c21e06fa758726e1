/* test-policy: the cache policies (--cache) decide which expert makes room.
 * On a real model (explicit mode: reads happen only on acquire), under a
 * budget of exactly n_used experts:
 *   - lru evicts the least recently used expert;
 *   - lfu-decay keeps an expert used five times over three used once,
 *     though it is the least recently used;
 *   - pinned-hot reads the profile's hottest experts at open (within half
 *     the budget) and evicts the others first;
 *   - lfu-step counts the uses the engine gives (the tokens of a step that
 *     chose an expert), not one per acquire;
 *   - lfu-step keeps the often used over the once used (as lfu-decay), and
 *     unlike lfu-decay does not forget them faster when a batch's steps
 *     acquire many experts (its clock counts layer steps); lfu-next, on
 *     lfu-step's counts, too;
 * plus --cache parsing and the --stats-json profile reader on good and bad
 * files. */
#include "record/stats-json.h"
#include "pager/policy.h"
#include "tests/test-pager-util.h"

#define MODEL "tests/data/qwen3moe-tiny-F16.gguf"

static struct pager *open_with(struct t_model *m, enum pager_cache c, uint64_t budget,
                               const struct pager_hot_unit *hot, int n_hot)
{
    struct pager_config cfg;
    struct fl_err err = { { 0 } };
    struct pager *p = NULL;
    t_config(&cfg, m, PAGER_MODE_EXPLICIT, budget);
    cfg.cache = c;
    cfg.hot = hot;
    cfg.n_hot = n_hot;
    if (t_pager_open(m->path, m->g, &cfg, &p, &err) < 0)
        fprintf(stderr, "%s\n", err.msg);
    return p;
}

static void use(struct pager *p, int e)
{
    CHECK(pager_acquire(p, 0, e) == 0, "acquire %d failed", e);
    pager_release(p, 0, e);
}

static void test_lru_lfu(struct t_model *m, uint64_t budget)
{
    static const enum pager_cache pols[] = { PAGER_CACHE_LRU, PAGER_CACHE_LFU_DECAY,
                                             PAGER_CACHE_LFU_STEP, PAGER_CACHE_LFU_NEXT };
    static const char *names[] = { "lru", "lfu-decay", "lfu-step", "lfu-next" };
    for (int pol = 0; pol < 4; pol++) {
        struct pager *p = open_with(m, pols[pol], budget, NULL, 0);
        CHECK(p, "open failed");
        if (!p)
            continue;
        for (int i = 0; i < 5; i++)
            use(p, 0);
        use(p, 1);
        use(p, 2);
        use(p, 3);
        use(p, 4); /* the budget holds four: one of 0..3 goes */
        bool r0 = pager_resident(p, 0, 0), r1 = pager_resident(p, 0, 1);
        if (pol == 0)
            CHECK(!r0 && r1, "lru: expert 0 (least recent) should go, 1 stay: %d %d", r0, r1);
        else
            CHECK(r0 && !r1, "%s: expert 0 (5 uses) should stay, 1 go: %d %d", names[pol], r0,
                  r1);
        CHECK(pager_resident(p, 0, 4) && pager_resident_bytes(p) <= budget, "budget broken");
        printf("%s: expert 0 %s, expert 1 %s\n", names[pol],
               r0 ? "kept" : "evicted", r1 ? "kept" : "evicted");
        pager_close(p);
    }
}

static void use_at(struct pager *p, int layer, int e)
{
    CHECK(pager_acquire(p, layer, e) == 0, "acquire %d/%d failed", layer, e);
    pager_release(p, layer, e);
}

/* Sixteen experts' budget. Expert A = 0/0 used twice, then five wide
 * steps of layer 1 (the same 14 experts each: a batch's union), then B =
 * 0/1 once, and C = 0/2 needs room: A or B goes (layer 1's experts have
 * five uses). lfu-decay's clock counts the 70 acquires of those steps,
 * more than its half-life (8 tokens x 2 layers x top-4 = 64), so A's two
 * uses weigh 0.9 against B's 1: A goes. lfu-step counts 6 layer steps of
 * 4, a tenth of its half-life (32 x 2 x 4): A weighs 1.86, B goes. */
static void test_step_clock(struct t_model *m, uint64_t one)
{
    static const enum pager_cache pols[] = { PAGER_CACHE_LFU_DECAY, PAGER_CACHE_LFU_STEP,
                                             PAGER_CACHE_LFU_NEXT };
    static const char *names[] = { "lfu-decay", "lfu-step", "lfu-next" };
    for (int pol = 0; pol < 3; pol++) {
        struct pager *p = open_with(m, pols[pol], one * 16, NULL, 0);
        CHECK(p, "open failed");
        if (!p)
            continue;
        use_at(p, 0, 0);
        use_at(p, 0, 0);
        for (int step = 0; step < 5; step++)
            for (int e = 0; e < 14; e++)
                use_at(p, 1, e);
        use_at(p, 0, 1);
        use_at(p, 0, 2);
        const bool a = pager_resident(p, 0, 0), b = pager_resident(p, 0, 1);
        if (pol == 0)
            CHECK(!a && b, "lfu-decay: A (aged by a batch's acquires) should go, B stay: %d %d",
                  a, b);
        else
            CHECK(a && !b, "%s: A (two uses 6 steps ago) should stay, B go: %d %d", names[pol],
                  a, b);
        printf("%s after a batch's wide steps: A %s, B %s\n", names[pol],
               a ? "kept" : "evicted", b ? "kept" : "evicted");
        pager_close(p);
    }
}

/* Uses counted per token (pager_acquire_uses: the engine passes how many
 * of a step's tokens chose the expert). Budget of four: expert 0 acquired
 * once for a step where 6 tokens chose it, experts 1..3 twice for one
 * token each, then 4 needs room. Counted per token, 0 weighs 6 and 1 (2
 * uses, least recent) goes; counted per acquire (uses 1), 0 goes. */
static void test_token_uses(struct t_model *m, uint64_t budget)
{
    for (int per_token = 0; per_token < 2; per_token++) {
        struct pager *p = open_with(m, PAGER_CACHE_LFU_STEP, budget, NULL, 0);
        CHECK(p, "open failed");
        if (!p)
            continue;
        CHECK(pager_acquire_uses(p, 0, 0, per_token ? 6 : 1) == 0, "acquire 0 failed");
        pager_release(p, 0, 0);
        for (int e = 1; e <= 3; e++) {
            use(p, e);
            use(p, e);
        }
        use(p, 4);
        const bool r0 = pager_resident(p, 0, 0), r1 = pager_resident(p, 0, 1);
        if (per_token)
            CHECK(r0 && !r1, "lfu-step, 6 tokens' uses: expert 0 should stay, 1 go: %d %d", r0,
                  r1);
        else
            CHECK(!r0 && r1, "lfu-step, one use: expert 0 should go, 1 stay: %d %d", r0, r1);
        printf("lfu-step, expert 0 used by %d token(s) of one step: %s\n", per_token ? 6 : 1,
               r0 ? "kept" : "evicted");
        pager_close(p);
    }
}

static void test_pinned_hot(struct t_model *m, uint64_t budget)
{
    /* hot experts 7 and 9 (two of the four the budget holds = half) */
    const struct pager_hot_unit hot[] = { { 0, 3, 1 }, { 0, 7, 100 }, { 0, 9, 50 } };
    struct pager *p = open_with(m, PAGER_CACHE_PINNED_HOT, budget, hot, 3);
    CHECK(p, "open failed");
    if (!p)
        return;
    for (int i = 0; i < 2000 && !(pager_resident(p, 0, 7) && pager_resident(p, 0, 9)); i++)
        usleep(1000); /* the warm-up reads, queued at open */
    use(p, 7);
    use(p, 9);
    struct pager_totals t;
    pager_stats_totals(p, &t);
    CHECK(t.misses == 0, "pinned-hot: the hot experts were not read at open (%llu misses)",
          (unsigned long long)t.misses);
    for (int e = 0; e < 6; e++)
        use(p, e);
    bool kept = pager_resident(p, 0, 7) && pager_resident(p, 0, 9);
    CHECK(kept, "pinned-hot: a hot expert was evicted for a cold one");
    CHECK(!pager_resident(p, 0, 3) && pager_resident(p, 0, 5), "pinned-hot: LRU over the rest");
    printf("pinned-hot: hot experts 7, 9 %s after 6 cold ones\n", kept ? "kept" : "LOST");
    pager_close(p);
}

/* A profile set after open (what --calibrate does) replaces the hot set:
 * the old hot expert is evictable again, the new ones are read and kept. */
static void test_set_hot(struct t_model *m, uint64_t budget)
{
    const struct pager_hot_unit first[] = { { 0, 7, 100 } };
    const struct pager_hot_unit later[] = { { 0, 2, 5 }, { 0, 8, 9 }, { 0, 6, 1 },
                                            { 1, 99, 1000 } /* no such expert: ignored */ };
    struct pager *p = open_with(m, PAGER_CACHE_PINNED_HOT, budget, first, 1);
    CHECK(p, "open failed");
    if (!p)
        return;
    int n = pager_set_hot(p, later, 4);
    CHECK(n == 2, "set_hot: half of a 4-expert budget holds the 2 hottest, got %d", n);
    for (int i = 0; i < 2000 && !(pager_resident(p, 0, 8) && pager_resident(p, 0, 2)); i++)
        usleep(1000);
    static const int cold[] = { 7, 6, 0, 1, 3 }; /* room for two besides the hot ones */
    for (size_t i = 0; i < sizeof(cold) / sizeof(cold[0]); i++)
        use(p, cold[i]);
    bool kept = pager_resident(p, 0, 8) && pager_resident(p, 0, 2);
    bool gone = !pager_resident(p, 0, 7) && !pager_resident(p, 0, 6);
    CHECK(kept, "set_hot: a newly hot expert was evicted for a cold one");
    CHECK(gone, "set_hot: the old hot expert (7) or the third hottest (6) was kept");
    printf("set_hot: experts 8, 2 %s; 7 (hot before) and 6 (third) %s\n",
           kept ? "kept" : "LOST", gone ? "evicted" : "KEPT");
    pager_close(p);
    p = open_with(m, PAGER_CACHE_LRU, budget, NULL, 0);
    CHECK(p && pager_set_hot(p, later, 4) == -EINVAL, "set_hot accepted under lru");
    pager_close(p);
}

static void test_parse_profile(void)
{
    enum pager_cache c;
    const char *prof;
    struct fl_err err = { { 0 } };
    CHECK(pager_cache_parse("lfu-decay", &c, &prof, &err) == 0 && c == PAGER_CACHE_LFU_DECAY &&
          !prof, "lfu-decay");
    CHECK(pager_cache_parse("lfu-step", &c, &prof, &err) == 0 && c == PAGER_CACHE_LFU_STEP &&
          !prof, "lfu-step");
    CHECK(pager_cache_parse("lfu-next", &c, &prof, &err) == 0 && c == PAGER_CACHE_LFU_NEXT &&
          !prof, "lfu-next");
    CHECK(pager_cache_parse("pinned-hot:x.json", &c, &prof, &err) == 0 &&
          c == PAGER_CACHE_PINNED_HOT && prof && !strcmp(prof, "x.json"), "pinned-hot:FILE");
    CHECK(pager_cache_parse("pinned-hot", &c, &prof, &err) == 0 &&
          c == PAGER_CACHE_PINNED_HOT && !prof, "pinned-hot (profile from --calibrate)");
    static const char *bad[] = { "", "lfu", "pinned-hot:", "LRU", "pinned-hotx", "lfu-step:" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(pager_cache_parse(bad[i], &c, &prof, &err) == -EINVAL && strstr(err.msg, "--cache"),
              "'%s' accepted", bad[i]);
    char path[] = "/tmp/test-policy-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f, "cannot write a temporary file");
    if (!f)
        return;
    fprintf(f, "{\"mode\":\"uffd\",\"totals\":{\"faults\":9},\n \"units\":[\n"
            "  {\"layer\":1,\"expert\":5,\"offset\":0,\"bytes\":4096,\"loads\":2,\"faults\":3,"
            "\"cache_hits\":10,\"prefetch_hits\":4,\"misses\":2,\"evictions\":1,\"bytes_read\":8},\n"
            "  {\"layer\":0,\"expert\":2,\"offset\":0,\"bytes\":4096,\"loads\":1,\"faults\":0,"
            "\"cache_hits\":0,\"prefetch_hits\":0,\"misses\":1,\"evictions\":0,\"bytes_read\":8}\n]}\n");
    fclose(f);
    struct pager_hot_unit *h = NULL;
    int n = 0;
    CHECK(eng_hot_profile_load(path, &h, &n, &err) == 0 && n == 2, "profile: %s", err.msg);
    CHECK(n == 2 && h[0].layer == 1 && h[0].expert == 5 && h[0].count == 19 && h[1].count == 1,
          "profile: heat = hits + misses + faults");
    free(h);
    f = fopen(path, "w");
    fprintf(f, "{\"units\":[{\"layer\":1}]}");
    fclose(f);
    CHECK(eng_hot_profile_load(path, &h, &n, &err) == -EINVAL, "a unit without counts accepted");
    f = fopen(path, "w");
    fprintf(f, "not json");
    fclose(f);
    CHECK(eng_hot_profile_load(path, &h, &n, &err) == -EINVAL && strstr(err.msg, path),
          "garbage accepted");
    unlink(path);
    CHECK(eng_hot_profile_load(path, &h, &n, &err) == -ENOENT, "missing file accepted");
    printf("parse: --cache values and --stats-json profiles\n");
    fflush(stdout);
}

int main(void)
{
    t_chdir_source();
    struct t_model m;
    if (t_model_open(&m, MODEL) < 0)
        return 1;
    struct pager *p = open_with(&m, PAGER_CACHE_LRU, m.size * 4, NULL, 0);
    CHECK(p, "open failed");
    uint64_t budget = p ? pager_min_budget(p) : 0; /* n_used experts exactly */
    pager_close(p);
    CHECK(m.ml->layers[0].n_expert_used == 4 && m.ml->layers[0].n_expert >= 16,
          "the test assumes top-4 of >= 16 experts");
    if (budget) {
        test_lru_lfu(&m, budget);
        test_step_clock(&m, budget / 4);
        test_token_uses(&m, budget);
        test_pinned_hot(&m, budget);
        test_set_hot(&m, budget);
    }
    test_parse_profile();
    t_model_close(&m);
    if (failures)
        fprintf(stderr, "test-policy: %d failures\n", failures);
    else
        printf("test-policy: ok\n");
    return failures ? 1 : 0;
}
