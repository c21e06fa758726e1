/* test-pager-errors: what goes wrong must become an error, never a hang and
 * never zeros read as data.
 *  - a budget below the minimum is refused at open
 *  - an injected EIO / permanent short read: acquire fails naming tensor and
 *    offset; a thread faulting on the expert gets SIGBUS (uffd mode)
 *  - transient short reads and EINTR are retried and give the right bytes
 *  - the file truncated mid-run: error, no hang
 *  - the fault handler stalled or killed: the watchdog turns it into SIGBUS
 *    for the faulting thread and an error for acquire */
#include <pthread.h>
#include <time.h>

#include "tests/test-pager-util.h"

struct inject {
    uint64_t lo, hi;   /* file bytes whose reads are hit */
    int mode;          /* 0 none, 1 EIO, 2 zero (EOF), 3 transient short+EINTR, 4 stall, 5 kill */
    int release;
    int seen;
};

static int hook_read(void *ctx, uint64_t off, uint64_t len, int res)
{
    struct inject *in = ctx;
    bool hit = off < in->hi && off + len > in->lo;
    if (in->mode == 1 && hit)
        return -EIO;
    if (in->mode == 2 && hit)
        return 0;
    if (in->mode == 3 && res > 0) {
        /* one completion in four is EINTR, one in four half the bytes */
        int k = __atomic_fetch_add(&in->seen, 1, __ATOMIC_RELAXED) % 4;
        if (k == 0)
            return -EINTR;
        if (k == 2 && res > 1)
            return res / 2 + 1;
    }
    return res;
}

static void hook_fault(void *ctx, uint64_t off)
{
    struct inject *in = ctx;
    (void)off;
    if (in->mode == 5)
        pthread_exit(NULL);
    for (int i = 0; in->mode == 4 && i < 2000; i++) {
        if (__atomic_load_n(&in->release, __ATOMIC_ACQUIRE))
            break;
        usleep(5000);
    }
}

struct toucher {
    const uint8_t *base;
    uint64_t off, len;
    const uint8_t *expect;
    int sig;
    bool zeros;
};

static void *touch_main(void *arg)
{
    struct toucher *t = arg;
    uint8_t *buf = malloc(t->len);
    t->sig = t_touch(t->base, t->off, t->len, buf);
    if (t->sig == 0) /* it read data: it must be the file's */
        t->zeros = memcmp(buf, t->expect, t->len) != 0;
    free(buf);
    return NULL;
}

/* Touches [off, off+len) on a thread; 0 = read the right bytes, SIGBUS =
 * refused; fails the test on zeros/wrong bytes or a hang (20 s). */
static int touch_guarded(const struct t_model *m, struct pager *p, uint64_t off, uint64_t len)
{
    struct toucher t = { pager_base(p), off, len, m->bytes + off, 0, false };
    pthread_t th;
    pthread_create(&th, NULL, touch_main, &t);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 20;
    if (pthread_timedjoin_np(th, NULL, &ts) != 0) {
        fprintf(stderr, "FAIL: a thread touching offset %llu hangs\n", (unsigned long long)off);
        _exit(1);
    }
    CHECK(!t.zeros, "touch at %llu returned bytes that are not the file's",
          (unsigned long long)off);
    return t.sig;
}

/* The first MoE layer, and the gate (or first present) slice of expert e. */
static const struct moe_expert_tensor *slice_of(const struct t_model *m, int *layer)
{
    for (int l = 0; l < m->ml->n_layer; l++)
        for (int r = 0; m->ml->layers[l].is_moe && r < MOE_N_ROLES; r++)
            if (m->ml->layers[l].role[r].t) {
                *layer = l;
                return &m->ml->layers[l].role[r];
            }
    return NULL;
}

static struct pager *open_inj(struct t_model *m, const char *path, enum pager_mode mode,
                              uint64_t budget, struct inject *in, unsigned wd_ms)
{
    struct pager_config c;
    struct pager *p = NULL;
    struct fl_err err = { { 0 } };
    t_config(&c, m, mode, budget);
    c.hooks.ctx = in;
    c.hooks.read_result = hook_read;
    c.hooks.on_fault = hook_fault;
    if (wd_ms)
        c.watchdog_ms = wd_ms;
    if (t_pager_open(path, m->g, &c, &p, &err) < 0)
        CHECK(0, "pager_open: %s", err.msg);
    return p;
}

static void test_min_budget(struct t_model *m, enum pager_mode mode)
{
    struct pager *p = open_inj(m, m->path, mode, 0, &(struct inject){ 0 }, 0);
    if (!p)
        return;
    uint64_t min = pager_min_budget(p);
    pager_close(p);
    struct pager_config c;
    struct fl_err err = { { 0 } };
    t_config(&c, m, mode, min - 1);
    int rc = t_pager_open(m->path, m->g, &c, &p, &err);
    CHECK(rc == -ENOMEM && strstr(err.msg, "below the minimum"),
          "budget %llu below the minimum %llu: rc %d, \"%s\"", (unsigned long long)(min - 1),
          (unsigned long long)min, rc, err.msg);
    t_config(&c, m, mode, min);
    rc = t_pager_open(m->path, m->g, &c, &p, &err);
    CHECK(rc == 0, "the minimum budget itself is refused: %s", err.msg);
    if (rc == 0)
        pager_close(p);
    printf("  min budget %llu: below refused (%s)\n", (unsigned long long)min, err.msg);
}

/* A read error on expert 1's slice: acquire fails and names it; in uffd
 * mode a thread faulting on that expert gets SIGBUS, not zeros. */
static void test_read_error(struct t_model *m, enum pager_mode mode, int kind)
{
    int layer = 0;
    const struct moe_expert_tensor *et = slice_of(m, &layer);
    uint64_t off = moe_expert_offset(et, 1);
    struct inject in = { off, off + et->expert_bytes, kind, 0, 0 };
    struct pager *p = open_inj(m, m->path, mode, 0, &in, 0);
    if (!p)
        return;
    if (pager_uses_uffd(p)) { /* the fault comes first */
        int sig = touch_guarded(m, p, off + et->expert_bytes / 2, 64);
        CHECK(sig == SIGBUS, "faulting on an unreadable expert gave signal %d", sig);
    }
    int rc = pager_acquire(p, layer, 1);
    struct fl_err err = { { 0 } };
    pager_error(p, &err);
    CHECK(rc < 0, "acquire of an unreadable expert succeeded");
    CHECK(strstr(err.msg, et->t->name) && strstr(err.msg, "offset"),
          "error does not name tensor %s and offset: \"%s\"", et->t->name, err.msg);
    CHECK(pager_acquire(p, layer, 0) < 0, "acquire after a failure succeeded");
    if (pager_uses_uffd(p)) {
        int sig = touch_guarded(m, p, moe_expert_offset(et, 0) + 8, 64);
        CHECK(sig == SIGBUS || sig == 0, "touch after failure: signal %d", sig);
    }
    printf("  %s %s: acquire %d, \"%s\"\n", pager_uses_uffd(p) ? "uffd" : "explicit",
           kind == 1 ? "EIO" : "EOF", rc, err.msg);
    pager_close(p);
}

/* Short reads and EINTR are retried: every expert still reads right. */
static void test_transient(struct t_model *m, enum pager_mode mode)
{
    struct inject in = { 0, 0, 3, 0, 0 };
    struct pager *p = open_inj(m, m->path, mode, 0, &in, 0);
    if (!p)
        return;
    for (int l = 0; l < m->ml->n_layer; l++) {
        for (int e = 0; m->ml->layers[l].is_moe && e < m->ml->layers[l].n_expert; e++) {
            int rc = pager_acquire(p, l, e);
            CHECK(rc == 0, "acquire %d/%d with transient errors: %d", l, e, rc);
            if (rc == 0) {
                CHECK(t_expert_diff(m, pager_base(p), l, e) == 0, "expert %d/%d wrong after "
                      "retried reads", l, e);
                pager_release(p, l, e);
            }
        }
    }
    struct pager_totals t;
    pager_stats_totals(p, &t);
    CHECK(t.reads_retried > 0 && in.seen > 0, "no read was retried");
    printf("  %s transient: %llu retried reads, all bytes right\n",
           pager_uses_uffd(p) ? "uffd" : "explicit", (unsigned long long)t.reads_retried);
    pager_close(p);
}

static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char buf[65536];
    ssize_t n;
    int rc = in >= 0 && out >= 0 ? 0 : -1;
    while (rc == 0 && (n = read(in, buf, sizeof(buf))) > 0)
        rc = write(out, buf, (size_t)n) == n ? 0 : -1;
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return rc;
}

/* The file shrinks under a running pager. */
static void test_truncated(struct t_model *m, enum pager_mode mode)
{
    char path[512];
    const char *dir = getenv("FL_BUILD_DIR");
    snprintf(path, sizeof(path), "%s/pager-trunc-%d.gguf", dir ? dir : "/tmp", (int)getpid());
    if (copy_file(m->path, path) < 0) {
        CHECK(0, "cannot copy %s to %s", m->path, path);
        return;
    }
    int layer = 0;
    const struct moe_expert_tensor *et = slice_of(m, &layer);
    struct pager *p = open_inj(m, path, mode, 0, &(struct inject){ 0 }, 0);
    if (!p) {
        unlink(path);
        return;
    }
    CHECK(pager_acquire(p, layer, 0) == 0, "acquire before truncation failed");
    pager_release(p, layer, 0);
    CHECK(truncate(path, (off_t)moe_expert_offset(et, 1)) == 0, "truncate: %s", strerror(errno));
    int last = m->ml->layers[layer].n_expert - 1;
    if (pager_uses_uffd(p)) {
        const struct moe_expert_tensor *down = &m->ml->layers[layer].role[MOE_DOWN];
        uint64_t off = moe_expert_offset(down->t ? down : et, last);
        int sig = touch_guarded(m, p, off, 16);
        CHECK(sig == SIGBUS, "touching a truncated expert gave signal %d", sig);
    }
    int rc = pager_acquire(p, layer, last);
    struct fl_err err = { { 0 } };
    pager_error(p, &err);
    CHECK(rc < 0 && strstr(err.msg, "offset"), "acquire after truncation: %d \"%s\"", rc, err.msg);
    printf("  %s truncated: acquire %d, \"%s\"\n", pager_uses_uffd(p) ? "uffd" : "explicit", rc,
           err.msg);
    pager_close(p);
    unlink(path);
}

/* uffd only: the handler stalls (kind 4) or dies (kind 5) on a fault. */
static void test_handler(struct t_model *m, int kind)
{
    int layer = 0;
    const struct moe_expert_tensor *et = slice_of(m, &layer);
    struct inject in = { 0, 0, kind, 0, 0 };
    struct pager *p = open_inj(m, m->path, PAGER_MODE_UFFD, 0, &in, 300);
    if (!p)
        return;
    int sig = touch_guarded(m, p, moe_expert_offset(et, 2) + 1, 32);
    CHECK(sig == SIGBUS, "fault with a %s handler: signal %d", kind == 4 ? "stalled" : "dead", sig);
    sig = touch_guarded(m, p, moe_expert_offset(et, 3) + 1, 32);
    CHECK(sig == SIGBUS, "second fault with a %s handler: signal %d",
          kind == 4 ? "stalled" : "dead", sig);
    struct fl_err err = { { 0 } };
    int rc = pager_acquire(p, layer, 4);
    pager_error(p, &err);
    CHECK(rc < 0 && strstr(err.msg, "handler"), "acquire after handler %s: %d \"%s\"",
          kind == 4 ? "stall" : "death", rc, err.msg);
    printf("  uffd handler %s: SIGBUS, acquire %d, \"%s\"\n", kind == 4 ? "stalled" : "killed",
           rc, err.msg);
    __atomic_store_n(&in.release, 1, __ATOMIC_RELEASE);
    pager_close(p);
}

int main(void)
{
    t_chdir_source();
    t_install_sigbus();
    struct t_model m;
    if (t_model_open(&m, "tests/data/qwen3moe-tiny-Q8_0.gguf") < 0)
        return 1;
    struct pager_config c;
    struct pager *p;
    t_config(&c, &m, PAGER_MODE_UFFD, 0);
    bool uffd = t_pager_open(m.path, m.g, &c, &p, NULL) == 0;
    if (uffd)
        pager_close(p);
    else
        printf("userfaultfd unavailable here: only explicit mode is tested\n");
    for (int mode = uffd ? 0 : 1; mode < 2; mode++) {
        enum pager_mode pm = mode == 0 ? PAGER_MODE_UFFD : PAGER_MODE_EXPLICIT;
        test_min_budget(&m, pm);
        test_read_error(&m, pm, 1);
        test_read_error(&m, pm, 2);
        test_transient(&m, pm);
        test_truncated(&m, pm);
    }
    if (uffd) {
        test_handler(&m, 4);
        test_handler(&m, 5);
    }
    t_model_close(&m);
    if (failures) {
        fprintf(stderr, "test-pager-errors: %d failures\n", failures);
        return 1;
    }
    printf("test-pager-errors: all checks passed\n");
    return 0;
}
