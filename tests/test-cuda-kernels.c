/* test-cuda-kernels.c: every CUDA kernel against a CPU reference on random
 * data. Matrix products: against dequantize-then-dot in double (the
 * weights' to_float from gguf/tensor-types.h) and, loosely, against the
 * CPU engine's fl_matmul (backend/cpu/matmul.h, which quantizes activations);
 * dequantization: bit-exact against to_float rounded to F16. The other ops
 * against the plain double-precision formulas written out below (Gated
 * DeltaNet's in tests/delta-net-ref.h); SwiGLU-OAI against the CPU's
 * eng_swiglu_oai. On the emulated device
 * (FAULTLINE_CUDA_EMU) also its own checks: a host read of device memory
 * faults, bad device ranges fail the launch, memory is finite.
 * Skips (77) without a CUDA device. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef FL_CUDA_EMU
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "backend/cpu/cpu.h"
#include "model/activation.h"
#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda-backend.h"
#include "gguf/tensor-types.h"
#include "tests/check.h"
#include "tests/delta-net-ref.h"

static struct fl_cuda *cu;
static struct fl_err err;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) /* uniform in [-1, 1) */
{
    return (float)((check_xorshift64(&rng) >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static void *up(const void *src, size_t bytes)
{
    void *d = NULL;
    if (fl_cuda_malloc(cu, &d, bytes, &err) || fl_cuda_upload(cu, d, src, bytes, &err)) {
        printf("FAIL upload: %s\n", err.msg);
        exit(1);
    }
    return d;
}

static void down(void *dst, const void *d, size_t bytes)
{
    if (fl_cuda_download(cu, dst, d, bytes, &err)) {
        printf("FAIL download: %s\n", err.msg);
        exit(1);
    }
}

static void *dev_alloc(size_t bytes)
{
    void *d = NULL;
    if (fl_cuda_malloc(cu, &d, bytes, &err)) {
        printf("FAIL cudaMalloc: %s\n", err.msg);
        exit(1);
    }
    return d;
}

/* --- matrix products --------------------------------------------------------------- */

/* A group of n_tok products, each of half the rows (product j takes the
 * upper or lower half of W, token j's x, and writes its own output), must
 * equal the single matvec's rows bit for bit. */
static void test_group(uint32_t type, const void *dw, size_t row, int64_t n_in, int64_t n_out,
                       const float *dx, int64_t n_tok)
{
    const int64_t half = n_out / 2;
    const int n = n_tok < FL_CUDA_GROUP_MAX ? (int)n_tok : FL_CUDA_GROUP_MAX;
    float *dy = dev_alloc(sizeof(float) * (size_t)(n_out * n_tok));
    float *dg = dev_alloc(sizeof(float) * (size_t)(half * n));
    const void *w[FL_CUDA_GROUP_MAX];
    const float *x[FL_CUDA_GROUP_MAX];
    float *y[FL_CUDA_GROUP_MAX];
    for (int j = 0; j < n; j++) {
        w[j] = (const char *)dw + (size_t)(j % 2) * (size_t)half * row;
        x[j] = dx + j * n_in;
        y[j] = dg + (n - 1 - j) * half; /* outputs in reverse order */
    }
    CHECK(fl_cuda_matvec(cu, dw, type, n_in, n_out, dx, n_tok, dy, &err) == 0, "%s", err.msg);
    CHECK(fl_cuda_matvec_group(cu, w, type, n_in, half, x, y, n, &err) == 0, "group: %s", err.msg);
    float *one = malloc(sizeof(float) * (size_t)(n_out * n_tok));
    float *grp = malloc(sizeof(float) * (size_t)(half * n));
    down(one, dy, sizeof(float) * (size_t)(n_out * n_tok));
    down(grp, dg, sizeof(float) * (size_t)(half * n));
    int64_t bad = 0;
    for (int j = 0; j < n; j++)
        for (int64_t o = 0; o < half; o++)
            bad += memcmp(&grp[(n - 1 - j) * half + o], &one[j * n_out + (j % 2) * half + o],
                          sizeof(float)) != 0;
    CHECK(bad == 0, "%s group of %d: %lld values differ from matvec", fl_type_name(type), n,
          (long long)bad);
    CHECK(fl_cuda_matvec_group(cu, w, type, n_in, half, x, y, FL_CUDA_GROUP_MAX + 1, &err) == -EINVAL,
          "an oversized group refused");
    fl_cuda_free(cu, dy), fl_cuda_free(cu, dg);
    free(one), free(grp);
}

static void test_matrix(uint32_t type, int64_t n_in, int64_t n_out, int64_t n_tok)
{
    const struct fl_type_traits *tr = fl_type_traits(type);
    const size_t row = fl_row_size(type, n_in), wbytes = row * (size_t)n_out;
    float *wf = malloc(sizeof(float) * (size_t)(n_in * n_out));
    float *deq = malloc(sizeof(float) * (size_t)(n_in * n_out));
    float *x = malloc(sizeof(float) * (size_t)(n_in * n_tok));
    float *y = malloc(sizeof(float) * (size_t)(n_out * n_tok));
    float *ycpu = malloc(sizeof(float) * (size_t)(n_out * n_tok));
    uint16_t *h16 = malloc(2 * (size_t)(n_in * n_out));
    unsigned char *w = malloc(wbytes);
    for (int64_t i = 0; i < n_in * n_out; i++)
        wf[i] = frand() * (1.0f + (float)(i % 7)); /* uneven magnitudes exercise the scales */
    for (int64_t i = 0; i < n_in * n_tok; i++)
        x[i] = frand();
    for (int64_t o = 0; o < n_out; o++) {
        tr->from_float(wf + o * n_in, w + (size_t)o * row, n_in);
        tr->to_float(w + (size_t)o * row, deq + o * n_in, n_in);
    }
    void *dw = up(w, wbytes), *dx = up(x, sizeof(float) * (size_t)(n_in * n_tok));
    float *dy = dev_alloc(sizeof(float) * (size_t)(n_out * n_tok));
    uint16_t *d16 = dev_alloc(2 * (size_t)(n_in * n_out));

    /* dequantization: bit-exact */
    CHECK(fl_cuda_dequant_f16(cu, dw, type, n_in, n_out, d16, &err) == 0, "dequant: %s", err.msg);
    down(h16, d16, 2 * (size_t)(n_in * n_out));
    int64_t bad = 0;
    for (int64_t i = 0; i < n_in * n_out; i++)
        bad += h16[i] != fl_f32_to_f16(deq[i]);
    CHECK(bad == 0, "%s dequant_f16: %lld of %lld values differ", tr->name, (long long)bad,
          (long long)(n_in * n_out));

    /* CPU engine result, for a loose cross-check */
    void *scratch = malloc(fl_matmul_scratch_size(type, n_in, n_tok) + 64);
    CHECK(fl_matmul(NULL, w, type, n_in, n_out, x, n_tok, ycpu, scratch) == 0, "fl_matmul");
    free(scratch);

    for (int pass = 0; pass < 2; pass++) {
        const char *name = pass ? "gemm" : "matvec";
        int rc = pass ? fl_cuda_matmul_gemm(cu, dw, type, n_in, n_out, dx, n_tok, dy, &err)
                      : fl_cuda_matvec(cu, dw, type, n_in, n_out, dx, n_tok, dy, &err);
        CHECK(rc == 0, "%s %s: %s", tr->name, name, err.msg);
        down(y, dy, sizeof(float) * (size_t)(n_out * n_tok));
        /* matvec: float accumulation of exact values; gemm: F16 x and weights */
        const double tol = pass ? 4e-3 : 1e-5;
        double worst = 0.0, worst_cpu = 0.0;
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t o = 0; o < n_out; o++) {
                double ref = 0.0, mag = 1e-6;
                for (int64_t i = 0; i < n_in; i++) {
                    ref += (double)deq[o * n_in + i] * x[t * n_in + i];
                    mag += fabs((double)deq[o * n_in + i] * x[t * n_in + i]);
                }
                const double e = fabs(y[t * n_out + o] - ref) / mag;
                const double ec = fabs(y[t * n_out + o] - ycpu[t * n_out + o]) / mag;
                worst = e > worst ? e : worst;
                worst_cpu = ec > worst_cpu ? ec : worst_cpu;
            }
        printf("  %-5s %-6s %4lldx%-4lld x%-3lld  err/|w||x| %.2e (tol %.0e), vs fl_matmul %.2e\n",
               tr->name, name, (long long)n_in, (long long)n_out, (long long)n_tok, worst, tol,
               worst_cpu);
        CHECK(worst <= tol, "%s %s: relative error %.3e > %.0e", tr->name, name, worst, tol);
        CHECK(worst_cpu <= 3e-2, "%s %s: %.3e from the CPU engine", tr->name, name, worst_cpu);
    }
    test_group(type, dw, row, n_in, n_out, dx, n_tok);
    CHECK(fl_cuda_matvec(cu, dw, type, n_in + 1, n_out, dx, n_tok, dy, &err) == -EINVAL,
          "bad shape refused");
    fl_cuda_free(cu, dw), fl_cuda_free(cu, dx), fl_cuda_free(cu, dy), fl_cuda_free(cu, d16);
    free(wf), free(deq), free(x), free(y), free(ycpu), free(h16), free(w);
}

static void test_matrices(void)
{
    printf("matrix products and dequantization\n");
    const uint32_t types[] = {FL_TYPE_F32, FL_TYPE_F16, FL_TYPE_Q8_0, FL_TYPE_MXFP4,
                              FL_TYPE_Q4_K, FL_TYPE_Q5_K, FL_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        test_matrix(types[i], 256, 33, 1);
        test_matrix(types[i], 1024, 130, 5);
        test_matrix(types[i], 512, 64, 40);
    }
    CHECK(!fl_cuda_type_supported(FL_TYPE_Q2_K), "Q2_K claims a kernel");
}

/* --- element-wise ------------------------------------------------------------------- */

static void test_rows(void)
{
    printf("rmsnorm, swiglu, f32_to_f16, rope\n");
    enum { N = 200, ROWS = 3, STRIDE = 256 };
    float x[ROWS * STRIDE], w[N], y[ROWS * STRIDE], u[ROWS * STRIDE];
    for (int i = 0; i < ROWS * STRIDE; i++)
        x[i] = frand() * 3.0f, u[i] = frand();
    for (int i = 0; i < N; i++)
        w[i] = frand();
    float *dx = up(x, sizeof(x)), *dw = up(w, sizeof(w)), *du = up(u, sizeof(u));
    float *dy = up(x, sizeof(x));
    CHECK(fl_cuda_rmsnorm(cu, dy, dx, dw, N, ROWS, STRIDE, 1e-5f, &err) == 0, "%s", err.msg);
    down(y, dy, sizeof(y));
    double worst = 0;
    for (int r = 0; r < ROWS; r++) {
        double ss = 0;
        for (int i = 0; i < N; i++)
            ss += (double)x[r * STRIDE + i] * x[r * STRIDE + i];
        const double sc = 1.0 / sqrt(ss / N + 1e-5);
        for (int i = 0; i < N; i++)
            worst = fmax(worst, fabs(y[r * STRIDE + i] - x[r * STRIDE + i] * sc * w[i]));
        CHECK(y[r * STRIDE + N] == x[r * STRIDE + N], "rmsnorm wrote past n");
    }
    CHECK(worst < 1e-5, "rmsnorm error %.3e", worst);

    CHECK(fl_cuda_swiglu(cu, dx, du, ROWS * STRIDE, &err) == 0, "%s", err.msg);
    down(y, dx, sizeof(y));
    worst = 0;
    for (int i = 0; i < ROWS * STRIDE; i++)
        worst = fmax(worst, fabs(y[i] - x[i] / (1.0 + exp(-(double)x[i])) * u[i]));
    CHECK(worst < 1e-5, "swiglu error %.3e", worst);

    uint16_t h[ROWS * STRIDE];
    uint16_t *dh = dev_alloc(sizeof(h));
    CHECK(fl_cuda_f32_to_f16(cu, du, dh, ROWS * STRIDE, &err) == 0, "%s", err.msg);
    down(h, dh, sizeof(h));
    int bad = 0;
    for (int i = 0; i < ROWS * STRIDE; i++)
        bad += h[i] != fl_f32_to_f16(u[i]);
    CHECK(bad == 0, "f32_to_f16: %d values differ", bad);

    /* rope: 3 tokens, 4 heads of 64, 32 rotated dims, both modes */
    enum { T = 3, H = 4, HD = 64, NR = 32, RS = H * HD + 8 };
    float q[T * RS], cs[T * NR], out[T * RS];
    for (int i = 0; i < T * RS; i++)
        q[i] = frand();
    for (int t = 0; t < T; t++)
        for (int p = 0; p < NR / 2; p++) {
            const double th = (t + 7) * pow(10000.0, -2.0 * p / NR);
            cs[t * NR + 2 * p] = (float)cos(th), cs[t * NR + 2 * p + 1] = (float)sin(th);
        }
    float *dcs = up(cs, sizeof(cs));
    for (int neox = 0; neox < 2; neox++) {
        float *dq = up(q, sizeof(q));
        CHECK(fl_cuda_rope(cu, dq, T, RS, H, HD, NR, neox ? FL_CUDA_ROPE_NEOX : FL_CUDA_ROPE_NORM,
                           dcs, &err) == 0, "%s", err.msg);
        down(out, dq, sizeof(out));
        worst = 0;
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < H; hh++) {
                const float *v = q + t * RS + hh * HD;
                const float *o = out + t * RS + hh * HD;
                float ref[HD];
                memcpy(ref, v, sizeof(ref));
                for (int p = 0; p < NR / 2; p++) {
                    const int a = neox ? p : 2 * p, b = neox ? p + NR / 2 : 2 * p + 1;
                    const double c = cs[t * NR + 2 * p], s = cs[t * NR + 2 * p + 1];
                    ref[a] = (float)(v[a] * c - v[b] * s);
                    ref[b] = (float)(v[a] * s + v[b] * c);
                }
                for (int i = 0; i < HD; i++)
                    worst = fmax(worst, fabs(o[i] - ref[i]));
            }
        CHECK(worst < 1e-6, "rope %s error %.3e", neox ? "neox" : "norm", worst);
        fl_cuda_free(cu, dq);
    }
    fl_cuda_free(cu, dx), fl_cuda_free(cu, dw), fl_cuda_free(cu, du), fl_cuda_free(cu, dy);
    fl_cuda_free(cu, dh), fl_cuda_free(cu, dcs);
}

/* --- gpt-oss and MLA row ops --------------------------------------------------------- */

/* SwiGLU-OAI against the CPU's (expf may differ by an ulp on a GPU), with
 * gates and ups beyond the limit on both sides and NaNs that must pass. */
static void test_swiglu_oai(void)
{
    printf("swiglu_oai, add_rows, copy_2d\n");
    enum { N = 700 };
    float g[N], u[N], ref[N], y[N];
    for (int i = 0; i < N; i++)
        g[i] = frand() * 12.0f, u[i] = frand() * 10.0f;
    g[3] = NAN, u[5] = NAN, g[7] = INFINITY, u[9] = -INFINITY;
    eng_swiglu_oai(g, u, ref, N, ENG_OAI_ALPHA, ENG_OAI_LIMIT);
    float *dg = up(g, sizeof(g)), *du = up(u, sizeof(u));
    CHECK(fl_cuda_swiglu_oai(cu, dg, du, N, ENG_OAI_ALPHA, ENG_OAI_LIMIT, &err) == 0, "%s",
          err.msg);
    down(y, dg, sizeof(y));
    double worst = 0;
    int nan_bad = 0;
    for (int i = 0; i < N; i++) {
        nan_bad += isnan(y[i]) != isnan(ref[i]);
        if (!isnan(ref[i]))
            worst = fmax(worst, fabs((double)y[i] - ref[i]) / (1.0 + fabs(ref[i])));
    }
    CHECK(nan_bad == 0, "swiglu_oai: %d NaNs differ from the CPU's", nan_bad);
    CHECK(worst < 1e-5, "swiglu_oai error %.3e", worst);
    CHECK(fl_cuda_swiglu_oai(cu, dg, du, 0, ENG_OAI_ALPHA, ENG_OAI_LIMIT, &err) == 0,
          "an empty swiglu_oai is a no-op");
    CHECK(fl_cuda_swiglu_oai(cu, dg, du, -1, ENG_OAI_ALPHA, ENG_OAI_LIMIT, &err) == -EINVAL,
          "a negative swiglu_oai length refused");
    fl_cuda_free(cu, dg), fl_cuda_free(cu, du);
}

/* A bias on n of each row's `stride` values: exact float adds, the rest
 * of each row untouched. */
static void test_add_rows(void)
{
    enum { N = 90, ROWS = 5, STRIDE = 128 };
    float y[ROWS * STRIDE], b[N], out[ROWS * STRIDE];
    for (int i = 0; i < ROWS * STRIDE; i++)
        y[i] = frand();
    for (int i = 0; i < N; i++)
        b[i] = frand();
    float *dy = up(y, sizeof(y)), *db = up(b, sizeof(b));
    CHECK(fl_cuda_add_rows(cu, dy, db, N, ROWS, STRIDE, &err) == 0, "%s", err.msg);
    down(out, dy, sizeof(out));
    int bad = 0;
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < STRIDE; i++) {
            const float want = i < N ? y[r * STRIDE + i] + b[i] : y[r * STRIDE + i];
            bad += memcmp(&out[r * STRIDE + i], &want, sizeof(float)) != 0;
        }
    CHECK(bad == 0, "add_rows: %d values wrong", bad);
    CHECK(fl_cuda_add_rows(cu, dy, db, N, 0, STRIDE, &err) == 0, "no rows is a no-op");
    CHECK(fl_cuda_add_rows(cu, dy, db, N, ROWS, N - 1, &err) == -EINVAL, "stride < n refused");
    fl_cuda_free(cu, dy), fl_cuda_free(cu, db);
}

/* MLA's per-head slices: `width` floats of each row, from one stride to
 * another; the destination's gaps keep what they held. */
static void test_copy_2d(void)
{
    enum { ROWS = 4, SRC = 200, DST = 96, W = 70, OFF = 30 };
    float src[ROWS * SRC], dst[ROWS * DST], out[ROWS * DST];
    for (int i = 0; i < ROWS * SRC; i++)
        src[i] = frand();
    for (int i = 0; i < ROWS * DST; i++)
        dst[i] = frand();
    float *ds = up(src, sizeof(src)), *dd = up(dst, sizeof(dst));
    CHECK(fl_cuda_copy_2d(cu, dd, DST, ds + OFF, SRC, W, ROWS, &err) == 0, "%s", err.msg);
    down(out, dd, sizeof(out));
    int bad = 0;
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < DST; i++)
            bad += out[r * DST + i] != (i < W ? src[r * SRC + OFF + i] : dst[r * DST + i]);
    CHECK(bad == 0, "copy_2d: %d values wrong", bad);
    CHECK(fl_cuda_copy_2d(cu, dd, DST, ds, SRC, 0, ROWS, &err) == 0, "an empty copy is a no-op");
    CHECK(fl_cuda_copy_2d(cu, dd, W - 1, ds, SRC, W, ROWS, &err) == -EINVAL,
          "a width above the destination's stride refused");
    CHECK(fl_cuda_copy_2d(cu, dd, DST, ds, W - 1, W, ROWS, &err) == -EINVAL,
          "a width above the source's stride refused");
    fl_cuda_free(cu, ds), fl_cuda_free(cu, dd);
}

/* --- routing -------------------------------------------------------------------------- */

static void route_ref(const float *l, int n, const struct fl_cuda_route *r, const float *bias,
                      int *ids, double *w)
{
    double p[4096], mx = -INFINITY, sum = 0;
    for (int e = 0; e < n; e++)
        mx = fmax(mx, l[e]);
    for (int e = 0; e < n; e++) {
        p[e] = r->gating == FL_CUDA_GATING_SOFTMAX ? exp(l[e] - mx)
             : r->gating == FL_CUDA_GATING_SIGMOID ? 1.0 / (1.0 + exp(-(double)l[e])) : l[e];
        sum += p[e];
    }
    if (r->gating == FL_CUDA_GATING_SOFTMAX)
        for (int e = 0; e < n; e++)
            p[e] /= sum;
    for (int j = 0; j < r->k; j++) { /* selection sort: highest score, lower id on ties */
        int best = -1;
        for (int e = 0; e < n; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++)
                taken |= ids[i] == e;
            const double s = p[e] + (bias ? bias[e] : 0), sb = best < 0 ? 0 : p[best] + (bias ? bias[best] : 0);
            if (!taken && (best < 0 || s > sb))
                best = e;
        }
        ids[j] = best;
        w[j] = p[best];
    }
    if (r->gating == FL_CUDA_GATING_SOFTMAX_WEIGHT) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < r->k; j++)
            m = fmax(m, w[j]);
        for (int j = 0; j < r->k; j++)
            s += (w[j] = exp(w[j] - m));
        for (int j = 0; j < r->k; j++)
            w[j] /= s;
    }
    double s = 0;
    for (int j = 0; j < r->k; j++)
        s += w[j];
    for (int j = 0; j < r->k; j++)
        w[j] = (r->norm ? w[j] / s : w[j]) * (r->scale != 0.0f ? r->scale : 1.0);
}

static void test_route(void)
{
    printf("routing: softmax / sigmoid+bias / softmax-of-top-k\n");
    enum { T = 5 };
    const struct { int n, k, gating, norm; float scale; int bias; } cases[] = {
        {128, 8, FL_CUDA_GATING_SOFTMAX, 1, 0.0f, 0},
        {64, 4, FL_CUDA_GATING_SOFTMAX, 0, 0.0f, 0},
        {256, 8, FL_CUDA_GATING_SIGMOID, 1, 2.5f, 1},
        {32, 4, FL_CUDA_GATING_SOFTMAX_WEIGHT, 0, 0.0f, 0},
        {1000, 10, FL_CUDA_GATING_SOFTMAX, 1, 1.0f, 0},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const int n = cases[c].n, k = cases[c].k;
        float *l = malloc(sizeof(float) * (size_t)(n * T)), *bias = malloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n * T; i++)
            l[i] = frand() * 4.0f;
        for (int i = 0; i < n; i++)
            bias[i] = frand() * 0.5f;
        struct fl_cuda_route r = {.n_expert = n, .k = k, .gating = cases[c].gating,
                                  .norm = cases[c].norm, .scale = cases[c].scale};
        float *dl = up(l, sizeof(float) * (size_t)(n * T)), *db = up(bias, sizeof(float) * (size_t)n);
        r.d_sel_bias = cases[c].bias ? db : NULL;
        int32_t ids[T * 64], *dids = dev_alloc(sizeof(ids));
        float w[T * 64], *dwt = dev_alloc(sizeof(w));
        CHECK(fl_cuda_route(cu, dl, T, &r, dids, dwt, &err) == 0, "route: %s", err.msg);
        down(ids, dids, sizeof(int32_t) * (size_t)(T * k));
        down(w, dwt, sizeof(float) * (size_t)(T * k));
        int bad_ids = 0;
        double worst = 0;
        for (int t = 0; t < T; t++) {
            int rid[64];
            double rw[64];
            route_ref(l + t * n, n, &r, cases[c].bias ? bias : NULL, rid, rw);
            for (int j = 0; j < k; j++) {
                bad_ids += ids[t * k + j] != rid[j];
                worst = fmax(worst, fabs(w[t * k + j] - rw[j]));
            }
        }
        printf("  case %zu: %d experts, k %d: %d id mismatches, weight error %.2e\n", c, n, k,
               bad_ids, worst);
        CHECK(bad_ids == 0 && worst < 1e-5, "routing case %zu", c);
        fl_cuda_free(cu, dl), fl_cuda_free(cu, db), fl_cuda_free(cu, dids), fl_cuda_free(cu, dwt);
        free(l), free(bias);
    }
}

/* --- MoE row moves ------------------------------------------------------------------- */

static void test_moe_rows(void)
{
    printf("moe gather/scatter/combine\n");
    enum { T = 4, K = 2, W = 70 };
    float y[T * K * W], w[T * K], out[T * W], dst[T * K * W];
    for (int i = 0; i < T * K * W; i++)
        y[i] = frand();
    for (int i = 0; i < T * K; i++)
        w[i] = frand();
    float *dy = up(y, sizeof(y)), *dw = up(w, sizeof(w)), *dout = dev_alloc(sizeof(out));
    CHECK(fl_cuda_moe_combine(cu, dout, dy, dw, T, K, W, &err) == 0, "%s", err.msg);
    down(out, dout, sizeof(out));
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < W; c++) {
            double ref = 0;
            for (int j = 0; j < K; j++)
                ref += (double)w[t * K + j] * y[(t * K + j) * W + c];
            worst = fmax(worst, fabs(out[t * W + c] - ref));
        }
    CHECK(worst < 1e-6, "combine error %.3e", worst);

    const int32_t src_rows[3] = {3, 0, 2}, dst_rows[3] = {5, 1, 7};
    int32_t *dsr = up(src_rows, sizeof(src_rows)), *ddr = up(dst_rows, sizeof(dst_rows));
    float *ddst = up(y, sizeof(y)); /* untouched rows keep y */
    CHECK(fl_cuda_copy_rows(cu, ddst, dy, W, dsr, ddr, 3, &err) == 0, "%s", err.msg);
    down(dst, ddst, sizeof(dst));
    int bad = 0;
    for (int r = 0; r < T * K; r++) {
        int from = r;
        for (int j = 0; j < 3; j++)
            if (dst_rows[j] == r)
                from = src_rows[j];
        bad += memcmp(dst + r * W, y + from * W, sizeof(float) * W) != 0;
    }
    CHECK(bad == 0, "copy_rows: %d rows wrong", bad);
    fl_cuda_free(cu, dy), fl_cuda_free(cu, dw), fl_cuda_free(cu, dout), fl_cuda_free(cu, dsr);
    fl_cuda_free(cu, ddr), fl_cuda_free(cu, ddst);
}

/* --- attention -------------------------------------------------------------------------- */

static void test_attention(int softcap, int window, int sinks)
{
    enum { T = 3, POS0 = 150, NH = 4, NKV = 2, DK = 64, DV = 48, CTX = POS0 + T };
    const int64_t krow = NKV * DK, vrow = NKV * DV;
    float *q = malloc(sizeof(float) * T * NH * DK), *out = malloc(sizeof(float) * T * NH * DV);
    uint16_t *k = malloc(2 * CTX * krow), *v = malloc(2 * CTX * vrow);
    float sk[NH];
    for (int i = 0; i < T * NH * DK; i++)
        q[i] = frand();
    for (int64_t i = 0; i < CTX * krow; i++)
        k[i] = fl_f32_to_f16(frand());
    for (int64_t i = 0; i < CTX * vrow; i++)
        v[i] = fl_f32_to_f16(frand());
    for (int h = 0; h < NH; h++)
        sk[h] = frand() * 2.0f;
    struct fl_cuda_attn p = {.n_head = NH, .n_head_kv = NKV, .dk = DK, .dv = DV, .k_row = krow,
                             .v_row = vrow, .k_stride = DK, .v_stride = DV, .scale = 0.125f,
                             .softcap = softcap ? 5.0f : 0.0f, .window = window ? 40 : 0};
    float *dq = up(q, sizeof(float) * T * NH * DK), *dout = dev_alloc(sizeof(float) * T * NH * DV);
    uint16_t *dk = up(k, 2 * CTX * krow), *dv = up(v, 2 * CTX * vrow);
    float *dsk = up(sk, sizeof(sk));
    p.d_sinks = sinks ? dsk : NULL;
    CHECK(fl_cuda_attention(cu, dq, NH * DK, T, POS0, dk, dv, &p, dout, NH * DV, &err) == 0,
          "attention: %s", err.msg);
    down(out, dout, sizeof(float) * T * NH * DV);
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NH; h++) {
            const int kvh = h / (NH / NKV), qp = POS0 + t;
            const int lo = window && qp - 40 + 1 > 0 ? qp - 40 + 1 : 0;
            double s[CTX], mx = sinks ? sk[h] : -INFINITY, den = 0;
            for (int j = lo; j <= qp; j++) {
                double dot = 0;
                for (int i = 0; i < DK; i++)
                    dot += (double)fl_f16_to_f32(fl_f32_to_f16(q[(t * NH + h) * DK + i])) *
                           fl_f16_to_f32(k[j * krow + kvh * DK + i]);
                s[j] = softcap ? 5.0 * tanh(dot * 0.125 / 5.0) : dot * 0.125;
                mx = fmax(mx, s[j]);
            }
            for (int j = lo; j <= qp; j++)
                den += exp(s[j] - mx);
            if (sinks)
                den += exp(sk[h] - mx);
            for (int d = 0; d < DV; d++) {
                double o = 0;
                for (int j = lo; j <= qp; j++)
                    o += exp(s[j] - mx) * fl_f16_to_f32(v[j * vrow + kvh * DV + d]);
                worst = fmax(worst, fabs(out[(t * NH + h) * DV + d] - o / den));
            }
        }
    printf("  attention softcap=%d window=%d sinks=%d: max error %.2e\n", softcap, window, sinks,
           worst);
    CHECK(worst < 2e-5, "attention error %.3e", worst);
    fl_cuda_free(cu, dq), fl_cuda_free(cu, dout), fl_cuda_free(cu, dk), fl_cuda_free(cu, dv);
    fl_cuda_free(cu, dsk);
    free(q), free(out), free(k), free(v);
}

#ifdef FL_CUDA_EMU
/* --- the emulated device's own checks ------------------------------------------------ */

/* They are what makes the other tests meaningful in CI, so they are tested
 * too (a GPU has none of them: this part runs on the emulator only). */
static void test_emulator(void)
{
    printf("emulator: host reads of device memory fault, bad ranges fail, memory is finite\n");
    float *d = dev_alloc(sizeof(float) * 100), *dx = dev_alloc(sizeof(float) * 100);
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* die of it, not through ASan's report */
        const volatile float *p = d;
        _exit(p[0] == 0.0f ? 2 : 3);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
          "a host read of device memory did not fault (status %#x)", st);

    float host[101] = { 0 };
    CHECK(fl_cuda_add(cu, d, dx, 101, &err) == -EIO, "an add one past both buffers ran");
    CHECK(fl_cuda_upload(cu, d, host, sizeof(host), &err) == -EIO, "an upload past the end ran");
    CHECK(fl_cuda_add(cu, host, dx, 100, &err) == -EINVAL, "host memory taken as device memory");
    CHECK(fl_cuda_download(cu, host, host, sizeof(float), &err) == -EINVAL,
          "a download from host memory ran");

    /* rows by index: the rows inside their buffer copy (the emulator opens
     * only the pages they span), one that leaves its buffer fails the copy */
    int32_t rows[2] = { 0, 24 }, *d_rows = dev_alloc(sizeof(rows));
    for (int i = 0; i < 100; i++)
        host[i] = (float)i;
    CHECK(fl_cuda_upload(cu, dx, host, sizeof(float) * 100, &err) == 0, "%s", err.msg);
    CHECK(fl_cuda_upload(cu, d_rows, rows, sizeof(rows), &err) == 0, "%s", err.msg);
    CHECK(fl_cuda_copy_rows(cu, d, dx, 4, d_rows, NULL, 2, &err) == 0, "copy_rows: %s", err.msg);
    CHECK(fl_cuda_download(cu, host, d, sizeof(float) * 8, &err) == 0, "%s", err.msg);
    CHECK(host[0] == 0.0f && host[3] == 3.0f && host[4] == 96.0f && host[7] == 99.0f,
          "copy_rows: rows 0 and 24 copied as %g %g %g %g", host[0], host[3], host[4], host[7]);
    rows[1] = 25; /* floats 100..103: past dx's 100 */
    CHECK(fl_cuda_upload(cu, d_rows, rows, sizeof(rows), &err) == 0, "%s", err.msg);
    CHECK(fl_cuda_copy_rows(cu, d, dx, 4, d_rows, NULL, 2, &err) == -EIO,
          "a row index past its buffer copied");
    fl_cuda_free(cu, d_rows);

    /* an allocation beyond what is free fails, and its error does not
     * resurface at the next launch (the runtime keeps it as last error) */
    struct fl_cuda_info info;
    void *big = NULL;
    CHECK(fl_cuda_device_info(0, &info, &err) == 0, "%s", err.msg);
    CHECK(fl_cuda_malloc(cu, &big, info.free_bytes + 1, &err) == -ENOMEM,
          "more than free memory allocated");
    CHECK(fl_cuda_add(cu, d, dx, 100, &err) == 0, "a launch after a refused allocation: %s",
          err.msg);
    fl_cuda_free(cu, d), fl_cuda_free(cu, dx);
}
#endif

/* Gated DeltaNet's kernels against the double reference: 7 tokens in one
 * launch from reset state (the buffers' old contents must not matter), and
 * the same bits when the state carries 3 tokens into a launch of 4. */
static void delta_pass(const float *d_x, const float *d_w, const float *d_al, const float *d_be,
                       const struct fl_cuda_delta_net *p, float *d_cst, float *d_sst, float *d_c,
                       float *d_out, int t0, int n, bool reset)
{
    CHECK(fl_cuda_ssm_conv(cu, d_x + t0 * DN_W, d_w, d_cst, d_c + t0 * DN_W, n, DN_W, DN_CONV,
                           reset, &err) == 0, "ssm_conv: %s", err.msg);
    CHECK(fl_cuda_delta_net(cu, p, d_c + t0 * DN_W, d_al + t0 * DN_NV, d_be + t0 * DN_NV, d_sst,
                            d_out + t0 * DN_NV * DN_D, n, reset, &err) == 0, "delta_net: %s",
          err.msg);
}

static void test_delta_net(bool grouped)
{
    static struct dn_inputs in;
    static double ref[DN_NTOK][DN_NV * DN_D];
    dn_make_inputs(&in, 5);
    dn_reference(&in, grouped, ref);
    float *d_x = up(in.x, sizeof(in.x)), *d_w = up(in.conv_w, sizeof(in.conv_w));
    float *d_al = up(in.alpha, sizeof(in.alpha)), *d_be = up(in.beta, sizeof(in.beta));
    const struct fl_cuda_delta_net p = {
        .n_k_head = DN_NK, .n_v_head = DN_NV, .d = DN_D, .k_grouped = grouped,
        .d_dt_bias = up(in.dt, sizeof(in.dt)), .d_a = up(in.a, sizeof(in.a)), .eps = 1e-6f,
    };
    float junk[DN_NV * DN_D * DN_D];
    for (int i = 0; i < DN_NV * DN_D * DN_D; i++)
        junk[i] = 1e3f * frand();
    float *d_cst = up(junk, sizeof(float) * DN_W * (DN_CONV - 1)), *d_sst = up(junk, sizeof(junk));
    float *d_c = dev_alloc(sizeof(in.x)), *d_out = dev_alloc(sizeof(float) * DN_NTOK * DN_NV * DN_D);
    static float whole[DN_NTOK * DN_NV * DN_D], split[DN_NTOK * DN_NV * DN_D];
    delta_pass(d_x, d_w, d_al, d_be, &p, d_cst, d_sst, d_c, d_out, 0, DN_NTOK, true);
    down(whole, d_out, sizeof(whole));
    delta_pass(d_x, d_w, d_al, d_be, &p, d_cst, d_sst, d_c, d_out, 0, 3, true);
    delta_pass(d_x, d_w, d_al, d_be, &p, d_cst, d_sst, d_c, d_out, 3, DN_NTOK - 3, false);
    down(split, d_out, sizeof(split));
    double worst = 0;
    for (int t = 0; t < DN_NTOK; t++)
        for (int i = 0; i < DN_NV * DN_D; i++)
            worst = fmax(worst, fabs(whole[t * DN_NV * DN_D + i] - ref[t][i]));
    CHECK(worst < 1e-5, "delta rule (%s): max |diff| %g vs double", grouped ? "grouped" : "tiled",
          worst);
    CHECK(!memcmp(whole, split, sizeof(whole)), "delta rule: 3 + 4 tokens differ from 7 at once");
    printf("delta rule, key heads %s: max |diff| %.2g vs double, state carried bit for bit\n",
           grouped ? "grouped" : "tiled", worst);
    void *bufs[] = { d_x, d_w, d_al, d_be, (void *)p.d_dt_bias, (void *)p.d_a, d_cst, d_sst,
                     d_c, d_out };
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        fl_cuda_free(cu, bufs[i]);
}

int main(void)
{
    if (fl_cuda_available() == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    fl_types_init();
    struct fl_cuda_info info;
    if (fl_cuda_device_info(0, &info, &err) || fl_cuda_open(0, &cu, &err)) {
        printf("FAIL: %s\n", err.msg);
        return 1;
    }
    printf("device 0: %s, sm_%d%d, %zu MiB free of %zu\n", info.name, info.cc_major, info.cc_minor,
           info.free_bytes >> 20, info.total_bytes >> 20);
    test_matrices();
    test_rows();
    test_route();
    test_moe_rows();
    test_swiglu_oai();
    test_add_rows();
    test_copy_2d();
    test_delta_net(false);
    test_delta_net(true);
    printf("attention\n");
    test_attention(0, 0, 0);
    test_attention(1, 0, 0);
    test_attention(0, 1, 1);
#ifdef FL_CUDA_EMU
    test_emulator();
#endif
    CHECK(fl_cuda_sync(cu, &err) == 0, "sync: %s", err.msg);
    fl_cuda_close(cu);
    return check_summary("test-cuda-kernels");
}
