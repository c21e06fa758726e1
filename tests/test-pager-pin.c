/* test-pager-pin: a pinned expert is never evicted. Three threads acquire a
 * layer's n_expert_used experts at a time (after a prefetch), check their
 * bytes and that every page is resident, pause, check again and release,
 * under a budget that holds exactly their pins; in uffd mode a fourth thread
 * faults on random expert bytes without acquiring anything. The main thread
 * checks the budget with mincore throughout.
 * Also: the NUMA hooks (pager_config.place_memory / bind_thread) see every
 * staging buffer before it is pinned, outside the region, and run on the
 * pager's own threads; a node-0 binding set there holds (get_mempolicy).
 * And pager_set_held_elsewhere: no read-ahead of experts held in VRAM; and
 * pager_set_budget: a lowered budget evicts at once. */
#include <numaif.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "plan/numa.h"

#include "tests/test-pager-util.h"

#define WORKERS 3
#define ITERS 250

struct shared {
    struct t_model *m;
    struct pager *p;
    uint64_t budget;
    volatile int done;
    int errors;
};

struct worker {
    struct shared *s;
    uint64_t seed;
    pthread_t th;
};

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void one_round(struct worker *w, int layer)
{
    struct shared *s = w->s;
    const struct moe_layer *ly = &s->m->ml->layers[layer];
    int k = ly->n_expert_used, n = 0;
    int32_t ex[64];
    while (n < k) { /* k distinct experts */
        int32_t e = (int32_t)(rnd(&w->seed) % (uint64_t)ly->n_expert);
        bool dup = false;
        for (int i = 0; i < n; i++)
            dup |= ex[i] == e;
        if (!dup)
            ex[n++] = e;
    }
    if (pager_prefetch(s->p, layer, ex, n) < 0)
        __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < n; i++)
        if (pager_acquire(s->p, layer, ex[i]) < 0)
            __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            const uint8_t *base = pager_base(s->p);
            if (t_expert_diff(s->m, base, layer, ex[i]) != 0 ||
                !t_expert_pages_resident(s->m, base, layer, ex[i])) {
                fprintf(stderr, "FAIL: pinned expert %d/%d lost (pass %d)\n", layer, ex[i], pass);
                __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
            }
        }
        usleep(200);
    }
    for (int i = 0; i < n; i++)
        pager_release(s->p, layer, ex[i]);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct moe_layout *ml = w->s->m->ml;
    for (int it = 0; it < ITERS; it++) {
        int layer = (int)(rnd(&w->seed) % (uint64_t)ml->n_layer);
        if (ml->layers[layer].is_moe)
            one_round(w, layer);
    }
    return NULL;
}

/* Unannounced reads of expert bytes: faults that compete for the budget. */
static void *toucher_main(void *arg)
{
    struct worker *w = arg;
    struct shared *s = w->s;
    const struct moe_layout *ml = s->m->ml;
    uint8_t buf[256];
    while (!s->done) {
        int l = (int)(rnd(&w->seed) % (uint64_t)ml->n_layer);
        const struct moe_expert_tensor *et = &ml->layers[l].role[MOE_UP];
        if (!ml->layers[l].is_moe || !et->t)
            continue;
        uint64_t off = et->t->offset + rnd(&w->seed) % (et->t->nbytes - sizeof(buf));
        int sig = t_touch(pager_base(s->p), off, sizeof(buf), buf);
        if (sig != 0 || memcmp(buf, s->m->bytes + off, sizeof(buf)) != 0) {
            struct fl_err err = { { 0 } };
            pager_error(s->p, &err);
            fprintf(stderr, "FAIL: unannounced read at %llu: signal %d, wrong bytes (%s)\n",
                    (unsigned long long)off, sig, err.msg);
            __atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

static void run_mode(struct t_model *m, enum pager_mode mode)
{
    struct pager_config c;
    struct pager *p;
    struct fl_err err = { { 0 } };
    t_config(&c, m, mode, m->size);
    if (t_pager_open(m->path, m->g, &c, &p, &err) < 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    uint64_t budget = WORKERS * pager_min_budget(p);
    pager_close(p);
    t_config(&c, m, mode, budget);
    if (t_pager_open(m->path, m->g, &c, &p, &err) < 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    struct shared s = { m, p, budget, 0, 0 };
    struct worker w[WORKERS + 1];
    int nw = pager_uses_uffd(p) ? WORKERS + 1 : WORKERS;
    for (int i = 0; i < nw; i++) {
        w[i] = (struct worker){ &s, 0x1234567ull * (uint64_t)(i + 1), 0 };
        pthread_create(&w[i].th, NULL, i < WORKERS ? worker_main : toucher_main, &w[i]);
    }
    for (int i = 0; i < WORKERS; i++) {
        while (pthread_tryjoin_np(w[i].th, NULL) != 0) {
            uint64_t own = pager_resident_bytes(p), seen = t_mincore_expert_bytes(m, pager_base(p));
            CHECK(own <= budget && seen <= budget, "over budget: accounted %llu, mincore %llu, "
                  "budget %llu", (unsigned long long)own, (unsigned long long)seen,
                  (unsigned long long)budget);
            usleep(1000);
        }
    }
    s.done = 1;
    if (nw > WORKERS)
        pthread_join(w[WORKERS].th, NULL);
    struct pager_totals t;
    pager_stats_totals(p, &t);
    CHECK(s.errors == 0, "%d errors in the workers", s.errors);
    CHECK(t.evictions > 0, "no eviction: the test did not stress the budget");
    CHECK(pager_error(p, NULL) == 0, "pager failed");
    printf("  %s: budget %llu, %llu loads, %llu evictions, %llu faults, %llu prefetch hits, "
           "peak %llu\n", pager_uses_uffd(p) ? "uffd" : "explicit", (unsigned long long)budget,
           (unsigned long long)t.loads, (unsigned long long)t.evictions,
           (unsigned long long)t.faults, (unsigned long long)t.prefetch_hits,
           (unsigned long long)pager_peak_resident_bytes(p));
    pager_close(p);
}

struct place_log {
    int n_place, n_bind, bind_on_main, bind_failed;
    uintptr_t addr[64];
    size_t len[64];
    pid_t main_tid;
};

static void log_place(void *ctx, void *addr, size_t len)
{
    struct place_log *l = ctx;
    if (l->n_place < 64) {
        l->addr[l->n_place] = (uintptr_t)addr;
        l->len[l->n_place] = len;
    }
    l->n_place++;
    if (fl_numa_bind_range(addr, len, 0))
        l->bind_failed++;
}

static void log_bind(void *ctx)
{
    struct place_log *l = ctx;
    __atomic_add_fetch(&l->n_bind, 1, __ATOMIC_SEQ_CST);
    if ((pid_t)syscall(SYS_gettid) == l->main_tid)
        __atomic_add_fetch(&l->bind_on_main, 1, __ATOMIC_SEQ_CST);
}

static void test_place_hooks(struct t_model *m, enum pager_mode mode)
{
    struct place_log log = { .main_tid = (pid_t)syscall(SYS_gettid) };
    struct pager_config c;
    struct pager *p;
    t_config(&c, m, mode, 0);
    c.place_memory = log_place;
    c.bind_thread = log_bind;
    c.place_ctx = &log;
    if (t_pager_open(m->path, m->g, &c, &p, NULL)) {
        CHECK(0, "open with placement hooks failed");
        return;
    }
    CHECK(pager_acquire(p, 0, 1) == 0, "acquire through placed staging failed");
    CHECK(t_expert_diff(m, pager_base(p), 0, 1) == 0, "placed staging delivered wrong bytes");
    pager_release(p, 0, 1);
    const uintptr_t lo = (uintptr_t)pager_base(p), hi = lo + pager_size(p);
    int bad = 0, bound = 0;
    long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < log.n_place && i < 64; i++) {
        bad += log.addr[i] % (uintptr_t)page || !log.len[i] ||
               (log.addr[i] < hi && log.addr[i] + log.len[i] > lo);
        int policy = -1;
        unsigned long mask[16] = { 0 };
        if (!get_mempolicy(&policy, mask, sizeof(mask) * 8, (void *)log.addr[i], MPOL_F_ADDR))
            bound += policy == MPOL_BIND && (mask[0] & 1);
    }
    int want_threads = mode == PAGER_MODE_UFFD ? 2 : 1; /* I/O (+ fault handler) */
    pager_close(p);
    CHECK(log.n_place >= 2 && bad == 0 && log.bind_failed == 0,
          "%d staging buffers placed, %d misplaced or inside the region, %d bind errors",
          log.n_place, bad, log.bind_failed);
    CHECK(bound == (log.n_place < 64 ? log.n_place : 64),
          "%d of %d staging buffers kept their node-0 binding", bound, log.n_place);
    CHECK(log.n_bind == want_threads && log.bind_on_main == 0,
          "bind_thread ran %d times (want %d), %d on the opening thread", log.n_bind,
          want_threads, log.bind_on_main);
    printf("%s: %d staging buffers placed (node 0 binding held), %d pager threads bound\n",
           mode == PAGER_MODE_UFFD ? "uffd" : "explicit", log.n_place, log.n_bind);
}

/* Whether reading base[off] raises SIGSEGV: t_touch, with its catcher on
 * SIGSEGV as well for the one read. */
static bool read_faults(const uint8_t *base, uint64_t off)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = t_on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, &old);
    uint8_t byte;
    const int sig = t_touch(base, off, 1, &byte);
    sigaction(SIGSEGV, &old, NULL);
    return sig == SIGSEGV;
}

/* A pager over m with the test's default config; NULL (a failed check) if it cannot open. */
static struct pager *open_plain(struct t_model *m, enum pager_mode mode)
{
    struct pager_config c;
    struct pager *p;
    t_config(&c, m, mode, 0);
    if (t_pager_open(m->path, m->g, &c, &p, NULL)) {
        CHECK(0, "open failed");
        return NULL;
    }
    return p;
}

/* pager_drop_range (the engine repacked a RAM-tier tensor): the pages
 * wholly inside the tensor leave memory and fault loudly when read; the
 * bytes around them and the paging of experts are untouched; disk-tier or
 * out-of-file ranges are refused. */
static void test_drop_range(struct t_model *m, enum pager_mode mode)
{
    struct pager *p = open_plain(m, mode);
    if (!p)
        return;
    const long page = sysconf(_SC_PAGESIZE);
    const struct gguf_tensor *ram = NULL, *disk = NULL;
    for (int64_t i = 0; i < gguf_n_tensors(m->g); i++) {
        const struct gguf_tensor *t = gguf_tensor(m->g, i);
        if (m->expert[i] && !disk)
            disk = t;
        if (!m->expert[i] && t->nbytes >= 4 * (uint64_t)page && (!ram || t->nbytes > ram->nbytes))
            ram = t;
    }
    if (!ram || !disk) {
        CHECK(0, "no RAM tensor of 4 pages / no expert tensor in the model");
        pager_close(p);
        return;
    }
    const uint8_t *base = pager_base(p);
    const uint64_t a = (ram->offset + page - 1) / page * page;
    const uint64_t b = (ram->offset + ram->nbytes) / page * page;
    CHECK(pager_drop_range(p, disk->offset, disk->nbytes) == -EINVAL, "a disk-tier range dropped");
    CHECK(pager_drop_range(p, pager_size(p), 4096) == -EINVAL &&
              pager_drop_range(p, 0, UINT64_MAX) == -EINVAL, "a range outside the file dropped");
    CHECK(pager_drop_range(p, ram->offset, ram->nbytes) == 0, "dropping %s failed", ram->name);
    unsigned char vec[64];
    const uint64_t n = (b - a) / page < 64 ? (b - a) / page : 64;
    int resident = 0;
    if (mincore((void *)(base + a), n * page, vec) == 0)
        for (uint64_t i = 0; i < n; i++)
            resident += vec[i] & 1;
    else
        resident = -1;
    CHECK(resident == 0, "%d of %d dropped pages still resident", resident, (int)n);
    /* the pages around the dropped ones keep the file's bytes */
    const uint64_t lo = a >= (uint64_t)page ? a - page : 0;
    const uint64_t hi = b + page <= m->size ? b + page : m->size;
    CHECK(memcmp(base + lo, m->bytes + lo, a - lo) == 0 &&
              memcmp(base + b, m->bytes + b, hi - b) == 0,
          "bytes next to the dropped pages changed");
    CHECK(read_faults(base, a + 1), "reading a dropped page did not fault");
    CHECK(pager_acquire(p, 0, 1) == 0 && t_expert_diff(m, base, 0, 1) == 0,
          "paging an expert after the drop failed");
    pager_release(p, 0, 1);
    pager_close(p);
    printf("%s: dropped %llu pages of %s; disk-tier and outside ranges refused\n",
           mode == PAGER_MODE_UFFD ? "uffd" : "explicit", (unsigned long long)((b - a) / page),
           ram->name);
}

/* Prefetches load in the background: waits up to 5 s for (layer, expert). */
static bool wait_resident(struct pager *p, int layer, int expert)
{
    for (int i = 0; i < 5000 && !pager_resident(p, layer, expert); i++)
        usleep(1000);
    return pager_resident(p, layer, expert);
}

/* Odd experts of layer 0 are "in VRAM". */
static bool held_odd(void *arg, int layer, int expert)
{
    ++*(int *)arg;
    return layer == 0 && expert % 2;
}

/* pager_set_held_elsewhere: prefetches and guesses of held experts read
 * nothing, the others load as before, and an acquire of a held expert
 * still reads it (the filter is a hint, never a hole). */
static void test_held_elsewhere(struct t_model *m, enum pager_mode mode)
{
    struct pager *p = open_plain(m, mode);
    if (!p)
        return;
    int asked = 0;
    pager_set_held_elsewhere(p, held_odd, &asked);
    const int32_t ex[4] = { 0, 1, 2, 3 };
    CHECK(pager_prefetch(p, 0, ex, 2) == 0 && pager_prefetch_guess(p, 0, ex + 2, 2) == 0,
          "prefetch failed");
    CHECK(wait_resident(p, 0, 0) && wait_resident(p, 0, 2), "a prefetch was not read");
    struct pager_totals t;
    pager_stats_totals(p, &t);
    CHECK(asked >= 2 && t.prefetch_skips == 2 && t.prefetches == 2,
          "held experts: %llu skipped, %llu prefetched (want 2 and 2)",
          (unsigned long long)t.prefetch_skips, (unsigned long long)t.prefetches);
    CHECK(!pager_resident(p, 0, 1) && !pager_resident(p, 0, 3), "a held expert was read ahead");
    CHECK(pager_acquire(p, 0, 1) == 0 && t_expert_diff(m, pager_base(p), 0, 1) == 0,
          "acquiring a held expert did not read it");
    pager_release(p, 0, 1);
    pager_set_held_elsewhere(p, NULL, NULL);
    CHECK(pager_prefetch(p, 0, ex + 3, 1) == 0 && wait_resident(p, 0, 3),
          "without the filter the prefetch was not read");
    pager_close(p);
    printf("%s: prefetches of experts held elsewhere skipped, acquires still read\n",
           mode == PAGER_MODE_UFFD ? "uffd" : "explicit");
}

/* pager_set_budget: a lowered budget evicts what is over it at once (the
 * session lowers its auto budget for the KV cache and scratch); one below
 * the minimum is refused; the experts read afterwards are still right. */
static void test_lower_budget(struct t_model *m, enum pager_mode mode)
{
    struct pager *p = open_plain(m, mode);
    if (!p)
        return;
    for (int e = 0; e < 8; e++) {
        CHECK(pager_acquire(p, 0, e) == 0, "acquire %d", e);
        pager_release(p, 0, e);
    }
    const uint64_t before = pager_resident_bytes(p), min = pager_min_budget(p);
    CHECK(pager_set_budget(p, min - 1) == -EINVAL && pager_budget(p) > min,
          "a budget below the minimum was taken");
    CHECK(pager_set_budget(p, min) == 0 && pager_budget(p) == min, "lowering the budget failed");
    CHECK(before > min && pager_resident_bytes(p) <= min,
          "%llu bytes resident after lowering the budget to %llu (%llu before)",
          (unsigned long long)pager_resident_bytes(p), (unsigned long long)min,
          (unsigned long long)before);
    for (int e = 0; e < 8; e++) {
        CHECK(pager_acquire(p, 0, e) == 0 && t_expert_diff(m, pager_base(p), 0, e) == 0,
              "expert %d after lowering the budget", e);
        pager_release(p, 0, e);
        CHECK(pager_resident_bytes(p) <= min, "the lowered budget was exceeded");
    }
    pager_close(p);
    printf("%s: a lowered budget evicts at once (%llu -> %llu bytes resident)\n",
           mode == PAGER_MODE_UFFD ? "uffd" : "explicit", (unsigned long long)before,
           (unsigned long long)min);
}

int main(void)
{
    t_chdir_source();
    t_install_sigbus();
    struct t_model m;
    if (t_model_open(&m, "tests/data/qwen3moe-tiny-F16.gguf") < 0)
        return 1;
    struct pager_config c;
    struct pager *p;
    t_config(&c, &m, PAGER_MODE_UFFD, 0);
    if (t_pager_open(m.path, m.g, &c, &p, NULL) == 0) {
        pager_close(p);
        run_mode(&m, PAGER_MODE_UFFD);
        test_place_hooks(&m, PAGER_MODE_UFFD);
        test_drop_range(&m, PAGER_MODE_UFFD);
        test_held_elsewhere(&m, PAGER_MODE_UFFD);
        test_lower_budget(&m, PAGER_MODE_UFFD);
    } else {
        printf("userfaultfd unavailable here: only explicit mode is tested\n");
    }
    run_mode(&m, PAGER_MODE_EXPLICIT);
    test_place_hooks(&m, PAGER_MODE_EXPLICIT);
    test_drop_range(&m, PAGER_MODE_EXPLICIT);
    test_held_elsewhere(&m, PAGER_MODE_EXPLICIT);
    test_lower_budget(&m, PAGER_MODE_EXPLICIT);
    t_model_close(&m);
    if (failures) {
        fprintf(stderr, "test-pager-pin: %d failures\n", failures);
        return 1;
    }
    printf("test-pager-pin: all checks passed\n");
    return 0;
}
