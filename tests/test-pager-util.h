/* test-pager-util.h: what the pager suites share: the test models, the file
 * read into memory as the reference, expert slices from moe-layout, a
 * tier map putting every expert tensor on disk, and mincore accounting. */
#ifndef FL_TEST_PAGER_UTIL_H
#define FL_TEST_PAGER_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/moe-layout.h"
#include "pager/pager.h"
#include "plan/pager-layout.h"

#define CHECK_OUT stderr
#include "tests/check.h"

static const char *t_models[] __attribute__((unused)) = {
    "tests/data/qwen3moe-tiny-F16.gguf", "tests/data/qwen3moe-tiny-Q8_0.gguf",
    "tests/data/mixtral-tiny-Q4_K_M.gguf", "tests/data/deepseek2-tiny-F16.gguf",
    "tests/data/gpt-oss-tiny-MXFP4.gguf",
};
#define T_N_MODELS ((int)(sizeof(t_models) / sizeof(t_models[0])))

struct t_model {
    const char *path;
    struct gguf_file *g;
    struct moe_layout *ml;
    uint8_t *bytes;        /* the whole file */
    uint64_t size;
    bool *expert;          /* per tensor index: a routed-expert tensor */
};

static inline void t_chdir_source(void)
{
    const char *src = getenv("FL_SOURCE_DIR");
    if (src && chdir(src) != 0)
        perror(src);
}

static inline int t_model_open(struct t_model *m, const char *path)
{
    struct fl_err err = { { 0 } };
    memset(m, 0, sizeof(*m));
    m->path = path;
    if (gguf_open(path, &m->g, &err) < 0 || moe_layout_compute(m->g, &m->ml, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    m->size = gguf_file_size(m->g);
    m->bytes = malloc(m->size);
    int fd = open(path, O_RDONLY);
    if (!m->bytes || fd < 0 || pread(fd, m->bytes, m->size, 0) != (ssize_t)m->size)
        return -1;
    close(fd);
    int64_t nt = gguf_n_tensors(m->g);
    m->expert = calloc((size_t)nt, sizeof(bool));
    for (int l = 0; l < m->ml->n_layer; l++)
        for (int r = 0; r < MOE_N_ROLES; r++)
            if (m->ml->layers[l].role[r].t)
                m->expert[m->ml->layers[l].role[r].t - gguf_tensor(m->g, 0)] = true;
    return 0;
}

static inline void t_model_close(struct t_model *m)
{
    moe_layout_free(m->ml);
    gguf_close(m->g);
    free(m->bytes);
    free(m->expert);
}

static inline enum pager_tier t_experts_on_disk(void *ctx, int64_t i)
{
    const struct t_model *m = ctx;
    return m->expert[i] ? PAGER_TIER_DISK : PAGER_TIER_RAM;
}

/* The tiers t_pager_open lays the file out with (t_config sets them). */
static enum pager_tier (*t_tier)(void *ctx, int64_t i);
static void *t_tier_ctx;

static inline void t_config(struct pager_config *c, struct t_model *m, enum pager_mode mode,
                     uint64_t budget)
{
    pager_config_init(c);
    c->mode = mode;
    c->ram_budget = budget;
    c->quiet = true;
    t_tier = t_experts_on_disk;
    t_tier_ctx = m;
}

/* pager_open over the file's layout with the tiers t_config chose. */
static inline int t_pager_open(const char *path, const struct gguf_file *g,
                               const struct pager_config *c, struct pager **p,
                               struct fl_err *err)
{
    struct pager_layout l;
    struct fl_err e2;
    int rc = placement_pager_layout(g, t_tier, t_tier_ctx, &l, err ? err : &e2);
    if (rc)
        return rc;
    rc = pager_open(path, &l, c, p, err);
    placement_pager_layout_free(&l);
    return rc;
}

/* Compares every slice of (layer, expert) in the region with the file;
 * returns the number of differing bytes. */
static inline uint64_t t_expert_diff(const struct t_model *m, const uint8_t *base, int l, int e)
{
    uint64_t bad = 0;
    const struct moe_layer *ly = &m->ml->layers[l];
    for (int r = 0; r < MOE_N_ROLES; r++) {
        const struct moe_expert_tensor *et = &ly->role[r];
        if (!et->t)
            continue;
        uint64_t off = moe_expert_offset(et, e);
        if (memcmp(base + off, m->bytes + off, et->expert_bytes) != 0)
            for (uint64_t i = 0; i < et->expert_bytes; i++)
                bad += base[off + i] != m->bytes[off + i];
    }
    return bad;
}

/* Resident bytes over the pages lying wholly inside expert tensors. */
static inline uint64_t t_mincore_expert_bytes(const struct t_model *m, const uint8_t *base)
{
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), total = 0;
    for (int l = 0; l < m->ml->n_layer; l++) {
        for (int r = 0; r < MOE_N_ROLES; r++) {
            const struct gguf_tensor *t = m->ml->layers[l].role[r].t;
            if (!t)
                continue;
            uint64_t a = (t->offset + pg - 1) / pg * pg, b = (t->offset + t->nbytes) / pg * pg;
            if (b <= a)
                continue;
            size_t n = (b - a) / pg;
            unsigned char *v = malloc(n);
            if (v && mincore((void *)(base + a), b - a, v) == 0)
                for (size_t i = 0; i < n; i++)
                    total += (v[i] & 1) ? pg : 0;
            free(v);
        }
    }
    return total;
}

/* True when every whole page inside (layer, expert)'s slices is resident. */
static inline bool t_expert_pages_resident(const struct t_model *m, const uint8_t *base, int l,
                                           int e)
{
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    const struct moe_layer *ly = &m->ml->layers[l];
    for (int r = 0; r < MOE_N_ROLES; r++) {
        const struct moe_expert_tensor *et = &ly->role[r];
        if (!et->t)
            continue;
        uint64_t off = moe_expert_offset(et, e);
        uint64_t a = (off + pg - 1) / pg * pg, b = (off + et->expert_bytes) / pg * pg;
        for (uint64_t x = a; x < b; x += pg) {
            unsigned char v = 0;
            if (mincore((void *)(base + x), pg, &v) != 0 || !(v & 1))
                return false;
        }
    }
    return true;
}

static uint64_t t_rng = 0x9e3779b97f4a7c15ull;
static inline uint64_t t_rand(void)
{
    t_rng ^= t_rng << 13;
    t_rng ^= t_rng >> 7;
    t_rng ^= t_rng << 17;
    return t_rng;
}

/* A SIGBUS catcher for threads that touch pages which may be poisoned. */
static __thread sigjmp_buf *volatile t_bus_jmp;
static inline void t_on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    if (t_bus_jmp)
        siglongjmp(*t_bus_jmp, sig);
    _exit(99);
}

static inline void t_install_sigbus(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = t_on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGBUS, &sa, NULL);
}

/* Reads len bytes at base+off into dst; 0, or SIGBUS when a page is poisoned. */
static inline int t_touch(const uint8_t *base, uint64_t off, uint64_t len, uint8_t *dst)
{
    sigjmp_buf jb;
    volatile int sig = 0;
    if ((sig = sigsetjmp(jb, 1)) == 0) {
        t_bus_jmp = &jb;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        for (uint64_t i = 0; i < len; i++)
            dst[i] = ((const volatile uint8_t *)base)[off + i];
    }
    t_bus_jmp = NULL;
    return sig;
}

#endif
