/* test-pager-bytes: bytes read through the pager's region equal pread of the
 * file, for every test model, in uffd and explicit mode, with O_DIRECT and
 * buffered reads, at budgets from "everything" down to the minimum; resident
 * paged bytes never exceed the budget (own accounting and mincore); evicted
 * experts come back with the same bytes. */
#include "record/stats-json.h"
#include "tests/test-pager-util.h"

struct run {
    struct t_model *m;
    enum pager_mode mode;
    enum pager_direct direct;
    uint64_t budget;
    const char *label;
};

static void check_budget(struct pager *p, const struct run *r, const char *when)
{
    uint64_t own = pager_resident_bytes(p), seen = t_mincore_expert_bytes(r->m, pager_base(p));
    CHECK(own <= r->budget, "%s %s: accounted %llu > budget %llu", r->label, when,
          (unsigned long long)own, (unsigned long long)r->budget);
    CHECK(seen <= r->budget, "%s %s: mincore %llu > budget %llu", r->label, when,
          (unsigned long long)seen, (unsigned long long)r->budget);
}

/* Non-expert bytes (header and RAM tensors) were read up front. */
static void check_ram_bytes(struct pager *p, const struct run *r)
{
    const struct t_model *m = r->m;
    const uint8_t *base = pager_base(p);
    uint64_t d = gguf_data_offset(m->g);
    CHECK(memcmp(base, m->bytes, d) == 0, "%s: header bytes differ", r->label);
    for (int64_t i = 0; i < gguf_n_tensors(m->g); i++) {
        const struct gguf_tensor *t = gguf_tensor(m->g, i);
        if (!m->expert[i])
            CHECK(memcmp(base + t->offset, m->bytes + t->offset, t->nbytes) == 0,
                  "%s: RAM tensor %s differs", r->label, t->name);
    }
}

/* Brings the pager to rest before a budget check: a prefetch still loading
 * evicts one unit and installs another while mincore walks the region
 * tensor by tensor, and the walk can then count both (seen once in CI: 4
 * pages over the minimum budget; the pager itself uncharges only after its
 * pages are gone and charges before it installs). Queued prefetches are
 * dropped; acquiring the ones issued since the last check waits for any
 * still in flight. */
struct issued { int n; int l[8], e[8]; };

static void quiesce(struct pager *p, const struct run *r, struct issued *pf)
{
    pager_prefetch_cancel(p);
    for (int i = 0; i < pf->n; i++) {
        CHECK(pager_acquire(p, pf->l[i], pf->e[i]) == 0, "%s: acquire of a prefetched expert",
              r->label);
        pager_release(p, pf->l[i], pf->e[i]);
    }
    pf->n = 0;
}

/* Random acquires of (layer, expert), each checked byte for byte. */
static void acquire_loop(struct pager *p, const struct run *r, int iters)
{
    const struct moe_layout *ml = r->m->ml;
    struct issued pf_since = { 0 };
    for (int it = 0; it < iters; it++) {
        int l = (int)(t_rand() % (uint64_t)ml->n_layer);
        if (!ml->layers[l].is_moe)
            continue;
        int e = (int)(t_rand() % (uint64_t)ml->layers[l].n_expert);
        if (t_rand() % 4 == 0) {
            int32_t pf[2] = { (int32_t)(t_rand() % (uint64_t)ml->layers[l].n_expert), e };
            CHECK(pager_prefetch(p, l, pf, 2) == 0, "%s: prefetch failed", r->label);
            if (pf_since.n == 8)
                quiesce(p, r, &pf_since);
            pf_since.l[pf_since.n] = l;
            pf_since.e[pf_since.n++] = pf[0];
        }
        int rc = pager_acquire(p, l, e);
        CHECK(rc == 0, "%s: acquire(%d, %d) = %d", r->label, l, e, rc);
        if (rc == 0) {
            uint64_t bad = t_expert_diff(r->m, pager_base(p), l, e);
            CHECK(bad == 0, "%s: expert %d/%d has %llu wrong bytes", r->label, l, e,
                  (unsigned long long)bad);
            pager_release(p, l, e);
        }
        if (it % 8 == 0) {
            quiesce(p, r, &pf_since);
            check_budget(p, r, "after acquire");
        }
    }
}

/* A fault's stall is counted before its thread is woken. A thread that was
 * preempted between queuing its fault and going to sleep, or whose fault the
 * kernel retried, runs on as soon as its page is installed, before the load
 * is done and the stall counted; pager_settle waits for that. After it, no
 * stall may still come (the tracer's counts are compared with a snapshot
 * taken there). Returns 1 for a stall counted after pager_settle; *early
 * counts those counted only by pager_settle (printed, not checked: they
 * depend on the scheduler). */
static int stall_counted_late(struct pager *p, int *early)
{
    struct pager_totals now, settled, later;
    pager_stats_totals(p, &now);
    int rc = pager_settle(p, 2000);
    pager_stats_totals(p, &settled);
    usleep(200); /* the I/O thread's time to count a stall pager_settle missed */
    pager_stats_totals(p, &later);
    *early += settled.stall_count != now.stall_count;
    return rc != 0 || later.stall_count != settled.stall_count;
}

/* uffd mode: unannounced reads of random ranges anywhere in the file. */
static void touch_loop(struct pager *p, const struct run *r, int iters)
{
    uint8_t buf[3 * 4096 + 512];
    int late = 0, early = 0;
    for (int it = 0; it < iters; it++) {
        uint64_t len = 1 + t_rand() % sizeof(buf);
        uint64_t off = t_rand() % r->m->size;
        if (off + len > r->m->size)
            len = r->m->size - off;
        int sig = t_touch(pager_base(p), off, len, buf);
        late += stall_counted_late(p, &early);
        CHECK(sig == 0, "%s: signal %d touching %llu", r->label, sig, (unsigned long long)off);
        CHECK(sig != 0 || memcmp(buf, r->m->bytes + off, len) == 0,
              "%s: bytes at %llu+%llu differ from the file", r->label, (unsigned long long)off,
              (unsigned long long)len);
        if (it % 8 == 0)
            check_budget(p, r, "after touch");
    }
    CHECK(late == 0, "%s: %d touches' fault stalls were counted after pager_settle", r->label,
          late);
    if (early)
        printf("  %s: %d of %d touches returned before their stall was counted\n", r->label,
               early, iters);
}

static void check_stats(struct pager *p, const struct run *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f && eng_stats_json_write(f, p, NULL) == 0, "%s: stats json failed", r->label);
    pager_stats_print(p, f);
    fclose(f);
    CHECK(buf && strstr(buf, "\"units\":[") && strstr(buf, "stalls"), "%s: stats output wrong",
          r->label);
    free(buf);
}

static int run_one(const struct run *r)
{
    struct pager_config c;
    struct pager *p;
    struct fl_err err = { { 0 } };
    t_config(&c, r->m, r->mode, r->budget);
    c.direct = r->direct;
    int rc = t_pager_open(r->m->path, r->m->g, &c, &p, &err);
    if (rc < 0) {
        CHECK(0, "%s: pager_open: %s", r->label, err.msg);
        return rc;
    }
    check_ram_bytes(p, r);
    acquire_loop(p, r, 200);
    if (pager_uses_uffd(p))
        touch_loop(p, r, 300);
    acquire_loop(p, r, 100);
    struct pager_totals t;
    pager_stats_totals(p, &t);
    if (r->budget < pager_size(p) / 2)
        CHECK(t.evictions > 0, "%s: no eviction at a budget of %llu", r->label,
              (unsigned long long)r->budget);
    CHECK(pager_peak_resident_bytes(p) <= r->budget, "%s: peak over budget", r->label);
    CHECK(pager_error(p, NULL) == 0, "%s: pager failed", r->label);
    check_stats(p, r);
    printf("  %-58s loads %4llu evictions %4llu faults %4llu read %6.1f KiB\n", r->label,
           (unsigned long long)t.loads, (unsigned long long)t.evictions,
           (unsigned long long)t.faults, (double)t.bytes_read / 1024);
    pager_close(p);
    return 0;
}

/* uffd mode: a page of a resident expert that disappears (dropped behind
 * the pager's back) faults again and is copied back with the file's bytes. */
static void run_refill(struct t_model *m)
{
    struct pager_config c;
    struct pager *p;
    struct fl_err err = { { 0 } };
    t_config(&c, m, PAGER_MODE_UFFD, m->size);
    if (t_pager_open(m->path, m->g, &c, &p, &err) < 0) {
        CHECK(0, "refill: %s", err.msg);
        return;
    }
    const struct moe_layout *ml = m->ml;
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    int done = 0;
    for (int l = 0; l < ml->n_layer && done < 4; l++) {
        const struct moe_expert_tensor *et = &ml->layers[l].role[MOE_DOWN];
        for (int e = 0; ml->layers[l].is_moe && et->t && e < ml->layers[l].n_expert; e += 3) {
            CHECK(pager_acquire(p, l, e) == 0, "refill: acquire");
            pager_release(p, l, e);
            uint64_t page = (moe_expert_offset(et, e) + pg - 1) / pg * pg;
            if (page + pg > moe_expert_offset(et, e) + et->expert_bytes)
                continue;
            madvise((void *)(pager_base(p) + page), pg, MADV_DONTNEED);
            CHECK(!t_expert_pages_resident(m, pager_base(p), l, e), "refill: page still there");
            CHECK(t_expert_diff(m, pager_base(p), l, e) == 0, "refill: expert %d/%d wrong", l, e);
            done++;
        }
    }
    struct pager_totals t;
    pager_stats_totals(p, &t);
    CHECK(done > 0 && t.faults >= (uint64_t)done && pager_error(p, NULL) == 0,
          "refill: %d pages dropped, %llu faults", done, (unsigned long long)t.faults);
    printf("  uffd refill of %d dropped pages of resident experts: bytes right\n", done);
    pager_close(p);
}

static enum pager_tier all_on_disk(void *ctx, int64_t i)
{
    (void)ctx;
    (void)i;
    return PAGER_TIER_DISK;
}

/* uffd mode with every tensor paged: non-expert tensors fault in 2 MiB
 * chunks; random unannounced reads must still give the file's bytes. */
static void run_all_disk(struct t_model *m)
{
    struct pager_config c;
    struct pager *p;
    struct fl_err err = { { 0 } };
    t_config(&c, m, PAGER_MODE_UFFD, m->size);
    t_tier = all_on_disk;
    if (t_pager_open(m->path, m->g, &c, &p, &err) < 0) {
        t_tier = t_experts_on_disk;
        CHECK(0, "all on disk: %s", err.msg);
        return;
    }
    uint64_t min = pager_min_budget(p);
    pager_close(p);
    c.ram_budget = min;
    if (t_pager_open(m->path, m->g, &c, &p, &err) < 0) {
        CHECK(0, "all on disk at the minimum: %s", err.msg);
        return;
    }
    struct run r = { m, PAGER_MODE_UFFD, PAGER_DIRECT_AUTO, min, "uffd all tensors on disk" };
    touch_loop(p, &r, 400);
    acquire_loop(p, &r, 50);
    touch_loop(p, &r, 100);
    CHECK(pager_resident_bytes(p) <= min, "all on disk: over budget");
    printf("  %-58s budget %llu\n", r.label, (unsigned long long)min);
    pager_close(p);
    t_tier = t_experts_on_disk;
}

static bool uffd_available(struct t_model *m)
{
    struct pager_config c;
    struct pager *p;
    t_config(&c, m, PAGER_MODE_UFFD, m->size);
    if (t_pager_open(m->path, m->g, &c, &p, NULL) < 0)
        return false;
    pager_close(p);
    return true;
}

int main(void)
{
    t_chdir_source();
    t_install_sigbus();
    bool uffd = true;
    for (int i = 0; i < T_N_MODELS; i++) {
        struct t_model m;
        if (t_model_open(&m, t_models[i]) < 0) {
            fprintf(stderr, "FAIL: cannot load %s\n", t_models[i]);
            return 1;
        }
        if (i == 0 && !(uffd = uffd_available(&m)))
            printf("userfaultfd unavailable here: only explicit mode is tested\n");
        /* the minimum from a pager that pages every expert */
        struct pager_config c;
        struct pager *p;
        struct fl_err err = { { 0 } };
        t_config(&c, &m, PAGER_MODE_EXPLICIT, m.size);
        if (t_pager_open(m.path, m.g, &c, &p, &err) < 0) {
            fprintf(stderr, "FAIL: %s\n", err.msg);
            return 1;
        }
        uint64_t min = pager_min_budget(p);
        pager_close(p);
        CHECK(min > 0, "%s: no paged experts", m.path);
        uint64_t budgets[3] = { m.size, (min + m.size / 4) / 2 + min / 2, min };
        printf("%s: %llu bytes, minimum budget %llu\n", m.path, (unsigned long long)m.size,
               (unsigned long long)min);
        for (int mode = 0; mode < 2; mode++) {
            if (mode == 0 && !uffd)
                continue;
            for (int d = 0; d < 2; d++) {
                for (int b = 0; b < 3; b++) {
                    char label[160];
                    snprintf(label, sizeof(label), "%s %s budget=%llu",
                             mode == 0 ? "uffd" : "explicit", d == 0 ? "direct" : "buffered",
                             (unsigned long long)budgets[b]);
                    struct run r = { &m, mode == 0 ? PAGER_MODE_UFFD : PAGER_MODE_EXPLICIT,
                                     d == 0 ? PAGER_DIRECT_AUTO : PAGER_DIRECT_OFF, budgets[b],
                                     label };
                    run_one(&r);
                }
            }
        }
        if (uffd) {
            run_all_disk(&m);
            run_refill(&m);
        }
        t_model_close(&m);
    }
    if (failures) {
        fprintf(stderr, "test-pager-bytes: %d failures\n", failures);
        return 1;
    }
    printf("test-pager-bytes: all checks passed\n");
    return 0;
}
