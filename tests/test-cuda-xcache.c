/* test-cuda-xcache.c: the VRAM expert cache on a device, in copy and
 * unified mode: bytes arrive intact, evictions refill correctly, a kernel
 * queued before a slot is refilled still reads the old expert (event
 * ordering), statistics count the copies, the budget caps the slots;
 * hold/ready (a layer's copies queued before its kernels) give the same
 * products; and in copy mode from page-locked host memory (the DMA reads
 * the experts in place) all of it again.
 * Skips (77) without a CUDA device. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda-backend.h"
#include "backend/cuda/expert-cache.h"
#include "gguf/tensor-types.h"
#include "tests/check.h"

static struct fl_err err;

enum { N_IN = 1024, N_OUT = 512, N_EXP = 6, N_LAYER = 2 };
#define MAT_BYTES ((size_t)N_IN * N_OUT * sizeof(float))

/* Expert (l, e): two F32 matrices ("gate" and "up"), value-coded so a
 * product names the expert it came from. */
static float *host_expert[N_LAYER][N_EXP][2];

static void make_experts(void)
{
    for (int l = 0; l < N_LAYER; l++)
        for (int e = 0; e < N_EXP; e++)
            for (int m = 0; m < 2; m++) {
                float *w = host_expert[l][e][m] = aligned_alloc(4096, MAT_BYTES);
                for (size_t i = 0; i < (size_t)N_IN * N_OUT; i++)
                    w[i] = (float)((int)((i * 7 + (size_t)l * 13 + (size_t)e * 31 + (size_t)m) % 17) - 8) / 8.0f;
            }
}

static bool pinned_run; /* the host experts are page-locked: ranges say so */

static void ranges(int l, int e, struct fl_cuda_xrange r[2])
{
    for (int m = 0; m < 2; m++)
        r[m] = (struct fl_cuda_xrange){.host = host_expert[l][e][m], .bytes = MAT_BYTES,
                                       .offset = ((uint64_t)(l * N_EXP + e) * 2 + (uint64_t)m) * MAT_BYTES,
                                       .kind = 1 + m, .pinned = pinned_run};
}

/* y = gate . x computed on the host, for the check. */
static double expect(int l, int e, const float *x, int o)
{
    double s = 0;
    for (int i = 0; i < N_IN; i++)
        s += (double)host_expert[l][e][0][(size_t)o * N_IN + i] * x[i];
    return s;
}

static int check_products(struct fl_cuda *cu, const float *dy, const int (*seq)[2], int n,
                          const float *xin)
{
    float *y = malloc((size_t)n * N_OUT * sizeof(float));
    CHECK(fl_cuda_download(cu, y, dy, (size_t)n * N_OUT * sizeof(float), &err) == 0, "%s", err.msg);
    int bad = 0;
    for (int i = 0; i < n; i++)
        for (int oo = 0; oo < N_OUT; oo++)
            bad += fabs(y[i * N_OUT + oo] - expect(seq[i][0], seq[i][1], xin, oo)) > 1e-3;
    free(y);
    return bad;
}

/* A layer's way: hold three experts (copies queued, nothing ordered on
 * the compute stream), a fourth is refused while all slots are held, then
 * each one's ready + product, in another order than held. */
static void hold_then_run(struct fl_cuda *cu, struct fl_cuda_xcache *x, const float *dx,
                          float *dy, const float *xin)
{
    const int seq[3][2] = {{1, 0}, {0, 0}, {1, 1}};
    void *d[3] = {NULL};
    struct fl_cuda_xrange r[2];
    for (int i = 0; i < 3; i++) {
        ranges(seq[i][0], seq[i][1], r);
        CHECK(fl_cuda_xcache_hold(x, seq[i][0], seq[i][1], r, 2, &d[i], &err) == 0, "hold %d: %s",
              i, err.msg);
    }
    ranges(1, 2, r);
    void *busy = NULL;
    CHECK(fl_cuda_xcache_hold(x, 1, 2, r, 2, &busy, &err) == -EBUSY, "a 4th hold with 3 slots held");
    CHECK(fl_cuda_xcache_ready(x, 1, 2, &err) == -EINVAL, "ready of an expert not held refused");
    for (int i = 2; i >= 0; i--) {
        CHECK(fl_cuda_xcache_ready(x, seq[i][0], seq[i][1], &err) == 0, "ready: %s", err.msg);
        CHECK(fl_cuda_matvec(cu, d[i], FL_TYPE_F32, N_IN, N_OUT, dx, 1, dy + i * N_OUT, &err) == 0,
              "matvec: %s", err.msg);
        CHECK(fl_cuda_xcache_release(x, seq[i][0], seq[i][1], &err) == 0, "release: %s", err.msg);
    }
    CHECK(check_products(cu, dy, seq, 3, xin) == 0, "hold/ready: products read the wrong bytes");
}

static void run_mode(struct fl_cuda *cu, enum fl_cuda_xmode mode)
{
    printf("%s mode%s\n", mode == FL_CUDA_XCOPY ? "copy" : "unified",
           pinned_run ? ", page-locked host experts" : "");
    struct fl_cuda_xcache_opts o = {.mode = mode, .slot_bytes = 2 * MAT_BYTES,
                                    .budget = 3 * 2 * MAT_BYTES + 100, .reserve = 0,
                                    .n_layer = N_LAYER, .n_expert = N_EXP};
    struct fl_cuda_xcache *x;
    int rc = fl_cuda_xcache_create(cu, &o, &x, &err);
    if (rc == -ENOTSUP) {
        printf("  not supported here: %s\n", err.msg);
        return;
    }
    CHECK(rc == 0, "create: %s", err.msg);
    if (rc)
        return;
    CHECK(fl_cuda_xcache_slots(x) == 3, "budget gives 3 slots, got %d", fl_cuda_xcache_slots(x));

    float xin[N_IN], *dx, *dy;
    for (int i = 0; i < N_IN; i++)
        xin[i] = (float)((i % 5) - 2);
    CHECK(fl_cuda_malloc(cu, (void **)&dx, sizeof(xin), &err) == 0, "%s", err.msg);
    CHECK(fl_cuda_malloc(cu, (void **)&dy, 8 * N_OUT * sizeof(float), &err) == 0, "%s", err.msg);
    CHECK(fl_cuda_upload(cu, dx, xin, sizeof(xin), &err) == 0, "%s", err.msg);

    /* 8 acquires over 5 experts through 3 slots; each product is queued
     * before later acquires refill slots, so each must see its own expert. */
    const int seq[8][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 3}, {0, 0}, {1, 4}, {0, 1}, {0, 0}};
    for (int i = 0; i < 8; i++) {
        struct fl_cuda_xrange r[2];
        ranges(seq[i][0], seq[i][1], r);
        void *d = NULL;
        rc = fl_cuda_xcache_acquire(x, seq[i][0], seq[i][1], r, 2, &d, &err);
        CHECK(rc == 0, "acquire %d: %s", i, err.msg);
        if (rc)
            continue;
        CHECK(fl_cuda_matvec(cu, d, FL_TYPE_F32, N_IN, N_OUT, dx, 1, dy + i * N_OUT, &err) == 0,
              "matvec: %s", err.msg);
        CHECK(fl_cuda_xcache_release(x, seq[i][0], seq[i][1], &err) == 0, "release: %s", err.msg);
    }
    struct fl_cuda_xrange r[2];
    ranges(1, 5, r);
    CHECK(fl_cuda_xcache_prefetch(x, 1, 5, r, 2, &err) == 0, "prefetch: %s", err.msg);
    CHECK(fl_cuda_xcache_release(x, 1, 5, &err) == -EINVAL, "release without acquire refused");
    CHECK(fl_cuda_sync(cu, &err) == 0, "sync: %s", err.msg);

    int bad = check_products(cu, dy, seq, 8, xin);
    CHECK(bad == 0, "%d products read the wrong expert bytes", bad);

    /* the second matrix of a resident expert: bytes intact at slot + MAT_BYTES */
    void *d = NULL;
    ranges(0, 0, r);
    CHECK(fl_cuda_xcache_acquire(x, 0, 0, r, 2, &d, &err) == 0, "%s", err.msg);
    float *back = malloc(MAT_BYTES);
    CHECK(fl_cuda_download(cu, back, (char *)d + MAT_BYTES, MAT_BYTES, &err) == 0, "%s", err.msg);
    CHECK(memcmp(back, host_expert[0][0][1], MAT_BYTES) == 0, "second range corrupted");
    free(back);
    fl_cuda_xcache_release(x, 0, 0, &err);

    CHECK(fl_cuda_xcache_sync(x, &err) == 0, "xcache sync: %s", err.msg);
    struct fl_cuda_xcache_stats st = fl_cuda_xcache_stats(x);
    printf("  hits %llu misses %llu evictions %llu, copies %llu (%llu MiB), mean %.1f us, max %.1f us\n",
           (unsigned long long)st.lru.hits, (unsigned long long)st.lru.misses,
           (unsigned long long)st.lru.evictions, (unsigned long long)st.copies,
           (unsigned long long)(st.copy_bytes >> 20),
           st.copies ? st.copy_ns_total / 1e3 / (double)st.copies : 0.0, st.copy_ns_max / 1e3);
    /* the sequence under LRU with 3 slots: misses 0,1,2,3(ev 0),0(ev 1),4(ev 2),1(ev 3);
     * hit on the last 0; prefetch 1/5 misses (ev 4); the final 0 hits */
    CHECK(st.lru.misses == 8 && st.lru.hits == 2 && st.lru.evictions == 5,
          "lru counts %llu/%llu/%llu", (unsigned long long)st.lru.misses,
          (unsigned long long)st.lru.hits, (unsigned long long)st.lru.evictions);
    CHECK(st.copies == st.lru.misses && st.copy_bytes == st.copies * 2 * MAT_BYTES,
          "copy stats %llu", (unsigned long long)st.copies);

    hold_then_run(cu, x, dx, dy, xin);

    /* too big for a slot */
    struct fl_cuda_xrange big = {.host = host_expert[0][0][0], .bytes = 3 * MAT_BYTES};
    CHECK(fl_cuda_xcache_acquire(x, 0, 3, &big, 1, &d, &err) == -EINVAL, "oversized expert");
    fl_cuda_free(cu, dx);
    fl_cuda_free(cu, dy);
    fl_cuda_xcache_destroy(x);

    /* a budget above free memory is capped by it */
    struct fl_cuda_info info;
    CHECK(fl_cuda_device_info(fl_cuda_device(cu), &info, &err) == 0, "%s", err.msg);
    o.budget = (size_t)-1;
    o.reserve = info.free_bytes; /* nothing left once the reserve is kept */
    CHECK(fl_cuda_xcache_create(cu, &o, &x, &err) == -ENOMEM, "reserve above free accepted");
}

int main(void)
{
    if (fl_cuda_available() == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    struct fl_cuda *cu;
    if (fl_cuda_open(0, &cu, &err)) {
        printf("FAIL: %s\n", err.msg);
        return 1;
    }
    make_experts();
    run_mode(cu, FL_CUDA_XCOPY);
    run_mode(cu, FL_CUDA_XUNIFIED);
    int n_reg = 0;
    for (int l = 0; l < N_LAYER; l++)
        for (int e = 0; e < N_EXP; e++)
            for (int m = 0; m < 2; m++)
                n_reg += fl_cuda_host_register(host_expert[l][e][m], MAT_BYTES, &err) == 0;
    CHECK(n_reg == N_LAYER * N_EXP * 2, "page-locking the host experts: %s", err.msg);
    pinned_run = true;
    run_mode(cu, FL_CUDA_XCOPY);
    for (int l = 0; l < N_LAYER; l++)
        for (int e = 0; e < N_EXP; e++)
            for (int m = 0; m < 2; m++)
                fl_cuda_host_unregister(host_expert[l][e][m]);
    fl_cuda_close(cu);
    return check_summary("test-cuda-xcache");
}
