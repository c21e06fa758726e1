/* bench-cuda.c: a micro-benchmark of the CUDA backend (not a test; run by
 * scripts/gpu-check.sh). Prints three tables:
 *   decode   fl_cuda_matvec, one token, per weight type: time and weight GB/s
 *   prefill  fl_cuda_matmul_gemm, 512 tokens: time and TFLOP/s
 *   experts  a synthetic MoE decode (layers x experts of Q4_K gate/up/down,
 *            skewed router picks) through a VRAM expert cache given a
 *            quarter of the experts' bytes, in copy mode (staged, and from
 *            page-locked host memory) and unified mode:
 *            tokens/s, hit rate, mean/max copy latency.
 * Exits 77 without a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda-backend.h"
#include "backend/cuda/expert-cache.h"
#include "gguf/tensor-types.h"

static struct fl_err err;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int die(const char *what)
{
    fprintf(stderr, "bench-cuda: %s: %s\n", what, err.msg);
    return 1;
}

/* Device buffer of `bytes` holding a harmless pattern (weights' values do
 * not change the timing; a pattern keeps F16/F32 scales finite). */
static void *dev_pattern(struct fl_cuda *cu, size_t bytes)
{
    void *h = malloc(bytes), *d = NULL;
    if (!h)
        return NULL;
    memset(h, 0x11, bytes);
    if (fl_cuda_malloc(cu, &d, bytes, &err) || fl_cuda_upload(cu, d, h, bytes, &err))
        d = NULL;
    free(h);
    return d;
}

static int bench_matrices(struct fl_cuda *cu)
{
    const uint32_t types[] = {FL_TYPE_F16, FL_TYPE_Q8_0, FL_TYPE_Q6_K, FL_TYPE_Q5_K,
                              FL_TYPE_Q4_K, FL_TYPE_MXFP4};
    const int64_t n_in = 4096, n_out = 14336, n_pre = 512;
    float *x = dev_pattern(cu, sizeof(float) * (size_t)(n_in * n_pre));
    float *y = dev_pattern(cu, sizeof(float) * (size_t)(n_out * n_pre));
    if (!x || !y)
        return die("allocating activations");
    printf("\n%-6s | %-24s | %-26s\n", "type", "decode 4096x14336, 1 tok", "prefill 512 tok (GEMM)");
    printf("-------+--------------------------+---------------------------\n");
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        const size_t wb = fl_row_size(types[i], n_in) * (size_t)n_out;
        void *w = dev_pattern(cu, wb);
        if (!w)
            return die("allocating weights");
        double t0 = 0, dec = 0, pre = 0;
        for (int rep = 0; rep < 2; rep++) { /* the first round warms up */
            const int iters = 20;
            t0 = now_s();
            for (int k = 0; k < iters; k++)
                if (fl_cuda_matvec(cu, w, types[i], n_in, n_out, x, 1, y, &err))
                    return die("matvec");
            if (fl_cuda_sync(cu, &err))
                return die("sync");
            dec = (now_s() - t0) / iters;
            t0 = now_s();
            for (int k = 0; k < 3; k++)
                if (fl_cuda_matmul_gemm(cu, w, types[i], n_in, n_out, x, n_pre, y, &err))
                    return die("gemm");
            if (fl_cuda_sync(cu, &err))
                return die("sync");
            pre = (now_s() - t0) / 3;
        }
        printf("%-6s | %7.3f ms %7.1f GB/s   | %7.3f ms %6.1f TFLOP/s\n", fl_type_name(types[i]),
               dec * 1e3, (double)wb / dec / 1e9, pre * 1e3,
               2.0 * (double)(n_in * n_out * n_pre) / pre / 1e12);
        fl_cuda_free(cu, w);
    }
    fl_cuda_free(cu, x);
    fl_cuda_free(cu, y);
    return 0;
}

enum { LAYERS = 8, EXPERTS = 32, K = 8, TOKENS = 64, D = 2048, FF = 768 };

/* Skewed picks (a few hot experts, as real routers): k distinct experts. */
static void pick(uint64_t *rng, int *ids)
{
    for (int j = 0; j < K; j++) {
        int e, dup;
        do {
            *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
            const double u = (double)(*rng >> 11) / 9007199254740992.0;
            e = (int)(EXPERTS * u * u); /* density falls with the id */
            dup = 0;
            for (int i = 0; i < j; i++)
                dup |= ids[i] == e;
        } while (dup);
        ids[j] = e;
    }
}

static int bench_experts(struct fl_cuda *cu, enum fl_cuda_xmode mode, bool pinned,
                         unsigned char *host, size_t mat_bytes, size_t down_bytes)
{
    const size_t expert_bytes = 2 * mat_bytes + down_bytes;
    struct fl_cuda_xcache_opts o = {.mode = mode, .slot_bytes = expert_bytes,
                                    .budget = expert_bytes * LAYERS * EXPERTS / 4,
                                    .n_layer = LAYERS, .n_expert = EXPERTS};
    struct fl_cuda_xcache *xc;
    int rc = fl_cuda_xcache_create(cu, &o, &xc, &err);
    const char *name = mode == FL_CUDA_XUNIFIED ? "unified" : pinned ? "pinned" : "copy";
    if (rc) {
        printf("%-8s | not available: %s\n", name, err.msg);
        return 0;
    }
    float *x = dev_pattern(cu, sizeof(float) * D), *h = dev_pattern(cu, sizeof(float) * 2 * FF);
    float *y = dev_pattern(cu, sizeof(float) * D);
    if (!x || !h || !y)
        return die("allocating activations");
    uint64_t rng = 42;
    const double t0 = now_s();
    for (int t = 0; t < TOKENS; t++)
        for (int l = 0; l < LAYERS; l++) {
            int ids[K];
            pick(&rng, ids);
            for (int j = 0; j < K; j++) {
                const unsigned char *e = host + (size_t)(l * EXPERTS + ids[j]) * expert_bytes;
                const struct fl_cuda_xrange r[3] = {
                    {e, mat_bytes, (uint64_t)(e - host), 1, pinned},
                    {e + mat_bytes, mat_bytes, (uint64_t)(e - host) + mat_bytes, 2, pinned},
                    {e + 2 * mat_bytes, down_bytes, (uint64_t)(e - host) + 2 * mat_bytes, 3, pinned}};
                void *d;
                if (fl_cuda_xcache_acquire(xc, l, ids[j], r, 3, &d, &err))
                    return die("acquire");
                char *dc = d;
                if (fl_cuda_matvec(cu, dc, FL_TYPE_Q4_K, D, FF, x, 1, h, &err) ||
                    fl_cuda_matvec(cu, dc + mat_bytes, FL_TYPE_Q4_K, D, FF, x, 1, h + FF, &err) ||
                    fl_cuda_swiglu(cu, h, h + FF, FF, &err) ||
                    fl_cuda_matvec(cu, dc + 2 * mat_bytes, FL_TYPE_Q4_K, FF, D, h, 1, y, &err) ||
                    fl_cuda_xcache_release(xc, l, ids[j], &err))
                    return die("expert compute");
            }
        }
    if (fl_cuda_sync(cu, &err) || fl_cuda_xcache_sync(xc, &err))
        return die("sync");
    const double dt = now_s() - t0;
    const struct fl_cuda_xcache_stats st = fl_cuda_xcache_stats(xc);
    const double acq = (double)(st.lru.hits + st.lru.misses);
    printf("%-8s | %5d of %4d | %8.1f | %6.1f%% | %8.1f us | %8.1f us | %7.2f\n", name,
           fl_cuda_xcache_slots(xc), LAYERS * EXPERTS, TOKENS / dt,
           acq > 0 ? 100.0 * (double)st.lru.hits / acq : 0.0,
           st.copies ? (double)st.copy_ns_total / 1e3 / (double)st.copies : 0.0,
           (double)st.copy_ns_max / 1e3, (double)st.copy_bytes / 1e9 / dt);
    fl_cuda_xcache_destroy(xc);
    fl_cuda_free(cu, x);
    fl_cuda_free(cu, h);
    fl_cuda_free(cu, y);
    return 0;
}

int main(void)
{
    if (fl_cuda_available() == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    fl_types_init();
    struct fl_cuda *cu;
    struct fl_cuda_info info;
    if (fl_cuda_device_info(0, &info, &err) || fl_cuda_open(0, &cu, &err))
        return die("opening device 0");
    printf("device 0: %s (sm_%d%d, %d SMs), %zu MiB free of %zu\n", info.name, info.cc_major,
           info.cc_minor, info.n_sm, info.free_bytes >> 20, info.total_bytes >> 20);
    if (bench_matrices(cu))
        return 1;
    const size_t mat = fl_row_size(FL_TYPE_Q4_K, D) * FF, down = fl_row_size(FL_TYPE_Q4_K, FF) * D;
    const size_t total = (2 * mat + down) * LAYERS * EXPERTS;
    const size_t total_pages = (total + 4095) & ~(size_t)4095;
    unsigned char *host = aligned_alloc(4096, total_pages);
    if (!host)
        return fprintf(stderr, "bench-cuda: out of memory\n"), 1;
    memset(host, 0x11, total);
    printf("\nMoE decode: %d layers x %d experts (Q4_K %dx%d), top-%d, %d tokens, %.0f MiB of experts, "
           "cache budget 1/4\n", LAYERS, EXPERTS, D, FF, K, TOKENS, total / 1048576.0);
    printf("%-8s | slots        | tokens/s | hits    | copy mean   | copy max    | GB/s in\n", "mode");
    printf("---------+--------------+----------+---------+-------------+-------------+--------\n");
    /* copy: staged through pinned buffers; pinned: the same host bytes
     * page-locked in place (as RAM-tier experts are), read by the DMA */
    int rc = bench_experts(cu, FL_CUDA_XCOPY, false, host, mat, down);
    if (!rc && fl_cuda_host_register(host, total_pages, &err) == 0) {
        rc = bench_experts(cu, FL_CUDA_XCOPY, true, host, mat, down);
        fl_cuda_host_unregister(host);
    } else if (!rc) {
        printf("%-8s | not available: %s\n", "pinned", err.msg);
    }
    rc = rc || bench_experts(cu, FL_CUDA_XUNIFIED, false, host, mat, down);
    free(host);
    fl_cuda_close(cu);
    return rc;
}
